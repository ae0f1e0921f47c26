"""What Argo CD and Flux show of a job through its life, on records the real runtime wrote.

The runtime runs over HTTP against the fake API server (which serves the CRD's default status
before the runtime writes one); at each moment the record is read back and judged by the
shipped Argo CD Lua (lupa), Flux's healthCheckExprs (cel-python) and kstatus, as
tests/healthkit.py runs them: waiting for the runtime, running, a replica restarting (issue
20: it used to read "All pods are running normally." and Current), running again, failed by
its restart limit.
"""

from __future__ import annotations

from typing import Any

import pytest
from healthkit import argocd, flux_cel, kstatus

from flatjob.compiler.render.crd import WAITING_MESSAGE
from flatjob.runtime.decisions.restart import SETTLE
from flatjob.runtime.decisions.status import MSG_RUNNING

from .harness import REAL, Scenario
from .test_scenarios import pytorch

pytestmark = [pytest.mark.skipif(REAL, reason="reads the fake API server's records at chosen moments"), pytest.mark.usefixtures("runtime_mode")]  # each test in both runtime modes


def judged(s: Scenario) -> tuple[dict[str, str], str, str]:
    record = s.cluster.record(s.namespace, "pytorchtrainingjobs", s.name)
    return argocd(record), flux_cel(record), kstatus(record)


def reconciling(st: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c["type"] == "Reconciling"), {})


def test_argocd_and_flux_through_a_restart_and_a_failure() -> None:
    s = Scenario(pytorch(master="sleep 20; exit 1", worker="sleep 600; exit 0", policy="OnFailure", limit=1))
    assert judged(s) == ({"status": "Progressing", "message": WAITING_MESSAGE}, "InProgress", "InProgress")  # no runtime yet
    s.run_until(lambda st: st.get("phase") == "Running" and st["aggregate"]["running"] == 3)
    assert judged(s) == ({"status": "Progressing", "message": MSG_RUNNING}, "Current", "Current")
    s.run_until(lambda st: reconciling(st).get("reason") == "Restarting")
    restart = "Restarting sim-master-0 after Pod[sim-master-0] exited with error code 1 (restart 1 of backoffLimit 1)."
    assert judged(s) == ({"status": "Progressing", "message": restart}, "InProgress", "InProgress")
    s.run_until(lambda st: st.get("phase") == "Running" and st["aggregate"]["running"] == 3)
    assert judged(s) == ({"status": "Progressing", "message": MSG_RUNNING}, "Current", "Current")
    s.finished()
    failed = "PyTorchTrainingJob sim has failed: sim-master-0 failed with exit code 1"
    assert judged(s) == ({"status": "Degraded", "message": f"BackoffLimitExceeded: {failed}"}, "Failed", "Failed")


def test_a_worker_failed_for_good_leaves_a_running_job_current_and_named() -> None:
    """Only the master decides a PyTorchTrainingJob (T9k): workers that fail under
    restartPolicy Never are not restarted and the job runs on. Nothing is being reconciled, so
    Flux reads it as current (no 5-minute timeout); Argo CD names the failed workers."""
    s = Scenario(pytorch(master="sleep 900; exit 0", worker="sleep 5; exit 1", policy="Never"))
    s.run_until(lambda st: st.get("aggregate", {}).get("failed") == 2)
    s.settle(SETTLE)  # a failure for good is decided once it has settled
    note = "1 of 3 pods are running; sim-worker-0, sim-worker-1 failed and are not restarted."
    assert judged(s) == ({"status": "Progressing", "message": note}, "Current", "Current")
    assert (reconciling(s.status()).get("status"), reconciling(s.status()).get("message")) == ("False", note)
