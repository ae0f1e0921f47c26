"""The pull-request check behind action.yml: lint with annotations, `compile --check` for every
environment, and a Markdown report of the rendered diff for the job summary and a PR comment.

    flatjob-ci --jobs jobs --overlays overlays --rendered rendered \\
        --summary "$GITHUB_STEP_SUMMARY" --comment flatjob-comment.md [--base origin/main] [--sarif F]

Every overlay folder (a folder of --overlays holding overlay.yaml) is an environment rendered
to --rendered/<name>; without overlays the jobs render straight to --rendered.  GitHub shows
a PR comment of at most 65,536 characters, so diffs are cut per file and then by files,
always saying what was left out.  Exit status: 1 on lint or compile errors or stale output.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click

from .display import code_block, html_text, log_line, markdown, markdown_code, visible_lines
from .errors import Diagnostic
from .output import TreeChanges

COMMENT_LIMIT = 65_536  # GitHub's maximum issue/PR comment body
MARKER = "<!-- flatjob -->"  # finds (and updates) the action's previous comment
PER_FILE_LINES = 300
MIN_FILE_LINES = 20


# --- pure: diffs and the report ----------------------------------------------------------


@dataclass(frozen=True)
class FileDiff:
    """One file's part of a unified diff."""

    name: str
    lines: tuple[str, ...]

    @property
    def counts(self) -> tuple[int, int]:
        """(added, removed) lines."""
        body = [ln for ln in self.lines if not ln.startswith(("+++", "---"))]
        return sum(ln.startswith("+") for ln in body), sum(ln.startswith("-") for ln in body)


def _path(header: str) -> str:
    """The file a ---/+++ header names, without git's a/ or b/."""
    path = header[4:].split("\t", 1)[0].strip()
    return path[2:] if path[:2] in ("a/", "b/") else path


def split_diff(diff: str) -> list[FileDiff]:
    """Split a unified diff (flatjob's or git's) into files."""
    files: list[FileDiff] = []
    current: list[str] = []
    name, in_body = "", False
    lines = diff.splitlines()
    for i, line in enumerate(lines):
        next_is_target = i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        starts = line.startswith("diff --git ") or (line.startswith("--- ") and next_is_target and (in_body or not current))
        if starts and current:
            files.append(FileDiff(name, tuple(current)))
            current, in_body = [], False
        if line.startswith("--- ") and not in_body:
            name = _path(line)
        elif line.startswith("+++ ") and not in_body:
            name = name if line[4:].startswith("/dev/null") else _path(line)
            in_body = True
        current.append(line)
    if current:
        files.append(FileDiff(name, tuple(current)))
    return files


def _cut(f: FileDiff, keep: int) -> str:
    if len(f.lines) <= keep:
        return "\n".join(f.lines) + "\n"
    return "\n".join(f.lines[:keep]) + f"\n... {len(f.lines) - keep} more lines of {f.name} not shown\n"


def shorten_diff(diff: str, budget: int) -> str:
    """The diff in at most `budget` characters: long files cut first, then whole files dropped."""
    files = split_diff(diff)
    if len(diff) <= budget:
        return diff
    keep = PER_FILE_LINES
    while True:
        parts = [_cut(f, keep) for f in files]
        if sum(map(len, parts)) <= budget or keep <= MIN_FILE_LINES:
            break
        keep = max(MIN_FILE_LINES, keep // 2)
    out, used = [], 0
    for index, part in enumerate(parts):
        rest = files[index:]
        note = f"... and {len(rest)} more changed file(s): {', '.join(f.name for f in rest[:20])}{', ...' if len(rest) > 20 else ''}\n"
        if used + len(part) + len(note) > budget:
            out.append(note[: max(budget - used, 0)])
            break
        out.append(part)
        used += len(part)
    return "".join(out)


@dataclass
class EnvReport:
    """What the check found for one environment."""

    name: str
    out: str  # the rendered folder, as the user names it
    command: str  # the command that brings it up to date
    stale_diff: str = ""  # compile --check's diff (empty when up to date)
    changes: str = ""  # the rendered diff against the base branch
    errors: int = 0
    files: tuple[int, int] = (0, 0)  # (to write, to delete)

    @property
    def status(self) -> str:
        if self.errors:
            return f"❌ {self.errors} compile error(s)"
        if self.stale_diff:
            return f"❌ stale: {self.files[0]} file(s) to write, {self.files[1]} to delete"
        return "✅ up to date"


def _section(title: str, diff: str, budget: int) -> str:
    """A collapsed diff; `title` is HTML (escaped by the caller), the diff shown as written
    (made visible first, so the budget counts the escapes)."""
    diff = visible_lines(diff)
    files = split_diff(diff)
    added = sum(f.counts[0] for f in files)
    removed = sum(f.counts[1] for f in files)
    head = f"<details><summary>{title}: {len(files)} file(s), +{added} -{removed}</summary>\n\n"
    tail = "\n</details>\n\n"
    body = code_block(shorten_diff(diff, max(budget - len(head) - len(tail) - 40, 0)), "diff")
    return head + body + tail


def report(envs: Sequence[EnvReport], lint_errors: int, lint_warnings: int, jobs: int, limit: int = COMMENT_LIMIT) -> str:
    """The Markdown report: a table of environments, then each diff, all within `limit`.

    Names, paths and diffs come from the pull request: every one is escaped for where it
    stands (display.py), so none can end a line, a table cell or the diff's code fence, or open
    an HTML comment that hides the rest.
    """
    lines = [MARKER, "## flatjob", "", f"Lint: {lint_errors} error(s), {lint_warnings} warning(s) in {jobs} job(s).", ""]
    lines += ["| environment | rendered | status |", "|---|---|---|"]
    lines += [f"| {markdown(e.name)} | {markdown_code(e.out)} | {e.status} |" for e in envs]
    head = "\n".join(lines) + "\n\n"
    fixes = [f"- {markdown_code(e.command)}" for e in envs if e.stale_diff]
    foot = ("To bring the rendered output up to date, run and commit:\n\n" + "\n".join(fixes) + "\n") if fixes else ""
    sections = [(f"{html_text(e.name)}: rendered changes", e.changes) for e in envs if e.changes]
    sections += [(f"{html_text(e.name)}: what <code>flatjob compile</code> would change (stale)", e.stale_diff) for e in envs if e.stale_diff]
    budget = limit - len(head) - len(foot) - 200
    share = budget // len(sections) if sections else 0
    return head + "".join(_section(title, diff, share) for title, diff in sections) + foot


# --- I/O: run the checks ------------------------------------------------------------------


@dataclass
class Environment:
    """An environment: its overlay folder (None without overlays) and rendered folder."""

    name: str
    overlay: Path | None
    out: Path

    def command(self, jobs: Sequence[str]) -> str:
        overlay = f" --overlay {self.overlay.as_posix()}" if self.overlay else ""
        return f"flatjob compile {' '.join(jobs)}{overlay} -o {self.out.as_posix()}"


def environments(overlays: Path, rendered: Path) -> list[Environment]:
    """One environment per overlay folder; a single one rendering to `rendered` without any."""
    from .overlay.file import find_file

    folders = sorted(d for d in overlays.iterdir() if d.is_dir() and find_file(d)) if overlays.is_dir() else []
    return [Environment(d.name, d, rendered / d.name) for d in folders] or [Environment("default", None, rendered)]


@dataclass
class Run:
    """Everything one CI run found."""

    lint: list[Diagnostic] = field(default_factory=list)
    compile: list[Diagnostic] = field(default_factory=list)
    envs: list[EnvReport] = field(default_factory=list)
    jobs: int = 0

    @property
    def failed(self) -> bool:
        return any(d.is_error for d in (*self.lint, *self.compile)) or any(e.stale_diff for e in self.envs)


GIT_DIFF_BYTES = 8 * 1024 * 1024


def git_diff(base: str, path: Path) -> str:
    """The diff of `path` between `base` and the working tree ('' when git cannot tell).

    Read as bytes: text mode would turn every carriage return of a committed file into a line
    break (universal newlines), which the report could not tell from the diff's own.  At most
    GIT_DIFF_BYTES are read (the comment shows 65 536 characters): a committed file of 90 MB
    must not be held whole.
    """
    try:
        with subprocess.Popen(["git", "diff", "--no-color", "--no-ext-diff", "--no-textconv", base, "--", str(path)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
            timer = threading.Timer(120, proc.kill)  # a hung git ends, as the old timeout=120 ended it
            timer.start()
            try:
                assert proc.stdout is not None
                raw = proc.stdout.read(GIT_DIFF_BYTES + 1)
                cut = len(raw) > GIT_DIFF_BYTES
                if cut:
                    proc.kill()
                    raw = raw[:GIT_DIFF_BYTES] + b"\n(flatjob: the diff goes on; it is longer than flatjob reads)\n"
                code = proc.wait()
            finally:
                timer.cancel()
    except (OSError, subprocess.SubprocessError):
        return ""
    return raw.decode("utf-8", "replace") if code == 0 or (cut and code == -9) else ""


def check(jobs: Sequence[str], envs: Sequence[Environment], base: str | None = None) -> Run:
    """Lint the jobs and compile --check every environment."""
    from .journal import session
    from .lint import lint_paths
    from .outdir import LinkFound, NotAFile
    from .output import unified_diff
    from .overlay import load_overlays
    from .pipeline import compile_paths, no_overlay

    linted = lint_paths(jobs)
    run = Run(lint=list(linted.diagnostics), jobs=linted.jobs)
    for env in envs:
        result = compile_paths(jobs, overlay=load_overlays([env.overlay]) if env.overlay else no_overlay)
        seen = {(d.path, d.line, d.col, d.message) for d in (*run.lint, *run.compile)}
        run.compile += [d for d in result.diagnostics if (d.path, d.line, d.col, d.message) not in seen]
        rep = EnvReport(env.name, env.out.as_posix(), env.command(jobs), errors=sum(d.is_error for d in result.diagnostics))
        if not result.failed:
            unfinished = False
            try:
                with session(env.out, write=False) as s:
                    changes = s.plan(result.tree(env.out))
                    unfinished = s.interrupted or s.foreign
            except (LinkFound, NotAFile) as exc:  # the rendered folder itself (or a folder on its way)
                changes = TreeChanges()
                run.compile.append(Diagnostic("FJ702", "is a symbolic link (or not a plain file or folder); flatjob never reads through it", exc.where(env.out)))
                rep.errors += 1
            if unfinished:  # a journal (a killed compile's, or one committed): stale until a compile clears it
                run.compile.append(Diagnostic("FJ700", "holds a compile's journal (.flatjob-journal.json): run `flatjob compile` and commit the result", env.out.as_posix()))
                rep.errors += 1
            if changes.links or changes.blocked:  # never read (or print) what a link points at
                run.compile += [Diagnostic("FJ702", "is a symbolic link (or not a plain file or folder); flatjob never reads through it", (env.out / rel).as_posix()) for rel in (*changes.links, *changes.blocked)]
                rep.errors += len(changes.links) + len(changes.blocked)
            else:
                rep.stale_diff = unified_diff(changes) if not changes.empty else ""
                rep.files = (len(changes.write), len(changes.delete))
        rep.changes = git_diff(base, env.out) if base else ""
        run.envs.append(rep)
    return run


@click.command()
@click.option("--jobs", "jobs", multiple=True, default=["jobs"], show_default=True, help="Job spec folders or files (repeatable).")
@click.option("--overlays", default="overlays", show_default=True, type=click.Path(), help="Folder whose sub-folders with overlay.yaml are environments.")
@click.option("--rendered", default="rendered", show_default=True, type=click.Path(), help="Rendered output root (one sub-folder per environment).")
@click.option("--base", default=None, help="Git ref to diff rendered/ against (the PR's base branch).")
@click.option("--summary", type=click.Path(dir_okay=False), default=None, help="Append the report here (GITHUB_STEP_SUMMARY).")
@click.option("--comment", type=click.Path(dir_okay=False), default=None, help="Write the report here, for a PR comment.")
@click.option("--sarif", type=click.Path(dir_okay=False), default=None, help="Write lint and compile findings as SARIF here.")
def main(jobs: tuple[str, ...], overlays: str, rendered: str, base: str | None, summary: str | None, comment: str | None, sarif: str | None) -> None:
    """Lint, compile --check every environment and report; annotations go to stdout."""
    from .report import format_github, format_sarif

    missing = [j for j in jobs if not Path(j).exists()]
    if missing:
        raise click.UsageError(f"job path(s) not found: {', '.join(missing)}")
    run = check(list(jobs), environments(Path(overlays), Path(rendered)), base)
    findings = [*run.lint, *run.compile]
    sys.stdout.write(format_github(findings))
    errors = sum(d.is_error for d in run.lint)
    text = report(run.envs, errors, len(run.lint) - errors, run.jobs)
    if summary:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(text)
    if comment:
        Path(comment).write_text(text, encoding="utf-8")
    if sarif:
        Path(sarif).write_text(format_sarif(findings), encoding="utf-8")
    for env in run.envs:
        click.echo(f"environment {log_line(env.name)}: {env.status}", err=True)
    sys.exit(1 if run.failed else 0)


def entry() -> None:
    """The `flatjob-ci` script (action.yml): no traceback, and never a module from the checkout."""
    from .cli import guarded

    guarded(main, None, "flatjob-ci")


if __name__ == "__main__":
    entry()
