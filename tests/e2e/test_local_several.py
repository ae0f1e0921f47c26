"""run-local's pieces for several jobs in one run, without starting any (fast; not marked e2e).

Covers: each job's block of loopback addresses (addresses.place, claim_block's skip), the
compile of a folder (namespace mode, distinct blocks, --job NAME and NAMESPACE/NAME,
--replicas-scale across jobs, jobs of several namespaces refused, nothing to run), the
ports torch's store would bind for every job, and the table's sections and verdicts.
"""

from __future__ import annotations

import io
import os
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flatjob.compiler import keys
from flatjob.runtime.local.addresses import free_block, place, shared_ports, span, store_ports
from flatjob.runtime.local.compiling import compile_local
from flatjob.runtime.local.errors import LocalError, Unsupported
from flatjob.runtime.local.ssh import claim_block
from flatjob.runtime.local.table import HEADER, Screen, Seen, Shown, fit, render, terminal_size

from .kit import free_port

ROOT = Path(__file__).resolve().parents[2]


def generic(name: str, replicas: int = 1, namespace: str | None = None, rtype: str = "worker") -> str:
    meta = f"{{name: {name}, namespace: {namespace}}}" if namespace else f"{{name: {name}}}"
    return textwrap.dedent(f"""\
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata: {meta}
        spec:
          replicaSpecs:
            - type: {rtype}
              replicas: {replicas}
              template:
                spec:
                  containers:
                    - name: main
                      image: busybox
                      command: [sh, -c, 'true']
        """)


def folder(tmp_path: Path, **jobs: str) -> str:
    for name, text in jobs.items():
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    return str(tmp_path)


def addresses(job: Any) -> list[str]:
    return [job.address(p["metadata"]["name"]) for p in job.pods]


class Lock:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_every_job_gets_blocks_no_other_job_of_the_run_has() -> None:
    asked: list[tuple[int, frozenset[int]]] = []
    locks: list[Lock] = []

    def claim(pods: int, skip: Any) -> tuple[int, Lock]:  # block 1 holds this host's name (Debian)
        asked.append((pods, frozenset(skip)))
        locks.append(Lock())
        return next(b for b in range(2, 255) if not {b + i for i in span(pods)} & set(skip)), locks[-1]

    placed = place([(2, True), (2, False), (300, False), (1, True)], claim)
    assert [b for b, _ in placed] == [2, 1, 3, 5]  # 300 pods take 127.0.3.x and 127.0.4.x
    assert asked == [(2, frozenset()), (1, frozenset({1, 2, 3, 4}))]
    assert [lock for _, lock in placed] == [locks[0], None, None, locks[1]]
    assert list(span(254)) == [0] and list(span(255)) == [0, 1] and list(span(0)) == [0]


def test_a_claim_that_fails_releases_the_blocks_claimed_before() -> None:
    first = Lock()

    def claim(pods: int, skip: Any) -> tuple[int, Lock]:
        if skip:
            raise Unsupported("no block left")
        return 1, first

    with pytest.raises(Unsupported):
        place([(1, True), (1, True)], claim)
    assert first.closed
    with pytest.raises(Unsupported, match="no block of loopback addresses is left for 2 more pods"):
        free_block(set(range(1, 255)), 2)
    assert free_block({1, 2, 4}, 254) == 3 and free_block({1, 2, 4}, 255) == 5


def test_claim_block_skips_the_blocks_of_the_runs_other_jobs(tmp_path: Path) -> None:
    port = free_port()
    block, lock = claim_block(2, skip={1, 2, 3}, port=port, lock_dir=str(tmp_path))
    lock.close()
    assert block > 3


def test_a_folder_compiles_in_namespace_mode_with_a_block_per_job(tmp_path: Path) -> None:
    shutil.copy(ROOT / "examples" / "local" / "torchrun-cpu.yaml", tmp_path / "torchrun.yaml")
    jobs = compile_local(folder(tmp_path, a=generic("a", 2), b=generic("b", 3)), replicas={"node": 3})
    assert [j.name for j in jobs] == ["a", "b", "torchrun-cpu"]  # in the compile's order
    assert [addresses(j) for j in jobs] == [["127.0.1.1", "127.0.1.2"], [f"127.0.2.{i}" for i in (1, 2, 3)], [f"127.0.3.{i}" for i in (1, 2, 3)]]
    torchrun = jobs[2]
    assert "--rdzv_endpoint=127.0.3.1:29500" in torchrun.pods[1]["spec"]["containers"][0]["command"]  # rendered in its block
    assert '"local_block":3' in torchrun.record["metadata"]["annotations"][keys.OPTIONS]
    assert {j.record["metadata"]["annotations"][keys.RUNTIME_MODE] for j in jobs} == {keys.RUNTIME_MODE_NAMESPACE}
    (one,) = compile_local(str(tmp_path), job="b")
    assert addresses(one) == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]  # alone, it has the first block


def test_an_ssh_job_beside_others_claims_a_block_none_of_them_has(tmp_path: Path) -> None:
    shutil.copy(ROOT / "examples" / "local" / "deepspeed-cpu.yaml", tmp_path / "ds.yaml")
    jobs = compile_local(folder(tmp_path, a=generic("a", 2), z=generic("z", 1)))
    try:
        blocks = {j.name: {a.split(".")[2] for a in addresses(j)} for j in jobs}
        assert blocks["a"] == {"1"} and blocks["deepspeed-cpu"] not in ({"1"}, blocks["z"])
        ds = next(j for j in jobs if j.kind == "DeepSpeedJob")
        assert [ln.split()[0] for ln in ds.files["hostfile"].splitlines()] == addresses(ds)
        assert [j.lock is not None for j in jobs] == [False, True, False]  # the SSH job holds its block's lock
    finally:
        for j in jobs:
            if j.lock is not None:
                j.lock.close()


def test_job_picks_by_name_or_namespace_and_name(tmp_path: Path) -> None:
    path = folder(tmp_path, a=generic("a", namespace="team"), b=generic("a", namespace="lab"), c=generic("c", namespace="lab"))
    with pytest.raises(Unsupported, match=r"holds jobs of 2 namespaces \(lab: a, c; team: a\): run-local runs one namespace's jobs"):
        compile_local(path)
    with pytest.raises(LocalError, match=r"several jobs are named 'a' \(lab/a, team/a\); choose one with --job NAMESPACE/NAME"):
        compile_local(path, job="a")
    (job,) = compile_local(path, job="team/a")
    assert job.namespace == "team"
    with pytest.raises(LocalError, match=r"no job named 'x' \(jobs: lab/a, lab/c, team/a\)"):
        compile_local(path, job="x")


def test_replicas_scale_applies_to_the_jobs_that_have_the_type(tmp_path: Path) -> None:
    path = folder(tmp_path, a=generic("a", 3), b=generic("b", 2, rtype="ps"))
    a, b = compile_local(path, replicas={"worker": 1})
    assert (len(a.pods), len(b.pods)) == (1, 2)
    with pytest.raises(LocalError, match=r"--replicas-scale chief=1: no job has a replica type 'chief' \(types: worker, ps\)"):
        compile_local(path, replicas={"chief": 1})
    with pytest.raises(LocalError, match=r"--replicas-scale worker=1: the job has no replica type 'worker' \(types: ps\)"):
        compile_local(path, replicas={"worker": 1}, job="b")


def test_a_misspelt_job_or_replica_type_says_which_was_meant(tmp_path: Path) -> None:
    """`--job torchrun` for torchrun-cpu, `--replicas-scale nod=1` for node: the names were
    listed, but not the near one, as lint names a misspelt field (hx37)."""
    path = folder(tmp_path, a=generic("trainer", 2), b=generic("eval", 1, rtype="ps"))
    with pytest.raises(LocalError, match=r"no job named 'trainr' \(jobs: eval, trainer\); did you mean 'trainer'\?$"):
        compile_local(path, job="trainr")
    with pytest.raises(LocalError, match=r"no job has a replica type 'workr' \(types: worker, ps\); did you mean 'worker'\?$"):
        compile_local(path, replicas={"workr": 1})
    with pytest.raises(LocalError, match=r"no job named 'zzz' \(jobs: eval, trainer\)$"):
        compile_local(path, job="zzz")


def test_a_folder_without_jobs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.yaml").write_text("kind: ConfigMap\n", encoding="utf-8")
    with pytest.raises(LocalError, match="no T9k job to run"):
        compile_local(str(tmp_path))


def pod(command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    return {"spec": {"containers": [{"command": command, "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}]}}


def test_the_ports_torchs_store_binds_on_every_address_are_found_and_shared_ones_named() -> None:
    torchrun = [pod(["torchrun", "--rdzv_endpoint=127.0.1.1:29500", "x.py"]), pod(["torchrun", "--rdzv-endpoint", "127.0.1.1:29500"])]
    assert store_ports(torchrun, {}) == {29500}
    assert store_ports([pod(["python"], {"MASTER_PORT": "23456", "OTHER": "1"})], {}) == {23456}
    assert store_ports([pod(["sh"])], {"launch.sh": "deepspeed --master_addr=127.0.2.1 --master_port=29501 --force_multi\n"}) == {29501}
    assert store_ports([pod(["sh"], {"MASTER_PORT": "$(PORT)"})], {}) == set()
    assert shared_ports({"a": {29500}, "b": {29501}}) == []
    (two,) = shared_ports({"a": {29500}, "b": {29500, 1}})
    assert two.startswith("a and b both host torch's store on port 29500, which torch binds on every address of this machine: while one")
    (three,) = shared_ports({"a": {1}, "b": {1}, "c": {1}})
    assert three.startswith("a, b and c all host torch's store on port 1, ")


def test_the_table_has_a_section_per_job_aligned_across_them() -> None:
    status = {"phase": "Running", "tasks": [{"type": "worker", "replicas": [{"name": "a-worker-0", "phase": "Running"}]}]}
    a = Shown("GenericJob", "a", {}, {"a-worker-0": "127.0.1.1"}, status)
    long = Shown("GenericJob", "longer-name", {}, {"longer-name-worker-0": "127.0.2.1"})
    long.saw({**status, "phase": "Succeeded", "tasks": [{"type": "worker", "replicas": [{"name": "longer-name-worker-0", "phase": "Succeeded"}]}]}, 4.0)
    long.saw({**long.status}, 9.0)  # later writes do not move its end
    seen = Seen()
    one = render([a.section(seen, 7.0)])
    assert one == ["GenericJob a: Running, restarts 0, 7s", "POD         PHASE    RESTARTS  EXIT  ADDRESS", "a-worker-0  Running  -               127.0.1.1"]
    both = render([a.section(seen, 7.0, stopped=True), long.section(seen, 7.0, stopped=True)])
    assert both[0] == "GenericJob a: Running, restarts 0, 7s (stopped)"  # the run stopped before its outcome
    assert both[3] == "GenericJob longer-name: Succeeded, restarts 0, 4s"  # its time stops at its outcome
    assert both[1] == both[4] and both[1].split() == list(HEADER)
    assert both[2].index("Running") == both[5].index("Succeeded")  # one set of columns
    assert long.verdict() == "GenericJob longer-name Succeeded in 4.0s"
    a.saw({"phase": "Failed", "runtime": {"reason": "BackoffLimitExceeded", "message": "a failed"}}, 5.5)
    assert a.verdict() == "GenericJob a Failed (BackoffLimitExceeded) after 5.5s: a failed"
    # A rule's failure: its reason is "Failed" and its message T9k's "<kind> <name> has failed: ..."
    # (the line read "GenericJob b Failed (Failed) after 3.9s: GenericJob b has failed: no success rule ...")
    a.saw({"phase": "Failed", "runtime": {"reason": "Failed", "message": "GenericJob a has failed: no success rule can be met any more (a-worker-0 failed)"}}, 5.5)
    assert a.verdict() == "GenericJob a Failed after 5.5s: no success rule can be met any more (a-worker-0 failed)"


def test_the_live_table_of_many_jobs_fits_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five jobs of four pods are 30 lines; on a 24-line terminal the redraw (cursor up over
    what it drew) stopped at the screen's top, so each redraw left the table's top in the
    scrollback. The live table is cut to the terminal's height; the final one is whole."""
    def running(job: str) -> Shown:
        names = [f"{job}-worker-{i}" for i in range(4)]
        status = {"phase": "Running", "tasks": [{"type": "worker", "replicas": [{"name": n, "phase": "Running"} for n in names]}]}
        return Shown("GenericJob", job, {}, {n: f"127.0.1.{i + 1}" for i, n in enumerate(names)}, status)

    jobs = [running(f"j{j}") for j in range(5)]
    seen = Seen()
    sections = [s.section(seen, 3.0) for s in jobs]
    assert len(render(sections)) == 30
    assert fit(render(sections), 40) == render(sections)
    cut = fit(render(sections), 24)
    assert len(cut) == 23 and cut[:22] == render(sections)[:22] and cut[-1] == "… 8 more lines: the final table shows every pod"
    assert fit(["a", "b", "c"], 1) == ["… 3 more lines: the final table shows every pod"]
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((100, 24)))
    err = io.StringIO()
    screen = Screen(io.StringIO(), err, live=True)
    screen.table(sections)
    screen.note("a note")  # erases what it drew (23 lines up), prints, draws again
    assert err.getvalue().count("\x1b[23F") == 1 and len(err.getvalue().split("\x1b[23F")[0].splitlines()) == 23
    screen.final(sections)
    assert err.getvalue().endswith("\n".join(render(sections)) + "\n")  # the final table is whole


def test_the_table_is_sized_to_the_terminal_it_is_drawn_on_not_stdouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """`run-local jobs/ | tee log`: stdout is a pipe, the table's stderr an 8-line terminal;
    shutil.get_terminal_size (stdout's) said 80x24, so a 23-line table overflowed it."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 8, 100, 0, 0))
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    with os.fdopen(slave, "w") as stream:
        assert tuple(terminal_size(stream)) == (100, 8)
    os.close(master)
    assert terminal_size(io.StringIO()) == shutil.get_terminal_size()  # no terminal: shutil's answer


def test_cli_refuses_jobs_of_several_namespaces_with_exit_2(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from flatjob.runtime.cli import run_local_command

    path = folder(tmp_path, a=generic("a", namespace="team"), b=generic("b"))
    result = CliRunner().invoke(run_local_command, [path])
    assert result.exit_code == 2
    assert "holds jobs of 2 namespaces (default: b; team: a)" in result.output and "--job NAMESPACE/NAME" in result.output


def test_cli_prints_a_spec_that_does_not_compile_as_lint_does(tmp_path: Path) -> None:
    """Every diagnostic line `path:line:col: error: ... [CODE]`, none behind a prefix (review of
    round 12: the first one began `flatjob run-local: `); exit 2, nothing ran."""
    from click.testing import CliRunner

    from flatjob.runtime.cli import run_local_command

    job = tmp_path / "x.yaml"
    job.write_text("apiVersion: batch.tensorstack.dev/v1beta1\nkind: GenericJob\nmetadata: {name: x}\nspec:\n  replicaSpecs:\n"
                   "    - type: worker\n      replicas: 1\n      templat: {}\n")
    result = CliRunner().invoke(run_local_command, [str(job)])
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{job}:6:7: error: missing required field 'template'") and lines[0].endswith("[FJ203]"), lines[:3]
    assert any(line.startswith(f"{job}:8:7: error: unknown field 'templat'") for line in lines)


def test_cli_names_the_job_of_each_problem_and_how_to_run_the_others(tmp_path: Path) -> None:
    """A folder whose one job cannot run here (env from a Secret nothing supplies): every
    problem names its job, and the message says how to run the rest; exit 2, nothing ran."""
    from click.testing import CliRunner

    from flatjob.runtime.cli import run_local_command

    secret = generic("b").replace("command: [sh, -c, 'true']", "command: [sh, -c, 'true']\n" + " " * 14
                                  + "env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: s, key: k}}}]")
    path = folder(tmp_path, a=generic("a"), b=secret)
    result = CliRunner().invoke(run_local_command, [path])
    assert result.exit_code == 2, result.output
    assert "b-worker-0/main: cannot resolve" in result.output and "--job NAME" in result.output


def test_cli_names_the_ssh_job_whose_tools_are_missing(tmp_path: Path) -> None:
    """The SSH kinds' machine checks (root, sshd, launchers on PATH) are the job's, not a pod's:
    beside other jobs, each such line names its job."""
    from click.testing import CliRunner

    from flatjob.runtime.cli import run_local_command

    shutil.copy(ROOT / "examples" / "local" / "deepspeed-cpu.yaml", tmp_path / "ds.yaml")
    path = folder(tmp_path, a=generic("a"))
    result = CliRunner(env={"PATH": str(tmp_path)}).invoke(run_local_command, [path])
    assert result.exit_code == 2, result.output
    assert "deepspeed-cpu: " in result.output and "not found on PATH" in result.output, result.output
