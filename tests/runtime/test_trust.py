"""The runtime acts only on what it made, and creates only what git's PodTemplates say.

- a pod somebody else created with the job's label (no ownerReference to the record) is
  never deleted or released: not on pause, not on clean-up (issue 16, "confused deputy");
- editing the record alone cannot make the runtime create a different pod: pods are copies
  of the PodTemplates, and the record only says how to run them (docs/runtime.md, "Trust").
"""

from __future__ import annotations

import copy

import pytest

from flatjob.compiler import keys

from .harness import NAMESPACE, REAL, Scenario
from .test_scenarios import pytorch

pytestmark = [pytest.mark.skipif(REAL, reason="writes to the fake API server directly"), pytest.mark.usefixtures("runtime_mode")]  # each test in both runtime modes


def _stranger(s: Scenario) -> None:
    """A pod with the job's labels that the runtime did not create (gated, so it never runs)."""
    s.cluster.create_pod(NAMESPACE, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "sim-worker-9", "labels": {keys.JOB_NAME: "sim"}, "annotations": {keys.ATTEMPT: "1"}},
        "spec": {"schedulingGates": [{"name": keys.RELEASE_GATE}], "containers": [{"name": "c", "image": "busybox"}]},
    })


def test_a_pod_the_runtime_did_not_make_survives_pause_and_clean_up() -> None:
    job = pytorch(master="sleep 60; exit 0", worker="sleep 60; exit 0", cleanup="All")
    s = Scenario(job)
    _stranger(s)
    s.run_until(lambda st: st.get("phase") == "Running")
    s.update_spec(job.replace("spec:\n  runPolicy:", "spec:\n  runMode:\n    pause:\n      enabled: true\n  runPolicy:"))
    s.run_until(lambda st: st.get("phase") == "Paused" and set(s.pods()) == {"sim-worker-9"})
    s.update_spec(job)
    st = s.finished()
    assert st["phase"] == "Succeeded"
    s.settle(30)
    assert set(s.pods()) == {"sim-worker-9"}
    assert s.pods()["sim-worker-9"]["spec"]["schedulingGates"]  # never released either


def test_editing_the_record_alone_does_not_change_the_pods() -> None:
    s = Scenario(pytorch(master="sleep 60; exit 0", worker="sleep 60; exit 0"))
    plural = s.kind.lower() + "s"
    record = s.cluster.record(NAMESPACE, plural, s.name)
    edited = copy.deepcopy(record)
    spec = edited["spec"]["replicaSpecs"][0]["template"]["spec"]
    spec["serviceAccountName"] = "cluster-admin-sa"
    spec["containers"][0]["image"] = "evil:latest"
    spec["volumes"] = [{"name": "host", "hostPath": {"path": "/"}}]
    s.cluster.apply_record(NAMESPACE, plural, edited)
    s.run_until(lambda st: st.get("phase") == "Running")
    master = s.pods()["sim-master-0"]["spec"]
    assert master["containers"][0]["image"] == "busybox:1.36"
    assert master.get("serviceAccountName") in (None, "default")
    assert not any("hostPath" in v for v in master.get("volumes") or [])
