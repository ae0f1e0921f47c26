"""Restart policy with real processes (no torch): the runtime's own decisions, driven by
exit codes of local processes.  Plain PyTorch mode restarts the failed replica alone, by its
own type's policy (T9k's manual), after a back-off shortened here with --backoff-scale; the
master keeps running."""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import run_local

pytestmark = pytest.mark.e2e

# The master waits for the worker of its attempt to finish, so the worker decides.
MASTER = 'for i in $(seq 200); do [ -e "$E2E_OUT/worker-done-$FLATJOB_ATTEMPT" ] && exit 0; sleep 0.05; done; exit 3'


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


def test_exit_1_is_not_restarted_under_exit_code_and_the_master_decides(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run = run_local(tmp_path, job('echo "cannot go on" >&2; exit 1', out), "--backoff-scale", "0.01", tag=tag, timeout=60)
    assert run.code == 1, run.explain()
    assert "[restarts-worker-0] cannot go on" in run.stdout
    assert "restarts-worker-0 failed with exit code 1; not restarted (restartPolicy ExitCode)" in run.stderr
    # T9k: the master decides; it gave up waiting for the worker (exit 3).
    assert "PyTorchTrainingJob restarts has failed: restarts-master-0 failed with exit code 3" in run.stderr
    assert "Restarting" not in run.stderr
