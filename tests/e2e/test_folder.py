"""Several jobs in one `flatjob run-local FOLDER`: one namespace runtime, one local kubelet,
each job's pods in a block of loopback addresses of its own.

- two GenericJobs whose replicas all serve and greet each other on the same port: every
  pod binds its own address, so neither job's pods collide with the other's; exit 0;
- a job that fails fast beside one that takes longer: the run waits for both, exit 1;
- --timeout with a job that never ends names it and exits 1;
- the three local examples together (examples/local/together): torchrun beside a DeepSpeedJob
  and a ColossalAIJob with their real sshd, pdsh, deepspeed and `colossalai run`: all reduce.
No process of a run outlives it (E2E_TAG, tests/e2e/conftest.py; sshd by its command line).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from .kit import SCRIPTS, free_port, run_path, write_jobs
from .sshkit import RANK_LINE, addresses, environment, need, sshd_left

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def generic(name: str, replicas: int, command: str, policy: str = "Never", port: int | None = None) -> str:
    service = f"service: {{ports: [{{name: greet, port: {port}}}]}}" if port else ""
    return f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata:
          name: {name}
        spec:
          {service}
          replicaSpecs:
            - type: worker
              replicas: {replicas}
              restartPolicy:
                policy: {policy}
              template:
                spec:
                  containers:
                    - name: main
                      image: busybox
                      command: {command}
        """


def peers(name: str, replicas: int, port: int) -> str:
    """Replicas that serve on their own address and `port`, and greet each other there."""
    hosts = ", ".join(f"'$(service.worker[{i}].host)'" for i in range(replicas))
    return generic(name, replicas, f"['{sys.executable}', '{SCRIPTS / 'peers.py'}', '$(rank)', '$(service.port[greet])', {hosts}]", port=port)


def test_two_jobs_on_the_same_port_each_in_its_own_block_both_succeed(tmp_path: Path, tag: str) -> None:
    port = free_port()
    run = run_path(write_jobs(tmp_path, {"left": peers("left", 2, port), "right": peers("right", 3, port)}), tag=tag, timeout=60)
    assert run.code == 0, run.explain()
    for job, block, replicas in (("left", 1, 2), ("right", 2, 3)):
        ips = [f"127.0.{block}.{i + 1}" for i in range(replicas)]
        for me in ips:
            for peer in (p for p in ips if p != me):
                assert f"{me} -> {peer}: {peer} got hello from {me}" in run.stdout, run.explain()
        assert f"[{job}-worker-0] {ips[0]} -> {ips[1]}" in run.stdout
        assert f"GenericJob {job}: Succeeded" in run.stderr and f"GenericJob {job} Succeeded in" in run.stderr
        assert f"flatjob: {job}: Released: released {replicas} pod(s)" in run.stderr  # Events name their job
    assert "flatjob: 2 of 2 jobs Succeeded" in run.stderr
    assert addresses(run.stderr) == {"left-worker-0": "127.0.1.1", "left-worker-1": "127.0.1.2", "right-worker-0": "127.0.2.1", "right-worker-1": "127.0.2.2", "right-worker-2": "127.0.2.3"}


def test_one_job_fails_the_other_succeeds_and_the_run_waits_for_both(tmp_path: Path, tag: str) -> None:
    jobs = {
        "fails": generic("fails", 1, "[sh, -c, 'echo failing; exit 3']"),
        "works": generic("works", 2, "[sh, -c, 'sleep 2; echo done $(rank)']"),
    }
    run = run_path(write_jobs(tmp_path, jobs), tag=tag, timeout=60)
    assert run.code == 1, run.explain()
    assert "[works-worker-0] done 0" in run.stdout and "[works-worker-1] done 1" in run.stdout  # it ran on after the failure
    assert re.search(r"flatjob: GenericJob fails Failed( \(\w+\))? after [\d.]+s: [^\n]*fails-worker-0 failed", run.stderr), run.explain()
    assert "Failed (Failed)" not in run.stderr and "s: GenericJob fails has failed" not in run.stderr  # the line names the job once
    assert "flatjob: GenericJob works Succeeded in" in run.stderr
    assert "flatjob: 1 of 2 jobs Succeeded; Failed: fails" in run.stderr
    table = run.stderr[run.stderr.index("GenericJob fails: Failed"):]
    assert re.search(r"^fails-worker-0\s+Failed\s+0\s+3\s+127\.0\.1\.1$", table, re.MULTILINE), run.explain()
    assert "GenericJob works: Succeeded" in table


def test_a_failed_jobs_last_events_print_before_the_stop_line(tmp_path: Path, tag: str) -> None:
    """The cycle that writes a job's last status writes its Events after it, and the run ended
    on the status: 'stopping the pods still running' printed above Failed, PhaseFailed and
    ReplicaFailed, as if they came of the stop.  The runtime is stopped, and what it wrote
    taken in, before that line."""
    jobs = {"fails": generic("fails", 2, "[sh, -c, 'if [ $(rank) = 0 ]; then exit 3; fi; sleep 60']")}
    run = run_path(write_jobs(tmp_path, jobs), tag=tag, timeout=60)
    assert run.code == 1, run.explain()
    stop = run.stderr.index("flatjob: stopping the pods still running")
    for line in ("flatjob: Failed: GenericJob fails has failed", "flatjob: PhaseFailed: phase Running -> Failed", "flatjob: ReplicaFailed: fails-worker-0 failed with exit code 3"):
        assert -1 < run.stderr.find(line) < stop, run.explain()


def test_timeout_names_the_jobs_that_had_not_finished(tmp_path: Path, tag: str) -> None:
    jobs = {"quick": generic("quick", 1, "[sh, -c, 'exit 0']"), "stuck": generic("stuck", 1, "[sleep, '600']")}
    run = run_path(write_jobs(tmp_path, jobs), tag=tag, timeout=8)
    assert run.code == 1, run.explain()
    assert "gave up after 8s (--timeout); GenericJob stuck had not finished" in run.stderr
    assert "GenericJob stuck: Running, restarts 0, 8s (stopped)" in run.stderr and "GenericJob quick: Succeeded" in run.stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (pip install torch==2.13.0)")
def test_the_local_examples_together_torchrun_beside_deepspeed_and_colossalai_with_their_sshd(tmp_path: Path, tag: str) -> None:
    """`flatjob run-local examples/local/ --overlay examples/local/together`, on free ports
    (concurrent test runs on one machine must not share the overlay's)."""
    need("DeepSpeedJob")
    need("ColossalAIJob")
    overlay = (ROOT / "examples" / "local" / "together" / "overlay.yaml").read_text(encoding="utf-8")
    for port in ("29510", "29520", "29530"):
        assert port in overlay
        overlay = overlay.replace(port, str(free_port()))
    (tmp_path / "overlay").mkdir()
    (tmp_path / "overlay" / "overlay.yaml").write_text(overlay, encoding="utf-8")
    run = run_path(ROOT / "examples" / "local", "--overlay", str(tmp_path / "overlay"), tag=tag, timeout=240, env=environment(tag, tmp_path), cwd=ROOT)
    assert run.code == 0, run.explain()
    for job, prefix in (("torchrun-cpu", "[torchrun-cpu-node-"), ("deepspeed-cpu", "[deepspeed-cpu-worker-0]"), ("colossalai-cpu", "[colossalai-cpu-launcher]")):
        lines = "\n".join(line for line in run.stdout.splitlines() if line.startswith(prefix))  # DeepSpeed's and ColossalAI's ranks print through their launcher
        assert sorted(RANK_LINE.findall(lines)) == [(str(r), "4", "10") for r in range(4)], run.explain()
        assert f"{job} Succeeded in" in run.stderr
    blocks: dict[str, set[str]] = {}
    for pod, ip in addresses(run.stderr).items():
        blocks.setdefault(pod.split("-")[0], set()).add(ip.rsplit(".", 1)[0])
    assert sorted(blocks) == ["colossalai", "deepspeed", "torchrun"] and all(len(b) == 1 for b in blocks.values()), run.explain()
    assert len(set.union(*blocks.values())) == 3, run.explain()  # a block per job
    assert "warning" not in run.stderr, run.explain()  # a store port per job: nothing to warn of
    assert "flatjob: 3 of 3 jobs Succeeded" in run.stderr
    assert not sshd_left(tmp_path)
