"""Pods that ended, then were deleted before or while the runtime judged them (`-k lifecycle`).

A terminal pod is deleted at once (strategy.go CheckGracefulDelete), so the watch may bring its
end and its deletion together; PodGC force-deletes a deleted node's terminal pods without a
patch.  The runtime judges such a pod by its end when it ended CLOCK_SLACK before the deletion
began (outcomes.ended_before_deleted, decisions.settling_ended; review hx14).  Each scenario
runs in virtual time with the real client over HTTP (harness.Scenario).
"""

from __future__ import annotations

import pytest

from .harness import NAMESPACE, REAL, Scenario
from .test_lifecycle import events, restarts, uid
from .test_scenarios import pytorch

pytestmark = [pytest.mark.skipif(REAL, reason="drives the simulated kubelet"), pytest.mark.usefixtures("runtime_mode")]


@pytest.mark.parametrize("how", ["delete", "evict"])
def test_lifecycle_a_worker_deleted_in_the_cycle_it_succeeded_is_run_again(how: str) -> None:
    """A worker finishes (exit 0) while the master still runs; in the same moment, before the
    runtime's next cycle, someone deletes the completed pod (`kubectl delete pods
    --field-selector=status.phase==Succeeded`, `kubectl drain`, which evicts completed pods
    too; PodGC's terminated-pod threshold).  A terminal pod is deleted at once (strategy.go
    CheckGracefulDelete: grace 0), so the watch brings MODIFIED(Succeeded) and DELETED
    together.  The DELETED event carries the pod's final state (Succeeded, finished before
    the deletion).  Deleted within CLOCK_SLACK (5 s) of its end, as here, the runtime cannot
    tell a success from a program that exited 0 on SIGTERM across two clocks, so it still reads
    "deleted before it finished" and runs the completed replica again: the limit of the fix
    (test_lifecycle.py::*completed_worker_deleted_before_a_cycle_saw_it*, 8 s later)."""
    s = Scenario(pytorch(master="sleep 200; exit 0", worker="sleep 20; exit 0", policy="ExitCode"))
    s.run_until(lambda st: s.pods().get("sim-worker-1", {}).get("status", {}).get("phase") == "Succeeded", limit=120)
    old = uid(s, "sim-worker-1")
    if how == "delete":
        s.cluster.delete_pod(NAMESPACE, "sim-worker-1", old)
    else:
        s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
    st = s.run_until(lambda st: "sim-worker-1" in s.pods(), limit=60)
    assert uid(s, "sim-worker-1") != old  # a completed replica runs a second time
    assert [e["message"] for e in events(s, "Disrupted")] == ["sim-worker-1 was deleted before it finished; replacing it (not a restart)"]
    assert (st["backoffCount"], restarts(st)) == (0, {"master": 0, "worker": 0})
    assert s.finished()["phase"] == "Succeeded"


def test_lifecycle_a_completed_worker_deleted_after_the_runtime_saw_it_is_not_run_again() -> None:
    """The same deletion a few seconds later, once a cycle has seen the pod Succeeded: the
    ledger keeps it succeeded and nothing runs again (matches)."""
    s = Scenario(pytorch(master="sleep 200; exit 0", worker="sleep 20; exit 0", policy="ExitCode"))
    s.run_until(lambda st: "sim-worker-1" in st.get("runtime", {}).get("succeeded", "") or "sim-worker-{0..1}" in st.get("runtime", {}).get("succeeded", ""), limit=120)
    old = uid(s, "sim-worker-1")
    s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
    s.settle(60)
    assert "sim-worker-1" not in s.pods() and events(s, "Disrupted") == []
    assert s.starts[("sim-worker-1", "1", "0")] == 1 and old





def test_lifecycle_a_failure_for_good_then_its_node_deleted_stays_counted() -> None:
    """The master exits 1 (permanent under ExitCode) and settles (restart.SETTLE, 60 s); 5 s
    later its node, which runs no other pod of the job, is deleted (a cloud provider, a human
    removing a broken machine).  PodGC deletes the Failed pod without a patch 40-60 s later
    (gc_controller.go markFailedAndDeletePodWithCondition patches only pods not yet terminal).
    No peer was in trouble and the failure came first, so by architecture.md §5 it stays
    counted: the settle decides by the pod's last state (decisions.settling_ended), and the job
    fails as T9k's would; before, the vanished pod read as a deletion and ran again uncounted."""
    from .test_lifecycle import LONG, condition

    s = Scenario(pytorch(master=LONG, worker=LONG, policy="ExitCode").replace(
        "command: [sh, -c,", "resources: {requests: {cpu: '1'}}\n              command: [sh, -c,"))
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "1"}
    s.kubelet.add_node("fake-node-2", {"cpu": "1"})
    s.kubelet.add_node("fake-node-3", {"cpu": "1"})
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3)
    s.tick(10)
    s.kubelet.kill("sim-master-0", 1)
    s.tick(5)
    s.kubelet.delete_node(s.pods()["sim-master-0"]["spec"]["nodeName"])
    st = s.run_until(lambda st: st.get("phase") in ("Failed", "Succeeded"), limit=300)
    assert st.get("phase") == "Failed" and condition(st, "Failed")["status"] == "True", st.get("runtime")
    assert events(s, "Disrupted") == []


def test_lifecycle_a_completed_pod_deleted_while_the_watch_was_down_is_replaced_as_never_seen_to_end() -> None:
    """The limit flatjob accepts instead of a finalizer (docs/architecture.md §5, "A pod whose
    end was never seen"): a worker finishes (exit 0) and is deleted while the runtime's watch is
    down (an API server outage); the watch's history is compacted meanwhile, so the runtime
    relists and the pod is just gone: no DELETED event, no final state.  Nothing says it
    succeeded, so it is a disruption: replaced (a new uid), run a second time, never a failure,
    and the Event says why in those words, not that it was deleted before it finished."""
    from .test_lifecycle import busy, condition

    s = Scenario(pytorch(master="sleep 200; exit 0", worker="sleep 20; exit 0", policy="ExitCode"))
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=60)
    old = uid(s, "sim-worker-1")
    with s.server.outage():
        for _ in range(40):
            busy(s, 1)
            if s.pods()["sim-worker-1"]["status"].get("phase") == "Succeeded":
                break
        assert s.pods()["sim-worker-1"]["status"]["phase"] == "Succeeded"
        busy(s, 8)
        s.cluster.delete_pod(NAMESPACE, "sim-worker-1", old)  # a terminal pod goes at once
        assert "sim-worker-1" not in s.pods()
        s.cluster.compact()  # the watch cannot resume: a relist, which shows nothing of the deletion
    said: set[str] = set()

    def watch(st: dict) -> bool:
        said.add(condition(st, "Ready")["message"])
        return "sim-worker-1" in s.pods() and uid(s, "sim-worker-1") != old and s.pods()["sim-worker-1"]["status"].get("phase") == "Running"

    st = s.run_until(watch, limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st), st["runtime"]["disruptions"]) == ("Running", 0, {"master": 0, "worker": 0}, 1)
    assert [e["message"] for e in events(s, "Disrupted")] == [
        "sim-worker-1 is gone and its end was never seen (deleted while the runtime was not watching); replacing it (not a restart)"]
    assert "Replacing sim-worker-1 after a disruption (not counted as a restart); 1 of 2 pods are running." in said, said  # worker-0 has succeeded
    st = s.finished()
    assert st["phase"] == "Succeeded" and s.starts[("sim-worker-1", "1", "0")] == 2  # the completed replica ran again
