"""The pull-request check behind action.yml: lint with annotations, `compile --check` for every
environment, and a Markdown report of the rendered diff for the job summary and a PR comment.

    flatjob-ci --jobs jobs --overlays overlays --rendered rendered \\
        --summary "$GITHUB_STEP_SUMMARY" --comment flatjob-comment.md [--base origin/main] [--sarif F]

Every overlay folder (a folder of --overlays holding overlay.yaml) is an environment rendered
to --rendered/<name>; without overlays the jobs render straight to --rendered.  GitHub shows
a PR comment of at most 65,536 characters: everything in it counts (table, diffs, commands),
flatjob's own files come first (pod templates before jobs) and are always named, files it does
not write are named but never shown.  Each section is built whole and cut only when over its
share (per file, then by files); sections are shown by the room they need, failing
environments first and those changing the base branch's files before those a pull request
adds, and the ones left out are named.  Exit status: 1 on lint or compile errors or stale output.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

import click

from .display import (
    code_block,
    html_text,
    log_line,
    markdown,
    markdown_code,
    visible,
    visible_lines,
)
from .errors import Diagnostic
from .output import META_FILE, RETIRED_NAMES, TreeChanges, owned

COMMENT_LIMIT = 65_536  # GitHub's maximum issue/PR comment body
MARGIN = 2_048  # kept free below the limit: GitHub may count what we do not (see _size)
MARKER = "<!-- flatjob -->"  # finds (and updates) the action's previous comment
PER_FILE_LINES = 300
MIN_FILE_LINES = 20
TABLE_ROWS = 30  # environments in the table; the job log names every one
FIX_ROWS = 10  # commands listed for stale environments
NAME_CHARS = 60  # of a name a pull request chooses (an environment, a file), shown cut in the middle
COMMAND_CHARS = 1024  # a command shown whole (a folder name is at most 255 bytes), or not at all
SECTION_MIN = 800  # the room a section shown is sure of (when it needs more): its summary (< 600) and a few names
NOTE_NAMES = 20  # names in a note of what is left out (files, environments)
DIFF_MIN = 80  # a section shows no diff rather than a diff of fewer characters
# What a reviewer reads first among flatjob's files: the pods, then the job; the metadata last.
FILE_RANK = {name: rank for rank, name in enumerate((
    "podtemplates.yaml", "job.yaml", "tensorboard.yaml", "runtime.yaml", "service.yaml", "config.yaml",
    "podgroup.yaml", "kustomization.yaml", *sorted(RETIRED_NAMES), META_FILE))}
FOREIGN = "Not written by flatjob (no kustomization flatjob writes lists them; their lines are not shown):"


# --- pure: diffs and the report ----------------------------------------------------------


def _size(text: str) -> int:
    """What GitHub may count for `text`: UTF-16 units (a character beyond U+FFFF is two) and each
    line break twice (a form posts it as CR LF)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2 + text.count("\n")


def _clip(text: str, chars: int) -> str:
    """`text` made visible and at most `chars` long, cut in the middle (both ends tell names apart)."""
    shown = visible(text)
    if len(shown) <= chars:
        return shown
    head = (chars - 1) // 2
    return shown[:head] + "…" + shown[len(shown) - (chars - 1 - head):]


@dataclass(frozen=True)
class FileDiff:
    """One file's part of a unified diff; `ours`: a file flatjob writes."""

    name: str
    lines: tuple[str, ...]
    ours: bool = True

    @property
    def counts(self) -> tuple[int, int]:
        """(added, removed) lines."""
        body = [ln for ln in self.lines if not ln.startswith(("+++", "---"))]
        return sum(ln.startswith("+") for ln in body), sum(ln.startswith("-") for ln in body)

    def has_header(self, line: str) -> bool:
        """Whether `line` (`--- /dev/null`: added; `+++ /dev/null`: deleted) is in the file's header."""
        return line in self.lines[:next((i for i, ln in enumerate(self.lines) if ln.startswith("@@")), len(self.lines))]


# git's C-style quoting of a path holding a control character, a quote or a backslash.
_GIT_ESCAPES = {b"a": 7, b"b": 8, b"t": 9, b"n": 10, b"v": 11, b"f": 12, b"r": 13}
_QUOTED = re.compile(rb"\\([0-7]{3}|.)", re.DOTALL)


def _unquote(path: str) -> str:
    """A path as git wrote it in a header (`"a/\\001x"`), as the file system names it."""
    if len(path) < 2 or path[0] != '"' or path[-1] != '"':
        return path
    raw = path[1:-1].encode("utf-8", "surrogateescape")
    raw = _QUOTED.sub(lambda m: bytes([int(m[1], 8) if len(m[1]) == 3 else _GIT_ESCAPES.get(m[1], m[1][0])]), raw)
    return raw.decode("utf-8", "surrogateescape")


def _path(header: str) -> str:
    """The file a ---/+++ header names, without git's a/ or b/."""
    path = _unquote(header[4:].split("\t", 1)[0].strip())
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


def rebased(f: FileDiff, root: str | None, written: frozenset[str] | None) -> FileDiff:
    """`f` (from git) named from the rendered folder `root` (as git names it; None: unknown),
    with a short header, and `ours` only when flatjob writes that name there now (`written`;
    None when compile failed: any name flatjob writes) or wrote it before and it is deleted.

    A pull request may commit anything under the rendered folder: only what flatjob writes may
    compete with the job's own files for the reviewer's attention.
    """
    prefix = f"{root}/" if root else ""
    if root is None or not f.name.startswith(prefix):
        return FileDiff(f.name, f.lines, ours=False)
    rel = f.name[len(prefix):]
    ours = (rel in written if written is not None else False) or (
        (written is None or f.has_header("+++ /dev/null")) and (owned(rel) or rel == META_FILE))
    start = next((i for i, ln in enumerate(f.lines) if ln.startswith(("@@", "Binary files "))), len(f.lines))
    header = ("--- /dev/null" if f.has_header("--- /dev/null") else f"--- a/{visible(rel)}",
              "+++ /dev/null" if f.has_header("+++ /dev/null") else f"+++ b/{visible(rel)}")
    return FileDiff(rel, (*header, *f.lines[start:]), ours)


def ordered(files: Sequence[FileDiff]) -> list[FileDiff]:
    """flatjob's files first, pod templates before jobs (FILE_RANK), then everything else."""
    return sorted(files, key=lambda f: (not f.ours, FILE_RANK.get(f.name.rsplit("/", 1)[-1], len(FILE_RANK)) if f.ours else 0, f.name))


def _fit(parts: Sequence[str], budget: int, note: Callable[[int], str]) -> str:
    """All of `parts` when they fit in `budget`; else as many as fit with `note(index of the first
    left out)` after them, the note cut to fit."""
    if sum(map(_size, parts)) <= budget:
        return "".join(parts)
    out, used = [], 0
    for index, part in enumerate(parts):
        if used + _size(part) + _size(note(index + 1)) > budget:
            left = note(index)
            while left and used + _size(left) > budget:
                left = left[: len(left) // 2]
            return "".join(out) + left
        out.append(part)
        used += _size(part)
    return "".join(out)


def _cut(f: FileDiff, keep: int) -> str:
    if len(f.lines) <= keep:
        return "\n".join(f.lines) + "\n"
    return "\n".join(f.lines[:keep]) + f"\n... {len(f.lines) - keep} more lines of {visible(f.name)} not shown\n"


def _names(names: Sequence[str]) -> str:
    """The first NOTE_NAMES of `names` (each already clipped and escaped), then ', ...' for the rest."""
    return ", ".join(names[:NOTE_NAMES]) + (", ..." if len(names) > NOTE_NAMES else "")


def _more_files(files: Sequence[FileDiff]) -> Callable[[int], str]:
    def note(index: int) -> str:
        rest = files[index:]
        return f"... and {len(rest)} more changed file(s): {_names([_clip(f.name, NAME_CHARS) for f in rest])}\n"
    return note


def shorten_diff(diff: str | Sequence[FileDiff], budget: int) -> str:
    """The diff in at most `budget` (_size): long files cut first, then whole files dropped."""
    files = split_diff(diff) if isinstance(diff, str) else list(diff)
    whole = diff if isinstance(diff, str) else "".join(_cut(f, len(f.lines)) for f in files)
    if _size(whole) <= budget:
        return whole
    keep = PER_FILE_LINES
    while True:
        parts = [_cut(f, keep) for f in files]
        if sum(map(_size, parts)) <= budget or keep <= MIN_FILE_LINES:
            break
        keep = max(MIN_FILE_LINES, keep // 2)
    return _fit(parts, budget, _more_files(files))


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
    root: str | None = None  # the rendered folder as git names it in `changes` (None: unknown)
    written: frozenset[str] | None = None  # the files compile writes there (None: compile failed)

    @property
    def status(self) -> str:
        if self.errors:
            return f"❌ {self.errors} compile error(s)"
        if self.stale_diff:
            return f"❌ stale: {self.files[0]} file(s) to write, {self.files[1]} to delete"
        return "✅ up to date"

    @property
    def rank(self) -> int:
        """Where the table shows it: failing first, then changed, then the rest."""
        return 0 if self.errors or self.stale_diff else 1 if self.changes else 2


@dataclass(frozen=True)
class Section:
    """One environment's collapsed diff: `title` is HTML, `files` in the order shown (ordered),
    `label` names it (Markdown) when it is left out, `rank` is its environment's."""

    title: str
    files: tuple[FileDiff, ...]
    label: str = ""
    rank: int = 2

    @property
    def order(self) -> tuple[int, bool]:
        """Where it is shown: failing environments first, then changed ones; among those, one
        changing a file of flatjob's the base branch has before one the pull request only adds
        (a pull request adding environments must not push the real one out)."""
        return self.rank, not any(f.ours and not f.has_header("--- /dev/null") for f in self.files)


def _listing(f: FileDiff) -> str:
    added, removed = f.counts
    return f"- {markdown_code(_clip(f.name, NAME_CHARS))} +{added} -{removed}\n"


def _diff_block(files: Sequence[FileDiff], room: int) -> str:
    """`files` as a diff code block in at most `room` (_size), measured as rendered (its fence
    grows with the backticks shown); '' when not even DIFF_MIN of the diff fits."""
    inner = room
    while inner > DIFF_MIN:
        block = code_block(shorten_diff(files, inner), "diff")
        over = _size(block) - room
        if over <= 0:
            return block
        inner -= over
    return ""


def section(s: Section, budget: int) -> str:
    """The section in at most `budget` (_size), or '' when not even its summary fits: every
    file of flatjob's named first, then its diff, then the names of the files flatjob did not
    write (never their lines: a pull request's padding), each with a note of what is left out.
    The whole section is built and measured; only one over `budget` is cut."""
    ours = [f for f in s.files if f.ours]
    foreign = [f for f in s.files if not f.ours]
    added = sum(f.counts[0] for f in ours)
    removed = sum(f.counts[1] for f in ours)
    not_ours = f", {len(foreign)} not written by flatjob" if foreign else ""
    head = f"<details><summary>{s.title}: {len(s.files)} file(s){not_ours}, +{added} -{removed}</summary>\n\n"
    tail = "\n</details>\n\n"
    others = [f"\n{FOREIGN}\n\n", *map(_listing, foreign)] if foreign else []

    def built(names: str, body: str, foreign_names: str) -> str:
        return head + names + ("\n" if names and body else "") + body + foreign_names + tail

    whole = built("".join(map(_listing, ours)), code_block(shorten_diff(ours, 10**12), "diff") if ours else "", "".join(others))
    if _size(whole) <= budget:
        return whole
    left = budget - _size(head) - _size(tail)
    if left < 0:
        return ""
    names = _fit([_listing(f) for f in ours], left, lambda i: f"- ... and {len(ours) - i} more of flatjob's file(s)\n")
    left -= _size(names)
    reserve = min(sum(map(_size, others)), left // 4)
    gap = _size("\n") if names else 0  # the blank line between the names and the diff
    body = _diff_block(ours, left - reserve - gap) if ours else ""
    left -= _size(body) + (gap if body else 0)
    foreign_names = _fit(others, left, lambda i: f"- ... and {len(others) - i} more\n" if i else "")
    return built(names, body, foreign_names)


def _shares(needs: Sequence[int], budget: int) -> list[int]:
    """`budget` split among sections: none gets more than it needs, the rest share it equally."""
    shares = [0] * len(needs)
    left = budget
    for n, i in enumerate(sorted(range(len(needs)), key=lambda i: needs[i])):
        shares[i] = min(needs[i], left // (len(needs) - n))
        left -= shares[i]
    return shares


def _left_out(sections: Sequence[Section]) -> str:
    """The note naming the sections not shown."""
    if not sections:
        return ""
    return f"... and {len(sections)} more environment(s) with changes, not shown for lack of room in this comment: {_names([s.label for s in sections])}\n\n"


def _sections(sections: Sequence[Section], budget: int) -> str:
    """The sections in order, as many as fit with the room each is sure of (what it needs, at
    most SECTION_MIN) and the note naming the rest; those shown share `budget` (_shares)."""
    wholes = [section(s, 10**12) for s in sections]  # built once: one that fits its share is shown as it is
    needs = [_size(w) for w in wholes]
    floors = [0, *accumulate(min(need, SECTION_MIN) for need in needs)]
    shown = next((k for k in range(len(sections), 0, -1) if floors[k] + _size(_left_out(sections[k:])) <= budget), 0)
    note = _left_out(sections[shown:])
    if _size(note) > budget:  # not even the names fit (a budget this small is never given)
        note = f"... and {len(sections) - shown} more environment(s) with changes: no room left in this comment\n\n"
    # a share is at least its floor, and a floor holds the summary: every section shown is there
    parts = [whole if need <= share else section(s, share)
             for s, whole, need, share in zip(sections[:shown], wholes[:shown], needs[:shown], _shares(needs[:shown], budget - _size(note)), strict=True)]
    return "".join(parts) + note


def _table(envs: Sequence[EnvReport]) -> str:
    """The environments, failing ones first, at most TABLE_ROWS of them."""
    rows = sorted(envs, key=lambda e: e.rank)
    lines = ["| environment | rendered | status |", "|---|---|---|"]
    lines += [f"| {markdown(_clip(e.name, NAME_CHARS))} | {markdown_code(_clip(e.out, NAME_CHARS))} | {e.status} |" for e in rows[:TABLE_ROWS]]
    more = rows[TABLE_ROWS:]
    failing = sum(e.rank == 0 for e in more)
    note = f"\n... and {len(more)} more environment(s), {failing} of them failing: the job log names each.\n" if more else ""
    return "\n".join(lines) + "\n" + note + "\n"


def _fixes(envs: Sequence[EnvReport]) -> str:
    """The commands that bring stale environments up to date, at most FIX_ROWS of them."""
    stale = [e for e in envs if e.stale_diff]
    if not stale:
        return ""
    fixes = [f"- {_fix(e)}\n" for e in stale[:FIX_ROWS]]
    more = f"- ... and {len(stale) - FIX_ROWS} more, each with its own --overlay and -o\n" if len(stale) > FIX_ROWS else ""
    return "To bring the rendered output up to date, run and commit:\n\n" + "".join(fixes) + more


def _fix(e: EnvReport) -> str:
    """The environment's command, whole and as a shell reads it, or none: a command cut or
    escaped for display would be another command, and a maintainer pastes what the comment
    shows (review of round 16: an overlay folder named `a;touch${IFS}x;b` ran `touch`)."""
    if len(e.command) <= COMMAND_CHARS and visible(e.command) == e.command:
        return markdown_code(e.command)
    return f"the command for {markdown_code(_clip(e.name, NAME_CHARS))} is too long, or holds characters a comment cannot show: the job log prints it"


def report(envs: Sequence[EnvReport], lint_errors: int, lint_warnings: int, jobs: int, limit: int = COMMENT_LIMIT) -> str:
    """The Markdown report: a table of environments, then each diff, the whole within `limit`
    less MARGIN (everything counted: table, diffs, commands).

    Names, paths and diffs come from the pull request: every one is escaped for where it
    stands (display.py), so none can end a line, a table cell or the diff's code fence, or open
    an HTML comment that hides the rest; and cut (NAME_CHARS, TABLE_ROWS, FIX_ROWS), so none
    can take the room the diffs need.
    """
    head = "\n".join([MARKER, "## flatjob", "", f"Lint: {lint_errors} error(s), {lint_warnings} warning(s) in {jobs} job(s).", "", ""]) + _table(envs)
    foot = _fixes(envs)
    sections = [Section(f"{html_text(_clip(e.name, NAME_CHARS))}: rendered changes", tuple(ordered([rebased(f, e.root, e.written) for f in split_diff(visible_lines(e.changes))])),
                        markdown_code(_clip(e.name, NAME_CHARS)), e.rank)
                for e in envs if e.changes]
    sections += [Section(f"{html_text(_clip(e.name, NAME_CHARS))}: what <code>flatjob compile</code> would change (stale)", tuple(ordered(split_diff(visible_lines(e.stale_diff)))),
                         f"{markdown_code(_clip(e.name, NAME_CHARS))} (stale)", e.rank)
                 for e in envs if e.stale_diff]
    sections.sort(key=lambda s: s.order)  # stable: the folders' order within a rank
    return head + _sections(sections, limit - MARGIN - _size(head) - _size(foot)) + foot


# --- I/O: run the checks ------------------------------------------------------------------


@dataclass
class Environment:
    """An environment: its overlay folder (None without overlays) and rendered folder."""

    name: str
    overlay: Path | None
    out: Path

    def command(self, jobs: Sequence[str]) -> str:
        """The command that renders this environment, each word shell-quoted (names are the PR's)."""
        overlay = ["--overlay", self.overlay.as_posix()] if self.overlay else []
        return shlex.join(["flatjob", "compile", *jobs, *overlay, "-o", self.out.as_posix()])


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
# A diff of the bytes as committed, whatever a `.gitattributes` of the pull request says: no
# colour, no external diff or textconv driver, and every file as text (`--text` overrides
# `binary`, `-diff` and a driver's `binary = true`).
_UNATTRIBUTED = ("--no-color", "--no-ext-diff", "--no-textconv", "--text")


def _no_filters() -> list[str]:
    """`-c` options that turn off every filter driver configured here (system, global, the
    repository's: `git lfs install` sets filter.lfs.*), which a `filter=` attribute of the pull
    request would otherwise run over the working tree's files before they are compared.  An
    empty `process` and `clean` is no filter (convert.c apply_filter), and it is not required."""
    try:
        done = subprocess.run(["git", "config", "-z", "--name-only", "--get-regexp", r"^filter\."], capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return []
    names = {key.rsplit(".", 1)[0] for key in os.fsdecode(done.stdout).split("\0") if key.count(".") >= 2}
    return [opt for name in sorted(names) for opt in ("-c", f"{name}.process=", "-c", f"{name}.clean=", "-c", f"{name}.required=false")]


def git_diff(base: str, path: Path) -> str:
    """The diff of `path` between `base` and the working tree ('' when git cannot tell).

    Read as bytes: text mode would turn every carriage return of a committed file into a line
    break (universal newlines), which the report could not tell from the diff's own.  At most
    GIT_DIFF_BYTES are read (the comment shows 65 536 characters): a committed file of 90 MB
    must not be held whole.

    What the pull request's own `.gitattributes` says is not obeyed (_UNATTRIBUTED): `-diff` or
    `binary` on rendered/ made git print "Binary files differ" for every changed pod, and a
    `filter=` naming a driver the machine has (git-lfs) shows what that driver makes of the file.
    """
    try:
        with subprocess.Popen(["git", "-c", "core.quotePath=true", *_no_filters(), "diff", *_UNATTRIBUTED, base, "--", str(path)],
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


def git_knows(ref: str) -> bool:
    """Whether git here knows `ref` as a commit (a ref it cannot read gives no diff at all)."""
    if ref.startswith("-"):  # never an option to git
        return False
    try:
        done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def git_top() -> Path | None:
    """The top folder of the git work tree here (None outside one)."""
    try:
        done = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(os.fsdecode(done.stdout.rstrip(b"\n"))).resolve() if done.returncode == 0 else None


def in_repo(top: Path | None, path: Path) -> str | None:
    """`path` as git names it in a diff (from the top of the work tree), or None outside it."""
    if top is None:
        return None
    rel = Path(os.path.relpath(path.resolve(), top)).as_posix()
    return None if rel == ".." or rel.startswith("../") else "" if rel == "." else rel


def check(jobs: Sequence[str], envs: Sequence[Environment], base: str | None = None) -> Run:
    """Lint the jobs and compile --check every environment."""
    from .journal import session
    from .lint import lint_paths
    from .outdir import LinkFound, NotAFile
    from .output import RIVAL_MESSAGE, unified_diff
    from .overlay import load_overlays
    from .pipeline import compile_paths, no_overlay

    # A jobs folder with no job left passes, as its environments' compile --check does: removing
    # a repository's last job is a change CI reviews (compile needs --allow-empty to prune them).
    linted = lint_paths(jobs, allow_empty=True)
    top = git_top() if base else None
    run = Run(lint=list(linted.diagnostics), jobs=linted.jobs)
    for env in envs:
        result = compile_paths(jobs, overlay=load_overlays([env.overlay]) if env.overlay else no_overlay)
        seen = {(d.path, d.line, d.col, d.message) for d in (*run.lint, *run.compile)}
        run.compile += [d for d in result.diagnostics if (d.path, d.line, d.col, d.message) not in seen]
        rep = EnvReport(env.name, env.out.as_posix(), env.command(jobs), errors=sum(d.is_error for d in result.diagnostics), root=in_repo(top, env.out))
        if not result.failed:
            unfinished = False
            tree = result.tree(env.out)
            rep.written = frozenset(tree)
            try:
                with session(env.out, write=False) as s:
                    changes = s.plan(tree)
                    unfinished = s.interrupted or s.foreign
            except (LinkFound, NotAFile) as exc:  # the rendered folder itself (or a folder on its way)
                changes = TreeChanges()
                run.compile.append(Diagnostic("FJ702", "is a symbolic link (or not a plain file or folder); flatjob never reads through it", exc.where(env.out)))
                rep.errors += 1
            if unfinished:  # a journal (a killed compile's, or one committed): stale until a compile clears it
                run.compile.append(Diagnostic("FJ700", "holds a compile's journal (.flatjob-journal.json): run `flatjob compile` and commit the result", env.out.as_posix()))
                rep.errors += 1
            if changes.rivals:  # kustomize refuses the folder, whatever flatjob's files hold
                run.compile += [Diagnostic("FJ701", RIVAL_MESSAGE, (env.out / rel).as_posix()) for rel in changes.rivals]
                rep.errors += len(changes.rivals)
            if changes.links or changes.blocked:  # never read (or print) what a link points at
                run.compile += [Diagnostic("FJ702", "is a symbolic link (or not a plain file or folder); flatjob never reads through it", (env.out / rel).as_posix()) for rel in (*changes.links, *changes.blocked)]
                rep.errors += len(changes.links) + len(changes.blocked)
            else:
                rep.stale_diff = unified_diff(changes) if not changes.empty else ""
                rep.files = (len(changes.write), len(changes.delete))
        rep.changes = git_diff(base, env.out) if base else ""
        run.envs.append(rep)
    return run


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--jobs", "jobs", multiple=True, default=["jobs"], show_default=True, help="Job spec folders or files (repeatable).")
@click.option("--overlays", default="overlays", show_default=True, type=click.Path(), help="Folder whose sub-folders with overlay.yaml are environments.")
@click.option("--rendered", default="rendered", show_default=True, type=click.Path(), help="Rendered output root (one sub-folder per environment).")
@click.option("--base", default=None, help="Git ref to diff rendered/ against (the PR's base branch).")
@click.option("--summary", type=click.Path(dir_okay=False), default=None, help="Append the report here (GITHUB_STEP_SUMMARY).")
@click.option("--comment", type=click.Path(dir_okay=False), default=None, help="Write the report here, for a PR comment.")
@click.option("--sarif", type=click.Path(dir_okay=False), default=None, help="Write lint and compile findings as SARIF here.")
def main(jobs: tuple[str, ...], overlays: str, rendered: str, base: str | None, summary: str | None, comment: str | None, sarif: str | None) -> None:
    """Lint, compile --check every environment and report, as flatjob's GitHub Action does.

    Annotations (`::error file=...`) go to stdout and a status line per environment to stderr;
    the report (a table of environments, the rendered diff against --base, the command that
    brings a stale environment up to date) goes to the --summary and --comment files. On a
    laptop, in the repository:

    \b
      flatjob-ci --base main --summary report.md

    \b
    Exit status: 0 lint clean and every environment up to date, 1 lint errors or a stale
    environment, 2 usage error.
    """
    from .report import format_github, format_sarif

    missing = [j for j in jobs if not Path(j).exists()]
    if missing:
        raise click.UsageError(f"job path(s) not found: {', '.join(missing)}")
    if base is not None and not git_knows(base):  # the report read "no rendered changes", unsaid
        click.echo(f"flatjob-ci: --base {log_line(base)}: git knows no such commit here (misspelt, or not fetched); the report shows no rendered diff", err=True)
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
        if env.stale_diff:
            click.echo(f"  to bring it up to date, run and commit: {log_line(env.command)}", err=True)
    sys.exit(1 if run.failed else 0)


def entry() -> None:
    """The `flatjob-ci` script (action.yml): no traceback, and never a module from the checkout."""
    from .cli import guarded

    guarded(main, None, "flatjob-ci")


if __name__ == "__main__":
    entry()
