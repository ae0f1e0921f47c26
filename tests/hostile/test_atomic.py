"""The output folder changes as a whole: kill -9 at any instant, and two compiles at once.

Covers: a multi-job compile (jobs changed, removed and added) killed with SIGKILL at random
instants (uniform over the run, and right after its journal appears, when it is writing)
leaves the old tree, the new one, or a journal; the next compile finishes or undoes what it
finds, says so (FJ705), and leaves exactly the new tree with no temporary file; two compiles
of different sources started together on one folder both succeed and leave exactly one of
the two trees, never a mix or an orphan folder.  Before: 7 of 20 kills left records and pods
from different specs and kustomizations naming missing folders, 2 left .tmp files for ever,
and concurrent compiles mixed trees or crashed.
"""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .kit import JOB, Sandbox, assert_clean_exit, child_env, snapshot

JOURNAL = ".flatjob-journal.json"
JOBS = 16
TRIALS = 8


def tree(root: Path) -> dict[str, tuple[str, bytes]]:
    return snapshot(root) if root.exists() else {}


def write_jobs(folder: Path, names: list[str], replicas: int) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name in names:
        ns = "\n  namespace: team-a" if name.endswith(("0", "5")) else ""
        (folder / f"{name}.yaml").write_text(JOB.format(name=name).replace(f"name: {name}", f"name: {name}{ns}").replace("replicas: 2", f"replicas: {replicas}"))


def start(box: Sandbox, source: str = "jobs") -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "flatjob.compiler.cli", "compile", source, "-o", "rendered"],
        cwd=box.repo, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def compile_now(box: Sandbox, source: str = "jobs") -> str:
    proc = start(box, source)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    return err.decode()


@pytest.fixture
def old_and_new(box: Sandbox) -> tuple[dict[str, tuple[str, bytes]], dict[str, tuple[str, bytes]], Path]:
    """The tree of the old specs (kept as a folder to restore) and of the new ones."""
    old_names = [f"job-{i:02d}" for i in range(JOBS)]
    new_names = old_names[4:] + [f"new-{i:02d}" for i in range(4)]  # 4 removed, 4 added, the rest changed
    write_jobs(box.jobs, old_names, 2)
    compile_now(box)
    old = tree(box.out)
    saved = box.tmp / "old-rendered"
    shutil.copytree(box.out, saved, symlinks=True)
    write_jobs(box.jobs, new_names, 3)
    compile_now(box)
    new = tree(box.out)
    assert old != new
    return old, new, saved


def files(snap: dict[str, tuple[str, bytes]], hidden: set[str]) -> dict[str, tuple[str, bytes]]:
    return {k: v for k, v in snap.items() if v[0] != "dir" and k not in hidden}


def restore(box: Sandbox, saved: Path) -> None:
    shutil.rmtree(box.out)
    shutil.copytree(saved, box.out, symlinks=True)


def kill_at(proc: subprocess.Popen[bytes], box: Sandbox, when: tuple[str, float]) -> None:
    """SIGKILL after `delay` seconds, counted from the start or from the journal's appearance."""
    how, delay = when
    if how == "journal":
        deadline = time.monotonic() + 60
        while not (box.out / JOURNAL).exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)


@pytest.mark.slow  # chaos: compiles killed at random instants
def test_kill_9_at_random_instants_leaves_old_new_or_a_journal_the_next_run_settles(box: Sandbox, old_and_new: tuple) -> None:
    old, new, saved = old_and_new
    restore(box, saved)
    began = time.monotonic()
    compile_now(box)
    duration = time.monotonic() - began
    rng = random.Random(int(os.environ.get("FLATJOB_KILL_SEED", "16")))
    instants = [("start", rng.uniform(0, duration)) for _ in range(TRIALS // 2)] + [("journal", rng.uniform(0, 0.03)) for _ in range(TRIALS - TRIALS // 2)]
    seen = set()
    for when in instants:
        restore(box, saved)
        kill_at(start(box), box, when)
        after = tree(box.out)
        journal = after.get(JOURNAL)
        hidden = {k for k in after if k.rsplit("/", 1)[-1].startswith(".")}
        if journal is None and not hidden:
            assert after in (old, new), f"a kill at {when} left a tree that is neither the old nor the new one"
            seen.add("old" if after == old else "new")
        else:
            record = json.loads(journal[1]) if journal else {"state": "journal being written", "made": []}
            state = record["state"]
            if state != "commit":  # the old files as they were; new folders hold staged files only
                assert files(after, hidden) == files(old, hidden), f"a kill at {when} ({state}) changed the old tree"
                assert {k for k, v in after.items() if v[0] == "dir"} - set(old) <= set(record["made"])
            seen.add(state)
        next_run = compile_now(box)
        assert tree(box.out) == new, f"the run after a kill at {when} did not leave the new tree"
        if journal is not None or hidden:
            assert "[FJ705]" in next_run, next_run
    assert len(seen) >= 2, f"the kills all landed in the same phase: {seen}"


def test_two_compiles_at_once_leave_one_whole_tree(box: Sandbox) -> None:
    write_jobs(box.repo / "jobs-a", [f"a-{i:02d}" for i in range(JOBS)], 2)
    write_jobs(box.repo / "jobs-b", [f"b-{i:02d}" for i in range(JOBS)], 3)
    compile_now(box, "jobs-a")
    tree_a = tree(box.out)
    compile_now(box, "jobs-b")
    tree_b = tree(box.out)
    for _ in range(3):
        shutil.rmtree(box.out)
        first, second = start(box, "jobs-a"), start(box, "jobs-b")
        runs = [p.communicate(timeout=120) for p in (first, second)]
        assert first.returncode == second.returncode == 0, [r[1].decode() for r in runs]
        assert tree(box.out) in (tree_a, tree_b), "two compiles left a mixed tree"


def test_a_lock_never_released_is_a_clear_error(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a compile holds the folder, another one waits; the wait ends with FJ704, not a hang."""
    import fcntl

    from flatjob.compiler import journal

    box.job()
    compile_now(box)
    fd = os.open(box.out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        waits: list[bool] = []
        monkeypatch.chdir(box.repo)
        with pytest.raises(journal.Busy), journal.session(Path("rendered"), write=True, on_wait=lambda: waits.append(True), wait=0.3):
            pass
        assert waits == [True]
        proc = start(box)
        said = _read_until(proc, b"another flatjob compile is writing this folder; waiting for it", 120)  # however slowly the child starts
        assert proc.poll() is None  # still waiting for the lock
    finally:
        os.close(fd)
    _, err = proc.communicate(timeout=60)  # the lock is released: the compile goes on
    assert proc.returncode == 0, said + err


def _read_until(proc: subprocess.Popen[bytes], text: bytes, limit: float) -> bytes:
    """The child's stderr up to and including `text` (it waits: no fixed sleep on a busy machine)."""
    got = b""
    end = time.monotonic() + limit
    while text not in got:
        left = end - time.monotonic()
        assert left > 0 and proc.poll() is None, got
        ready, _, _ = select.select([proc.stderr], [], [], left)
        if ready:
            got += os.read(proc.stderr.fileno(), 4096)  # type: ignore[union-attr]
    return got


def test_a_failed_compile_in_between_keeps_the_old_tree(box: Sandbox) -> None:
    box.job()
    compile_now(box)
    before = tree(box.out)
    box.job(file="broken.yaml", text=JOB.format(name="broken").replace("replicas: 2", "replicas: -1"))
    run_ = box.compile()
    assert_clean_exit(run_, 1)
    assert tree(box.out) == before


class Killed(BaseException):
    """Stands for SIGKILL at one exact point of an in-process compile."""


def test_a_kill_between_deleting_and_pruning_leaves_no_empty_folder(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the random kills: files deleted, folders not yet pruned, metadata still old."""
    from click.testing import CliRunner

    from flatjob.compiler.cli import cli
    from flatjob.compiler.outdir import SafeDir

    box.job("alpha")
    box.job("beta")
    compile_now(box)
    (box.jobs / "beta.yaml").unlink()

    def killed(self: SafeDir, rel: str) -> bool:
        raise Killed

    monkeypatch.chdir(box.repo)
    monkeypatch.setattr(SafeDir, "remove_empty", killed)
    with pytest.raises(Killed):
        CliRunner().invoke(cli, ["compile", "jobs", "-o", "rendered"], catch_exceptions=False)
    monkeypatch.undo()
    assert (box.out / "beta").is_dir() and not any((box.out / "beta").iterdir())
    assert json.loads((box.out / JOURNAL).read_text())["state"] == "commit"
    assert "[FJ705]" in compile_now(box)
    assert not (box.out / "beta").exists() and not (box.out / JOURNAL).exists()


# --- a journal committed to git (issue 21) --------------------------------------------------

EVIL_POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: evil}\nspec:\n  containers: [{name: x, image: busybox, securityContext: {privileged: true}}]\n"


@pytest.mark.parametrize("state", ["commit", "staging"])
@pytest.mark.parametrize("header", [True, False], ids=["with-header", "without-header"])
def test_a_committed_journal_is_never_acted_on(box: Sandbox, state: str, header: bool) -> None:
    """A pull request adds only the journal and a staged dot-file. Before: the next compile
    wrote rendered/evil/job.yaml (a privileged Pod), never pruned, and `flatjob diff` said nothing."""
    from flatjob.compiler.keys import GENERATED_HEADER

    box.job()
    compile_now(box)
    journal = {"version": 1, "state": state, "write": ["evil/job.yaml", "kustomization.yaml"], "delete": [], "made": ["evil"],
               "here": {"boot": "", "device": 0, "inode": 0}}
    (box.out / JOURNAL).write_text(json.dumps(journal))
    (box.out / "evil").mkdir()
    (box.out / "evil" / ".job.yaml.flatjob-new").write_text((GENERATED_HEADER if header else "") + EVIL_POD)
    (box.out / ".kustomization.yaml.flatjob-new").write_text(GENERATED_HEADER + "resources: [evil, ok]\n")
    before = tree(box.out)
    diff = box.flatjob("diff", "jobs", "-o", "rendered")
    assert_clean_exit(diff, 0)
    assert "warning:" in diff.output and "[FJ700]" in diff.output and "committed to git?" in diff.output
    check = box.compile("--check")
    assert_clean_exit(check, 1)
    assert "error:" in check.output and "[FJ700]" in check.output
    assert tree(box.out) == before  # neither looked at it twice
    run_ = box.compile()
    assert_clean_exit(run_, 0)
    assert "[FJ705]" in run_.output and "nothing it names was put in place" in run_.output
    assert not (box.out / "evil" / "job.yaml").exists() and not (box.out / "evil").exists()
    assert not list(box.out.rglob("*.flatjob-new")) and not (box.out / JOURNAL).exists()
    assert "evil" not in (box.out / "kustomization.yaml").read_text()


def test_a_journal_from_another_folder_of_this_machine_is_not_acted_on(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """A genuine journal, written where a compile was killed, copied beside another output folder."""
    from flatjob.compiler import journal as journal_mod
    from flatjob.compiler.outdir import SafeDir

    box.job()
    compile_now(box)
    other = box.repo / "other"
    other.mkdir()
    with SafeDir(other) as d:
        d.open_root(create=False)
        stamp = journal_mod.here(d)
    (box.out / JOURNAL).write_text(json.dumps({"version": 1, "state": "commit", "write": ["evil/job.yaml"], "delete": [], "made": [], "here": stamp}))
    (box.out / "evil").mkdir()
    (box.out / "evil" / ".job.yaml.flatjob-new").write_text(EVIL_POD)
    run_ = box.compile()
    assert_clean_exit(run_, 0)
    assert not (box.out / "evil" / "job.yaml").exists()


@pytest.mark.parametrize("name", [JOURNAL, "flatjob-meta.json"])
def test_a_committed_json_file_nested_past_pythons_stack_is_refused_not_a_crash(box: Sandbox, name: str) -> None:
    """200 000 nested lists (400 KB) in a committed journal or metadata file: before, compile,
    --check and diff all exited 3 (RecursionError), and compile could never clear it itself
    (attacker, round 3).  Now it reads as anyone's file: a foreign journal is cleared, a
    metadata file that names nothing names nothing."""
    box.job()
    compile_now(box)
    (box.out / name).write_text("[" * 200_000 + "]" * 200_000)
    for args in (("diff", "jobs", "-o", "rendered"), ("compile", "jobs", "-o", "rendered", "--check")):
        assert_clean_exit(box.flatjob(*args), 0, 1)
    assert_clean_exit(box.compile(), 0)
    assert_clean_exit(box.compile("--check"), 0)
