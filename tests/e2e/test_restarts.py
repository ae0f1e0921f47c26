"""Restart policy with real processes (no torch): the runtime's own decisions, driven by
exit codes of local processes.  Plain PyTorch mode restarts the whole group (a fixed world
cannot take a new member), after a back-off shortened here with --backoff-scale."""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import run_local

pytestmark = pytest.mark.e2e

# The master waits for the worker of the same attempt to finish, so the worker decides.
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
    # First attempt: SIGKILL itself (exit 137, retryable); second attempt: done.  ($$$$ is the
    # shell's $$ after Kubernetes' $$ -> $ escaping, which run-local applies like a kubelet.)
    worker = 'echo "attempt $FLATJOB_ATTEMPT restarts $FLATJOB_RESTART_COUNT" >> "$E2E_OUT/worker.log"; [ "$FLATJOB_RESTART_COUNT" = 0 ] && kill -9 $$$$; touch "$E2E_OUT/worker-done-$FLATJOB_ATTEMPT"'
    run = run_local(tmp_path, job(worker, out), "--backoff-scale", "0.01", tag=tag, timeout=60)
    assert run.code == 0, run.explain()
    assert (out / "worker.log").read_text().splitlines() == ["attempt 1 restarts 0", "attempt 2 restarts 1"]
    assert "restarts-worker-0 failed with exit code 137; restarting all 2 pods (restart 1)" in run.stderr
    assert "PyTorchTrainingJob restarts Succeeded" in run.stderr


def test_exit_1_fails_the_job_under_exit_code(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run = run_local(tmp_path, job('echo "cannot go on" >&2; exit 1', out), "--backoff-scale", "0.01", tag=tag, timeout=60)
    assert run.code == 1, run.explain()
    assert "[restarts-worker-0] cannot go on" in run.stdout
    assert "PyTorchTrainingJob restarts has failed: restarts-worker-0 failed with exit code 1" in run.stderr
    assert "Restarting" not in run.stderr
