"""The CI check (`flatjob-ci`, behind action.yml) on a pull request built to
hide its changes from the reviewer, and `flatjob diff` / `compile --check` on committed bytes.

The pull request changes a job (a third worker: a new pod), and beside it commits what an
attacker would: a non-flatjob file under rendered/prod/ whose carriage returns close the diff's
code fence and open `<!--` (before issue 21 everything after it, the real job changes, was
invisible in the rendered comment, while the table said "up to date"), and an overlay folder
whose name holds newlines, `::error` and `::set-output` and a forged table row.  The check
runs in a capped child (kit.py) against a real git repository; its comment is rendered with
a CommonMark renderer (markdown-it-py, GFM tables, raw HTML allowed as GitHub allows it):
every changed pod of the real diff is visible outside any HTML comment, the table has one
row per environment, and no line of the Actions log starts a workflow command but flatjob's
own annotations.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .kit import BOUNDED_CPU, JOB, MEASURED, Sandbox, assert_clean_exit, run, script

markdown_it = pytest.importorskip("markdown_it")

HIDE = "x\r```\r<!--\r"
# Characters that show nothing or move what is shown (display.INVISIBLE): a file `ok\u200b.yaml`
# beside `ok.yaml`, or a mark that flips a name's direction, forges what the reader sees.
FORGING = "\u200e\u200f\u061c\u200b\u200c\u200d\u2060\u2064\ufeff\u00ad\u034f\u115f\u3164\uffa0\ufe0f\U000e0041"
FORGING_CLASS = re.compile(f"[{FORGING}]")
EVIL_ENV = "prod\n::error file=x::forged\n::set-output name=ok::yes\n| forged | `row` | ✅ up to date |"


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def _pull_request(box: Sandbox) -> None:
    """Base: one job, rendered for two environments; the pull request: a third worker, plus the
    hostile extras, all rendered and committed as the action expects."""
    box.job()
    for env in ("dev", "prod"):
        folder = box.repo / "overlays" / env
        folder.mkdir(parents=True)
        (folder / "overlay.yaml").write_text(f"namespace: training-{env}\n")
    flatjob = [sys.executable, "-m", "flatjob.compiler.cli"]
    for env in ("dev", "prod"):
        subprocess.run([*flatjob, "compile", "jobs", "--overlay", f"overlays/{env}", "-o", f"rendered/{env}"], cwd=box.repo, check=True, capture_output=True)
    (box.repo / ".git").rename(box.repo / ".git-canary")  # the sandbox's token file stays out of the real repository
    _git(box.repo, "init", "-q", "-b", "main")
    _git(box.repo, "add", "-A")
    _git(box.repo, "commit", "-q", "-m", "base")
    box.job(text=JOB.format(name="ok").replace("replicas: 2", "replicas: 3"))
    for env in ("dev", "prod"):
        subprocess.run([*flatjob, "compile", "jobs", "--overlay", f"overlays/{env}", "-o", f"rendered/{env}"], cwd=box.repo, check=True, capture_output=True)
    (box.repo / "rendered" / "prod" / "notes.txt").write_bytes(HIDE.encode())
    (box.repo / "rendered" / "prod" / f"ok{FORGING}.yaml").write_text(f"# {FORGING}\n")
    evil = box.repo / "overlays" / EVIL_ENV
    evil.mkdir(parents=True)
    (evil / "overlay.yaml").write_text("namespace: training-evil\n")
    subprocess.run([*flatjob, "compile", "jobs", "--overlay", str(evil.relative_to(box.repo)), "-o", f"rendered/{EVIL_ENV}"], cwd=box.repo, check=True, capture_output=True)
    _git(box.repo, "checkout", "-q", "-b", "pull-request")
    _git(box.repo, "add", "-A")
    _git(box.repo, "commit", "-q", "-m", "a third worker")


def _visible_text(markdown: str) -> str:
    """What a reader sees: the rendered HTML without comments and tags."""
    html = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    html = re.sub(r"<!--.*?(-->|\Z)", "", html, flags=re.DOTALL)
    return html


def test_a_pull_request_cannot_hide_its_changes_from_the_comment_or_forge_the_log(box: Sandbox) -> None:
    _pull_request(box)
    comment, summary = box.tmp / "comment.md", box.tmp / "summary.md"
    done = run([script("flatjob-ci"), "--jobs", "jobs", "--overlays", "overlays", "--rendered", "rendered", "--base", "main", "--comment", str(comment), "--summary", str(summary)], box.repo)
    assert done.code in (0, 1) and "Traceback" not in done.output, done.output[-3000:]
    text = comment.read_text(encoding="utf-8")
    shown = _visible_text(text)
    sections = dict(re.findall(r"<summary>(dev|prod): rendered changes.*?</summary>(.*?)</details>", shown, flags=re.DOTALL))
    for env in ("dev", "prod"):  # the real change: a third worker in each environment
        assert "+  name: ok-worker-2" in sections[env], shown[-3000:]
    assert "name: ok-worker-2" in shown and "notes.txt" in shown, shown
    assert "Not written by flatjob" in sections["prod"] and "\\x0d" not in sections["prod"], sections["prod"]  # named, its lines never shown
    rows = re.findall(r"<tr>", shown.split("<tbody>", 1)[1].split("</tbody>", 1)[0])
    assert len(rows) == 3  # dev, prod and the hostile one: no forged row
    for line in done.output.splitlines():  # the Actions log: only flatjob's own annotations start with ::
        assert not line.startswith("##["), line
        assert not line.startswith("::") or re.match(r"::(error|warning) file=", line), line
    assert "::set-output" not in "\n".join(line for line in done.output.splitlines() if line.startswith("::"))
    assert not FORGING_CLASS.search(text + summary.read_text(encoding="utf-8") + done.output), "an invisible character reached the comment or the log"
    assert "ok\\u200e\\u200f\\u061c\\u200b" in text.replace("\\\\", "\\"), text[-3000:]  # the forged name, shown escaped


@pytest.mark.parametrize("attributes", ["rendered/** -diff\n", "*.yaml binary\n", "rendered/** filter=hide\n"], ids=["-diff", "binary", "filter"])
def test_a_pull_requests_gitattributes_cannot_hide_its_changes_from_the_comment(box: Sandbox, attributes: str) -> None:
    """Before (hx34): a `.gitattributes` the pull request adds made git print "Binary files
    differ" for every rendered file (`-diff`, `binary`): the comment listed three unnamed files,
    +0 -0, and no pod; a `filter=` naming a driver the machine has configured (git-lfs sets
    filter.lfs.* on a runner) showed what the driver made of each changed file.  The fake driver
    here is configured after the commit, as a runner's is, and the files touched so git reads
    them again through it."""
    _pull_request(box)
    (box.repo / ".gitattributes").write_text(attributes)
    _git(box.repo, "add", "-A")
    _git(box.repo, "commit", "-q", "-m", "attributes")
    _git(box.repo, "config", "filter.hide.clean", "echo hidden")
    _git(box.repo, "config", "filter.hide.required", "true")
    for path in box.out.rglob("*.yaml"):
        os.utime(path, (1, 1))
    comment, summary = box.tmp / "comment.md", box.tmp / "summary.md"
    done = run([script("flatjob-ci"), "--jobs", "jobs", "--overlays", "overlays", "--rendered", "rendered", "--base", "main", "--comment", str(comment), "--summary", str(summary)], box.repo)
    assert done.code in (0, 1) and "Traceback" not in done.output, done.output[-3000:]
    shown = _visible_text(comment.read_text(encoding="utf-8"))
    sections = dict(re.findall(r"<summary>(dev|prod): rendered changes.*?</summary>(.*?)</details>", shown, flags=re.DOTALL))
    for env in ("dev", "prod"):
        assert "+  name: ok-worker-2" in sections[env] and "hidden" not in sections[env], shown[-3000:]


@pytest.mark.parametrize("command", [("diff", "jobs", "-o", "rendered"), ("compile", "jobs", "-o", "rendered", "--check")])
def test_diff_and_check_print_no_terminal_control_from_committed_files(box: Sandbox, command: tuple[str, ...]) -> None:
    """Before: OSC 52 (clipboard) and cursor movement reached the terminal as they were committed;
    until issue 21's last round, marks and zero-width characters too."""
    box.job()
    assert_clean_exit(box.compile(), 0)
    job = box.out / "ok" / "job.yaml"
    job.write_bytes(job.read_bytes() + f"# \x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2A\x1b[2K\rok\u009b31m\n# name: ok{FORGING}\n".encode())
    box.freeze()
    done = box.flatjob(*command)
    assert_clean_exit(done, 0, 1)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", done.stdout), repr(done.stdout[-500:])
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x1b[2A\\x1b[2K\\x0dok\\x9b31m" in done.stdout
    assert not FORGING_CLASS.search(done.output) and "name: ok\\u200e\\u200f\\u061c\\u200b" in done.stdout, done.stdout[-800:]


def test_check_names_an_output_folder_holding_terminal_control_escaped(box: Sandbox) -> None:
    """Before (hx34): `compile --check -o <folder>` printed the folder raw in its `stale:` and
    `up to date` lines (the fix command beside it was escaped); in CI the folder is
    rendered/<overlay folder>, a name the pull request chooses."""
    box.job()
    out = "rendered/e\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\u009b31m\u202ex"
    for args in (("--check",), (), ("--check",)):  # stale, written, up to date
        done = box.flatjob("compile", "jobs", "-o", out, *args)
        assert_clean_exit(done, 0, 1)
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", done.output), repr(done.output[-500:])
        assert "rendered/e\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in done.stderr, done.stderr[-500:]


def _compiled_claiming(tmp_path: Path, claimed: list[str]) -> None:
    """jobs/ compiled into rendered/, then its metadata edited to claim `claimed` too (a PR's)."""
    import json

    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "job.yaml").write_text(JOB.format(name="ddp"))
    assert run([script("flatjob"), "compile", "jobs", "-o", "rendered"], tmp_path).code == 0
    meta_file = tmp_path / "rendered" / "flatjob-meta.json"
    meta = json.loads(meta_file.read_text())
    meta["files"] += claimed
    meta_file.write_text(json.dumps(meta))


def test_a_metadata_file_naming_files_in_many_folders_holds_few_descriptors(tmp_path: Path) -> None:
    """A committed flatjob-meta.json may claim files in thousands of committed folders; each
    folder used to stay open: under `ulimit -n 256`, --check said "cannot write job.yaml: Too
    many open files" and flatjob-ci exited 3 (internal error)."""
    import resource

    for i in range(400):
        (tmp_path / "rendered" / f"n{i}").mkdir(parents=True)
        (tmp_path / "rendered" / f"n{i}" / "notes.txt").write_text("x")
    _compiled_claiming(tmp_path, [f"n{i}/job.yaml" for i in range(400)])

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    for argv in ([script("flatjob"), "compile", "jobs", "-o", "rendered", "--check"],
                 [script("flatjob-ci"), "--jobs", "jobs", "--overlays", "none", "--rendered", "rendered", "--comment", "c.md"]):
        p = subprocess.run(argv, cwd=tmp_path, capture_output=True, timeout=120, preexec_fn=few_descriptors)
        out = (p.stdout + p.stderr).decode(errors="replace")
        assert p.returncode in (0, 1) and "Too many open files" not in out and "internal error" not in out, (argv[0], p.returncode, out[-500:])


@MEASURED
def test_a_metadata_file_naming_300000_files_is_checked_in_a_second(tmp_path: Path) -> None:
    """An 8 MB flatjob-meta.json naming 300 000 files, each in a folder of its own: --check
    and diff opened every name's folders (2.3 s of CPU); names are now looked up in listings
    of the folders that exist, each read once."""
    _compiled_claiming(tmp_path, [f"n{i}/j{i}/job.yaml" for i in range(300_000)])
    for argv in ([script("flatjob"), "compile", "jobs", "-o", "rendered", "--check"], [script("flatjob"), "diff", "jobs", "-o", "rendered"]):
        done = run(argv, tmp_path)
        assert done.code in (0, 1) and "internal error" not in done.stderr, done.stderr[-500:]
        assert done.cpu < BOUNDED_CPU and done.rss_mib < 100, (argv[1], done.cpu, done.rss_mib)


# --- review 21, round 5: what the pull request adds must not choose what the comment shows -----

DDP_EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "pytorch-ddp.yaml").read_text()
PRIVILEGED = DDP_EXAMPLE.replace('              args: [--backend, nccl, --epochs, "10"]\n',
                                 '              args: [--backend, nccl, --epochs, "10"]\n              securityContext: {privileged: true}\n', 2)


def _compiled_repo(repo: Path, outs: dict[str, str | None], extra=lambda: None) -> None:
    """A repository whose base holds examples/pytorch-ddp.yaml compiled into each `outs` folder
    (with its overlay, or none), and whose pull request (HEAD) makes the worker privileged,
    recompiles (so the check passes) and runs `extra` (what else the pull request commits)."""
    (repo / "jobs").mkdir(parents=True)
    flatjob = [sys.executable, "-m", "flatjob.compiler.cli", "compile", "jobs"]

    def compile_all() -> None:
        for out, overlay in outs.items():
            subprocess.run([*flatjob, *(["--overlay", overlay] if overlay else []), "-o", out], cwd=repo, check=True, capture_output=True)

    _git(repo, "init", "-q", "-b", "main")
    for text, message in ((DDP_EXAMPLE, "base"), (PRIVILEGED, "a privileged worker")):
        (repo / "jobs" / "pytorch-ddp.yaml").write_text(text)
        compile_all()
        if text is PRIVILEGED:
            extra()
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", message)


def _ci_comment(repo: Path, overlays: str) -> tuple[int, str]:
    comment = repo.parent / "comment.md"
    done = run([script("flatjob-ci"), "--jobs", "jobs", "--overlays", overlays, "--rendered", "rendered", "--base", "HEAD~1", "--comment", str(comment)], repo)
    assert done.code in (0, 1) and "Traceback" not in done.output, done.output[-3000:]
    return done.code, comment.read_text(encoding="utf-8")


def test_files_a_pull_request_adds_under_rendered_cannot_crowd_out_the_pod_templates(tmp_path: Path) -> None:
    """Before: 80 notes under rendered/0notes/ (flatjob's kustomization lists none, so nothing
    applies them) sorted before the job's folder and took the whole comment; the privileged pod
    and the name of its file were nowhere (review 21 round 5, #1)."""
    repo = tmp_path / "repo"

    def notes() -> None:
        (repo / "rendered" / "0notes").mkdir()
        for i in range(80):
            (repo / "rendered" / "0notes" / f"{i:04d}.md").write_text("".join(f"note line {j} of file {i}: lorem ipsum dolor sit amet consectetur\n" for j in range(60)))

    _compiled_repo(repo, {"rendered": None}, notes)
    code, text = _ci_comment(repo, "none")
    assert code == 0 and "✅ up to date" in text
    shown = _visible_text(text)
    assert "privileged: true" in shown and "mnist-ddp/podtemplates.yaml" in shown, shown[:3000]
    assert shown.index("mnist-ddp/podtemplates.yaml") < shown.index("0notes/0000.md")  # flatjob's files first
    assert "not written by flatjob" in shown and "note line" not in shown  # foreign files: named, never shown
    for i in range(80):
        assert f"0notes/{i:04d}.md" in shown


@pytest.mark.slow  # 40 real compiles; tests/test_action.py checks the same bound in process
def test_the_comment_fits_githubs_limit_whatever_the_environments_are_named(tmp_path: Path) -> None:
    """Before: 40 overlay folders named with 240 control characters each (5 characters apiece
    once escaped) made the table alone longer than GitHub's 65,536 characters; the comment was
    130,245 characters, every diff empty, and GitHub refused it (review 21 round 5, #2)."""
    repo = tmp_path / "repo"
    names = [f"{i:02d}" + "\x01" * 240 for i in range(40)]
    for name in names:
        (repo / "overlays" / name).mkdir(parents=True)
        (repo / "overlays" / name / "overlay.yaml").write_text("labels: {env: x}\n")
    _compiled_repo(repo, {f"rendered/{name}": f"overlays/{name}" for name in names})
    code, text = _ci_comment(repo, "overlays")
    assert code == 0
    assert len(text.encode("utf-16-le")) // 2 + text.count("\n") <= 65_536, len(text)
    shown = _visible_text(text)
    assert "privileged: true" in shown and "podtemplates.yaml" in shown
    assert shown.count("<details>") == 40 or "more environment" in shown
