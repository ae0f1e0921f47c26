"""Restart policy with real processes (no torch): the runtime's own decisions, driven by
exit codes of local processes.  Plain PyTorch mode restarts the failed replica alone, by its
own type's policy (T9k's manual), after a back-off shortened here with --backoff-scale; the
master keeps running."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from .kit import run_local

pytestmark = pytest.mark.e2e

# The master waits for the worker of its attempt to finish (exit 0) or to give up (exit 3,
# 2 s later, so the runtime has seen the worker fail first), so the worker decides; it gives
# up by itself after 10 s.
MASTER = (
    'for i in $(seq 200); do [ -e "$E2E_OUT/worker-done-$FLATJOB_ATTEMPT" ] && exit 0; '
    '[ -e "$E2E_OUT/worker-gave-up-$FLATJOB_ATTEMPT" ] && sleep 2 && exit 3; sleep 0.05; done; exit 3'
)


def job(worker_script: str, out: Path) -> str:
    def replica(rtype: str, script: str) -> str:
        return f"""
            - type: {rtype}
              replicas: 1
              restartPolicy: ExitCode
              template:
                spec:
                  containers:
                    - name: python
                      image: busybox
                      command: [sh, -c, '{script}']
                      env:
                        - name: E2E_OUT
                          value: {out}"""

    return f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata:
          name: restarts
        spec:
          runPolicy:
            backoffLimit: 2
          replicaSpecs:{replica('master', MASTER)}{replica('worker', worker_script)}
        """


def test_exit_137_once_is_restarted_under_exit_code_and_the_job_succeeds(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    # First run: SIGKILL itself (exit 137, retryable); second run: done.  ($$$$ is the
    # shell's $$ after Kubernetes' $$ -> $ escaping, which run-local applies like a kubelet.)
    worker = 'echo "attempt $FLATJOB_ATTEMPT restarts $FLATJOB_RESTART_COUNT" >> "$E2E_OUT/worker.log"; [ "$FLATJOB_RESTART_COUNT" = 0 ] && kill -9 $$$$; touch "$E2E_OUT/worker-done-$FLATJOB_ATTEMPT"'
    run = run_local(tmp_path, job(worker, out), "--backoff-scale", "0.01", tag=tag, timeout=60)
    assert run.code == 0, run.explain()
    # The same attempt: only the worker was restarted; the master kept waiting for it.
    assert (out / "worker.log").read_text().splitlines() == ["attempt 1 restarts 0", "attempt 1 restarts 1"]
    assert "restarts-worker-0 failed with exit code 137; restarting it (restart 1)" in run.stderr
    assert "PyTorchTrainingJob restarts Succeeded" in run.stderr


def test_a_signal_to_a_pods_process_ends_it_with_128_plus_the_signal_as_in_a_cluster(tmp_path: Path, tag: str) -> None:
    """A drain is a SIGTERM to the container; here the signal comes from outside with no API
    behind it, as when a node's OOM killer or an operator's kill reaches the process: the
    container ends with 143, the pod Failed, and ExitCode's policy restarts it (143 is
    retryable), exactly as the runtime treats it in a cluster."""
    out = tmp_path / "out"
    out.mkdir()
    worker = ('[ "$FLATJOB_RESTART_COUNT" = 0 ] || { touch "$E2E_OUT/worker-done-$FLATJOB_ATTEMPT"; exit 0; }; '
              'echo $$$$ > "$E2E_OUT/worker.pid"; exec sleep 60')

    def signal_the_worker() -> None:
        pid_file = out / "worker.pid"
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text().strip():
                time.sleep(0.3)  # the runtime has seen it Running
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=signal_the_worker, daemon=True)
    killer.start()
    run = run_local(tmp_path, job(worker, out), "--backoff-scale", "0.01", tag=tag, timeout=60)
    killer.join(5)
    assert run.code == 0, run.explain()
    assert "restarts-worker-0 failed with exit code 143; restarting it (restart 1)" in run.stderr
    assert "PyTorchTrainingJob restarts Succeeded" in run.stderr


def test_exit_1_is_not_restarted_under_exit_code_and_the_master_decides(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    worker = 'echo "cannot go on" >&2; touch "$E2E_OUT/worker-gave-up-$FLATJOB_ATTEMPT"; exit 1'
    run = run_local(tmp_path, job(worker, out), "--backoff-scale", "0.01", tag=tag, timeout=60)
    assert run.code == 1, run.explain()
    assert "[restarts-worker-0] cannot go on" in run.stdout
    assert "restarts-worker-0 failed with exit code 1; not restarted (restartPolicy ExitCode)" in run.stderr
    # T9k: the master decides; it saw the worker give up (exit 3).
    assert "PyTorchTrainingJob restarts has failed: restarts-master-0 failed with exit code 3" in run.stderr
    assert "Restarting" not in run.stderr
