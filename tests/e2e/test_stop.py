"""Ctrl-C and SIGTERM stop everything: every pod's processes, also children that left the
process group (setsid, as torchrun's workers do) and a main process that ignores SIGTERM
(killed after terminationGracePeriodSeconds).  Nothing of the run is left afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .kit import command, environment, tagged, write_job

pytestmark = pytest.mark.e2e

# pod 0 ignores SIGTERM (so the grace period ends it); both leave a grandchild in its own session.
SCRIPT = 'if [ "$POD" = stop-worker-0 ]; then trap "" TERM; fi; setsid sleep 300 & sleep 300 & touch "$E2E_OUT/ready-$POD"; wait'


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_signal_stops_every_process_of_the_run(tmp_path: Path, tag: str, signum: int, code: int) -> None:
    out = tmp_path / "out"
    out.mkdir()
    job = write_job(tmp_path, f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata:
          name: stop
        spec:
          replicaSpecs:
            - type: worker
              replicas: 2
              restartPolicy:
                policy: Never
              template:
                spec:
                  terminationGracePeriodSeconds: 1
                  containers:
                    - name: main
                      image: busybox
                      command: [sh, -c, '{SCRIPT}']
                      env:
                        - name: E2E_OUT
                          value: {out}
                        - name: POD
                          valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
        """)
    proc = subprocess.Popen(command(job, "--timeout", "60"), env=environment(tag), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while len(list(out.glob("ready-*"))) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(list(out.glob("ready-*"))) == 2, proc.communicate(timeout=5)
        assert len(tagged(tag)) >= 6  # run-local, 2 x (sh, sleep, setsid sleep)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, stderr
    assert "stopping on" in stderr
    assert tagged(tag) == []


def test_a_process_that_drops_the_mark_is_still_stopped(tmp_path: Path, tag: str) -> None:
    """A process that dropped the mark (`env -u`, sudo, `env -i`) outlived run-local (review of
    round 14): it is still in its container's session, and below run-local, a subreaper."""
    from .kit import run_local

    run = run_local(tmp_path, """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata:
          name: escape
        spec:
          replicaSpecs:
            - type: worker
              replicas: 1
              restartPolicy:
                policy: Never
              template:
                spec:
                  containers:
                    - name: worker
                      image: busybox
                      command: [sh, -c, "env -u FLATJOB_LOCAL_MARK sleep 300 & exit 0"]
        """, tag=tag, timeout=60)
    assert run.code == 0, run.explain()
    left = tagged(tag)
    assert not left, f"processes of the job outlived run-local: {[Path(f'/proc/{p}/cmdline').read_bytes() for p in left if os.path.exists(f'/proc/{p}')]}"

