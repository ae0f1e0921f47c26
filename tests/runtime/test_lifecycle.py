"""The real pod lifecycle (`pytest -k lifecycle`; `pytest -m "" -k lifecycle` adds the per-job runtime mode): what a training cluster does to pods every day.

Each scenario is driven by the kubelet stand-in's real order (runtime/sim): a deletion sets
deletionTimestamp, the kubelet sends SIGTERM, the program exits with its own code, the
terminal phase is written, and only then the pod goes; the Eviction API, preemption and
taint eviction set DisruptionTarget first; a lost node's pods stay Running with Ready=False
until taint eviction deletes them and stay terminating until PodGC removes them.  Each
asserts the job's phase, the restart counts and the record's message (docs/architecture.md
§5, "Disruptions" and "Troubles"); where a pod is replaced,
its new uid, and where it cannot be, the record's words for what a human must do.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from flatjob.compiler import keys
from flatjob.runtime.decisions.restart import BACKOFF_BASE, JITTER, SETTLE
from flatjob.runtime.observe import seconds
from flatjob.runtime.ratelimit import BURST
from flatjob.runtime.sim.apiserver import kinds
from flatjob.runtime.sim.containers import Program, until_deleted
from flatjob.runtime.sim.nodes import NODE_MONITOR_GRACE, PODGC_PERIOD, PODGC_QUARANTINE

from .harness import NAMESPACE, REAL, Scenario
from .test_scenarios import pytorch

pytestmark = [pytest.mark.skipif(REAL, reason="drives the simulated kubelet, nodes and controllers"), pytest.mark.usefixtures("runtime_mode")]  # each test in both runtime modes

LONG = "sleep 600; exit 0"


def first_then(first: Program, then: Program) -> Callable[[dict[str, Any], dict[str, str]], Program]:
    """A behaviour: the first incarnation runs `first`, every later one `then`."""
    seen: list[str] = []

    def behave(pod: dict[str, Any], env: dict[str, str]) -> Program:
        seen.append(pod["metadata"]["uid"])
        return first if len(seen) == 1 else then

    return behave


def running(s: Scenario, count: int) -> dict[str, Any]:
    return s.run_until(lambda st: st.get("aggregate", {}).get("running") == count)


def uid(s: Scenario, name: str) -> str:
    return s.pods()[name]["metadata"]["uid"]


def condition(st: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in st["conditions"] if c["type"] == ctype)


def events(s: Scenario, reason: str) -> list[dict[str, Any]]:
    return [o for (r, _, _), o in s.cluster.objects.items() if r == "events" and o.get("reason") == reason]


def restarts(st: dict[str, Any]) -> dict[str, int]:
    return {t["type"]: t["restartCount"] for t in st["tasks"]}


def replaced(s: Scenario, name: str, old: str) -> Callable[[dict[str, Any]], bool]:
    """Done once `name` is a new incarnation and running."""
    return lambda st: name in s.pods() and uid(s, name) != old and s.pods()[name]["status"].get("phase") == "Running"


# --- deletions by others: drain, kubectl delete, preemption, node-pressure eviction -----------------

def test_lifecycle_a_drained_master_that_checkpoints_and_exits_0_is_replaced_not_a_success() -> None:
    """kubectl drain: the master catches SIGTERM, saves a checkpoint and exits 0.  Under the old
    kubelet stand-in the pod just vanished; with the real order, exit 0 arrives first."""
    s = Scenario(pytorch(master=LONG, worker=LONG, policy="ExitCode"))
    s.kubelet.behaviors["sim-master-0"] = first_then(Program(on_term=0), Program(30, 0))
    running(s, 3)
    old = uid(s, "sim-master-0")
    s.cluster.evict_pod(NAMESPACE, "sim-master-0")
    st = s.run_until(replaced(s, "sim-master-0", old), limit=120)
    assert st["phase"] == "Running" and st["backoffCount"] == 0 and restarts(st) == {"master": 0, "worker": 0}
    (event,) = events(s, "Disrupted")
    assert event["message"] == "sim-master-0 was disrupted (EvictionByEvictionAPI: Eviction API: evicting); replacing it (not a restart)"
    st = s.finished()
    assert st["phase"] == "Succeeded" and st["backoffCount"] == 0 and st["runtime"]["disruptions"] == 1


def test_lifecycle_a_drained_worker_that_exits_1_under_exit_code_does_not_fail_the_job() -> None:
    s = Scenario(pytorch(master="sleep 120; exit 0", worker=LONG, policy="ExitCode"))
    s.kubelet.behaviors["sim-worker-1"] = first_then(Program(on_term=1), Program(on_term=1))
    running(s, 3)
    old = uid(s, "sim-worker-1")
    s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
    st = s.run_until(replaced(s, "sim-worker-1", old), limit=120)  # a new uid
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    assert condition(st, "ReplicaFailure")["status"] == "False"  # a disruption is not an error in a pod
    assert "sim-worker-1 was disrupted (EvictionByEvictionAPI" in events(s, "Disrupted")[0]["message"]
    assert s.finished()["phase"] == "Succeeded"


@pytest.mark.parametrize("kind", ["pytorch", "deepspeed"])
def test_lifecycle_a_drain_under_a_quota_the_size_of_the_job_comes_back_without_a_false_alarm(kind: str) -> None:
    """A quota that holds exactly the job's pods: the drained pod's charge is released only when
    the quota controller has seen it go, so the replacement (a PyTorch pod; DeepSpeed's whole
    gang as a new attempt) made at once is refused over quota.  That is tried again in 3 s with
    no Warning, and the job runs again (review 23, round 15: a PodRefused Warning and 10 s)."""
    from .test_gitops_quota import quota

    if kind == "pytorch":
        s, victim, count = Scenario(pytorch(master=LONG, worker=LONG, policy="ExitCode")), "sim-worker-1", 3
    else:
        s, victim, count = Scenario(DEEPSPEED), "ds-worker-1", 3
        for name in ("ds-worker-0", "ds-worker-1", "ds-worker-2"):
            s.kubelet.behaviors[name] = until_deleted
    quota(s, pods=str(count))
    running(s, count)
    old = uid(s, victim)
    s.cluster.evict_pod(NAMESPACE, victim)
    st = s.run_until(lambda st: victim in s.pods() and uid(s, victim) != old and st.get("aggregate", {}).get("running") == count, limit=120)
    assert st["backoffCount"] == 0 and st["runtime"]["disruptions"] == 1
    assert events(s, "PodRefused") == events(s, "GangRefused") == []
    if not REAL:
        refused = [r for r in s.server.log if (r.verb, r.resource, r.code) == ("create", "pods", 403)]
        assert refused, "the quota controller's lag refused no create: the case this pins did not happen"


def _stopped(s: Scenario, name: str, old: str) -> bool:
    pod = s.pods().get(name)
    return pod is None or pod["metadata"]["uid"] != old or any("terminated" in (c.get("state") or {}) for c in pod["status"].get("containerStatuses") or [])


@pytest.mark.parametrize("grace, program", [
    pytest.param(120, Program(on_term=0, term_seconds=60), id="checkpoints-60s-then-exits-0"),
    pytest.param(None, None, id="default-grace-pid1-ignores-sigterm"),  # the sim's sh -c: SIGKILL after 30 s
])
def test_lifecycle_a_peer_failing_when_a_drained_pod_finally_stops_is_the_drains_doing(grace: int | None, program: Program | None) -> None:
    """kubectl drain of worker-1, which runs on through its grace period; the master's
    collective breaks only when it stops (exit 1).  The disruption lasts until the drained pod
    has stopped, plus DISRUPTION_WINDOW, not from when it was marked (review 23, round 3)."""
    text = pytorch(master=LONG, worker=LONG, policy="ExitCode")
    if grace is not None:
        text = text.replace("          containers:", f"          terminationGracePeriodSeconds: {grace}\n          containers:")
    s = Scenario(text)
    if program is not None:
        s.kubelet.behaviors["sim-worker-1"] = lambda pod, env: program
    running(s, 3)
    old, master = uid(s, "sim-worker-1"), uid(s, "sim-master-0")
    s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
    for _ in range(130):
        s.tick()
        if _stopped(s, "sim-worker-1", old):
            break
    assert s.clock.now > 30  # it stopped after the window a mark would have opened had closed
    s.tick()
    s.tick()
    s.kubelet.kill("sim-master-0", 1)
    st = s.run_until(lambda st: st["phase"] == "Failed" or (replaced(s, "sim-worker-1", old)(st) and replaced(s, "sim-master-0", master)(st)), limit=120)
    assert st["phase"] == "Running" and st["backoffCount"] == 0 and restarts(st) == {"master": 0, "worker": 0}
    assert any("sim-master-0 failed with exit code 1 while sim-worker-1 " in e["message"] for e in events(s, "Disrupted"))


def test_lifecycle_a_drained_pod_still_stopping_is_named_and_nothing_says_running_normally() -> None:
    s = Scenario(pytorch(master=LONG, worker=LONG).replace("          containers:", "          terminationGracePeriodSeconds: 120\n          containers:"))
    s.kubelet.behaviors["sim-worker-1"] = first_then(Program(on_term=0, term_seconds=60), Program())
    running(s, 3)
    old = uid(s, "sim-worker-1")
    s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
    s.settle(20)
    st = s.status()
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    ready = condition(st, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Disrupted")
    assert ready["message"] == ("pod sim-worker-1 is being disrupted (EvictionByEvictionAPI: Eviction API: evicting); "
                                "the job replaces it once it has stopped (not a restart)")
    assert condition(st, "ReplicaFailure")["message"] == "No replica has failed."
    assert "All pods are running normally." not in [c["message"] for c in st["conditions"]]
    st = s.run_until(replaced(s, "sim-worker-1", old), limit=120)  # it stops 60 s after SIGTERM: replaced, not counted
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    s.settle(5)
    assert condition(s.status(), "Ready")["message"] == "All pods are running normally."


def test_lifecycle_an_eviction_whose_delete_was_refused_leaves_the_pod_running() -> None:
    """The Eviction API writes DisruptionTarget in one request and deletes in the next
    (eviction.go addConditionAndDeletePod); a validating webhook on pod DELETE refuses the
    delete, so the pod runs on with the condition and no deletionTimestamp, and the disruption
    controller sets it False 2 min later (disruption.go syncStalePodDisruption).  No disruption
    happened: the runtime must not delete the pod itself (it did: "replacing it", then its own
    delete killed a healthy worker the cluster had left running; review hx21)."""
    s = Scenario(pytorch(master="sleep 400; exit 0", worker=LONG, policy="OnFailure"))
    running(s, 3)
    old = uid(s, "sim-worker-1")
    s.cluster.evict_pod(NAMESPACE, "sim-worker-1", delete_refused=True)
    s.settle(30)
    pod = s.pods()["sim-worker-1"]
    assert (pod["metadata"]["uid"], pod["metadata"].get("deletionTimestamp"), pod["status"]["phase"]) == (old, None, "Running")
    s.settle(120)  # the disruption controller: stale after 2 min
    assert next(c for c in s.pods()["sim-worker-1"]["status"]["conditions"] if c["type"] == "DisruptionTarget")["status"] == "False"
    st = s.finished()
    assert (st["phase"], st["backoffCount"], restarts(st), st["runtime"].get("disruptions", 0)) == ("Succeeded", 0, {"master": 0, "worker": 0}, 0)
    assert uid(s, "sim-worker-1") == old and events(s, "Disrupted") == []
    assert s.starts[("sim-worker-1", "1", "0")] == 1


def test_lifecycle_kubectl_delete_pod_is_replaced_uncounted_whatever_the_policy() -> None:
    """A deletion without DisruptionTarget: restartPolicy Never would not restart a failure,
    but the pod did not fail, someone deleted it."""
    s = Scenario(pytorch(master="sleep 120; exit 0", worker=LONG, policy="Never"))
    running(s, 3)
    old = uid(s, "sim-worker-0")
    s.cluster.delete_pod(NAMESPACE, "sim-worker-0", None)
    st = s.run_until(replaced(s, "sim-worker-0", old), limit=120)
    assert st["backoffCount"] == 0 and restarts(st) == {"master": 0, "worker": 0}
    assert "sim-worker-0 was deleted by someone else before it finished" in events(s, "Disrupted")[0]["message"]
    assert s.finished()["phase"] == "Succeeded"


def test_lifecycle_preemption_replaces_the_victim() -> None:
    s = Scenario(pytorch(master="sleep 120; exit 0", worker=LONG))
    running(s, 3)
    old = uid(s, "sim-worker-1")
    s.kubelet.scheduler.preempt("sim-worker-1")
    said: set[tuple[str, str]] = set()

    def watch(st: dict[str, Any]) -> bool:
        ready = condition(st, "Ready")
        if ready["status"] == "False":
            said.add((ready["message"], condition(st, "Reconciling")["message"]))
        return replaced(s, "sim-worker-1", old)(st)

    st = s.run_until(watch, limit=120)  # a new uid
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    # While it stops and while it is replaced, the record names it: never the bare phase (review of issue 23).
    replacing = "Replacing sim-worker-1 after a disruption (not counted as a restart); 2 of 3 pods are running."
    assert (replacing, replacing) in said, said
    assert all("sim-worker-1" in ready and "sim-worker-1" in reconciling for ready, reconciling in said), said
    assert condition(st, "ReplicaFailure")["status"] == "False"  # a disruption is not an error in a pod
    assert "PreemptionByScheduler: default-scheduler: preempting to accommodate a higher priority pod" in events(s, "Disrupted")[0]["message"]


def test_lifecycle_node_pressure_eviction_replaces_the_pod_the_kubelet_left_failed() -> None:
    """The kubelet evicts without deleting: the pod stays Failed (Evicted, exit 137); the runtime
    deletes it to free the name and creates it again."""
    s = Scenario(pytorch(master="sleep 120; exit 0", worker=LONG, policy="ExitCode"))
    running(s, 3)
    old = uid(s, "sim-worker-0")
    s.kubelet.evict("sim-worker-0")
    st = s.run_until(replaced(s, "sim-worker-0", old), limit=120)  # a new uid
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    assert condition(st, "ReplicaFailure")["status"] == "False"
    assert "TerminationByKubelet" in events(s, "Disrupted")[0]["message"]


GATE = "cloud.google.com/load-balancer-neg-ready"  # a readiness gate an admission webhook adds (GKE NEG; AWS LB controller, OpenKruise alike)


def gated(text: str) -> str:
    return text.replace("          containers:", f"          readinessGates:\n            - conditionType: {GATE}\n          containers:")


def test_lifecycle_a_pod_waiting_on_a_readiness_gate_is_not_on_a_lost_node() -> None:
    """The kubelet writes Ready=False (ReadinessGatesNotReady) with ContainersReady=True while a
    gate is not True: what MarkPodsNotReady leaves too, but its reason says whose (review 23, round 7)."""
    s = Scenario(gated(pytorch(master=LONG, worker=LONG)))
    s.run_until(lambda st: len(s.pods()) == 3 and all(p["status"].get("phase") == "Running" for p in s.pods().values()), limit=60)
    s.settle(10)
    st = s.status()
    assert st["phase"] == "Running" and "has not been reported" not in condition(st, "Ready")["message"]


def test_lifecycle_a_real_failure_beside_pods_waiting_on_a_readiness_gate_fails_the_job() -> None:
    """ExitCode: the master exits 1 by itself while the workers wait on their gate: permanent."""
    s = Scenario(gated(pytorch(master="sleep 20; exit 1", worker=LONG, policy="ExitCode", limit=1)))
    st = s.run_until(lambda st: st.get("phase") == "Failed" or st.get("runtime", {}).get("disruptions", 0) >= 1, limit=400)
    assert (st["phase"], st["runtime"].get("disruptions", 0)) == ("Failed", 0)
    assert condition(st, "Failed")["message"].endswith("sim-master-0 failed with exit code 1")


STORAGE = "Pod ephemeral local storage usage exceeds the total limit of containers 10Gi. "


def test_lifecycle_an_eviction_for_the_pods_own_storage_limit_is_counted_and_named() -> None:
    """No DisruptionTarget (localStorageEviction): the pod broke its own limit, a failure as a
    Kubernetes Job counts it; the record and the Event say it was evicted and why, not a bare
    137 that reads as out of memory."""
    s = Scenario(pytorch(master="sleep 300; exit 0", worker=LONG, policy="OnFailure"))
    running(s, 3)
    old = uid(s, "sim-worker-0")
    s.kubelet.evict("sim-worker-0", message=STORAGE, grace=2, condition=False)
    st = s.run_until(replaced(s, "sim-worker-0", old), limit=120)  # a new uid
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 1, {"master": 0, "worker": 1})
    assert (condition(st, "ReplicaFailure")["status"], condition(st, "ReplicaFailure")["message"]) == ("True", "Pod[sim-worker-0] exited with error code 137")
    (event,) = events(s, "Restarting")
    assert event["message"].startswith(f"sim-worker-0 was evicted by its node ({STORAGE.strip()}; exit code 137)")


def with_grace(text: str, seconds: int) -> str:
    """Every pod of the job asks for its own terminationGracePeriodSeconds (a checkpoint on SIGTERM)."""
    return text.replace("          containers:", f"          terminationGracePeriodSeconds: {seconds}\n          containers:")


# --- 1. disruption_began reads a grace that trim.pod has dropped ------------------------------------

def test_lifecycle_a_late_eviction_is_dated_back_by_the_pods_own_grace_period() -> None:
    """Review 23 r7 #1 with a pod that sets terminationGracePeriodSeconds: 120 (to checkpoint).
    A soft eviction (evictionMaxPodGracePeriod 90) of sim-worker-1, which checkpoints for 60 s;
    the master's collective breaks 2 s after the eviction began and it exits 1.  The kubelet
    dates DisruptionTarget when the pod stopped (60 s later); `disruption_began` subtracts the
    pod's grace, which trim.pod keeps (review of round 8: it was dropped, so 30 s was
    subtracted and the restart stayed counted)."""
    s = Scenario(with_grace(pytorch(master=LONG, worker=LONG, policy="OnFailure"), 120))
    s.kubelet.behaviors["sim-worker-1"] = lambda pod, env: Program(on_term=143, term_seconds=60)
    running(s, 3)
    assert s.pods()["sim-worker-1"]["spec"]["terminationGracePeriodSeconds"] == 120
    old = uid(s, "sim-master-0")
    s.kubelet.evict("sim-worker-1", grace=90)
    s.tick(2)
    s.kubelet.kill("sim-master-0", 1)
    st = s.run_until(lambda st: st["runtime"].get("disruptions", 0) >= 1 and st.get("aggregate", {}).get("running") == 3, limit=200)
    assert uid(s, "sim-master-0") != old
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0}), [e["message"] for e in events(s, "Restarting")]
    assert len(events(s, "RestartNotCounted")) == 1


def test_lifecycle_a_failure_before_a_hard_eviction_of_a_pod_with_a_short_grace_stays_counted() -> None:
    """The other side of the same drop: pods with terminationGracePeriodSeconds: 5.  The master
    exits 1 by itself (counted, restart 1); 20 s later the kubelet hard-evicts sim-worker-1
    (1 s).  The eviction began 20 s after the failure, so it cannot have caused it; with the
    pod's own 5 s the runtime would see that, but it subtracts 30 s and takes the restart back."""
    s = Scenario(with_grace(pytorch(master=LONG, worker=LONG, policy="OnFailure"), 5))
    running(s, 3)
    s.kubelet.kill("sim-master-0", 1)
    s.run_until(lambda st: st.get("backoffCount") == 1, limit=30)
    s.settle(20)
    s.kubelet.evict("sim-worker-1", grace=1)
    st = s.run_until(lambda st: st["runtime"].get("disruptions", 0) >= 1 and st.get("aggregate", {}).get("running") == 3, limit=120)
    s.settle(5)
    st = s.status()
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 1, {"master": 1, "worker": 0}), [e["message"] for e in events(s, "RestartNotCounted")]
    assert condition(st, "Ready")["message"] == "All pods are running normally."


def test_lifecycle_a_storage_eviction_of_a_program_that_exits_0_on_sigterm_is_a_counted_restart() -> None:
    """localStorageEviction: grace 0 (the kubelet's 2 s minimum), phase Failed, reason Evicted,
    no DisruptionTarget.  A training program that catches SIGTERM, saves and exits 0 within the
    2 s leaves its container at exit code 0 in a Failed pod.  The fix meant to count this eviction
    "as a Kubernetes Job counts it" (one retry); instead its code 0 is not retryable under
    OnFailure, so the job ends Failed with "sim-master-0 was evicted ... exit code 0" (a worker
    evicted so stays failed and is never replaced while the job shows Running)."""
    s = Scenario(pytorch(master=LONG, worker=LONG, policy="OnFailure"))
    s.kubelet.behaviors["sim-master-0"] = lambda pod, env: Program(on_term=0) if env.get("FLATJOB_RESTART_COUNT", "0") == "0" else Program()
    running(s, 3)
    old = uid(s, "sim-master-0")
    s.kubelet.evict("sim-master-0", message=STORAGE, grace=2, condition=False)
    for _ in range(3):  # the kubelet alone: the pod as the runtime will first see it
        s.kubelet.tick()
        s.clock.now += 1
    assert s.pods()["sim-master-0"]["status"]["phase"] == "Failed"
    assert s.pods()["sim-master-0"]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    st = s.run_until(lambda st: st.get("phase") == "Failed" or ("sim-master-0" in s.pods() and uid(s, "sim-master-0") != old and st.get("aggregate", {}).get("running") == 3), limit=200)
    assert st["phase"] == "Running", next(c for c in st["conditions"] if c["type"] == "Failed")["message"]
    assert (st["backoffCount"], restarts(st)) == (1, {"master": 1, "worker": 0})


def checkpoints_then_exits_0(pod: Any, env: dict[str, str]) -> Program:
    """A trainer with a SIGTERM handler: saves a checkpoint and exits 0 (its first incarnation)."""
    return Program(on_term=0, term_seconds=3) if env.get("FLATJOB_RESTART_COUNT", "0") == "0" else Program()


@pytest.mark.parametrize("condition", [pytest.param(True, id="disruption-target"), pytest.param(False, id="before-1.26")])
@pytest.mark.parametrize("victim", ["sim-master-0", "sim-worker-1"])
def test_lifecycle_a_graceful_node_shutdown_replaces_the_pod_uncounted(victim: str, condition: bool) -> None:
    """nodeshutdown_manager killPods: Failed, reason Terminated, with DisruptionTarget since 1.26;
    a program that checkpoints and exits 0 on SIGTERM neither ends the job nor is left failed
    (review of round 9: without the condition a master's shutdown failed the job)."""
    s = Scenario(pytorch(master=LONG, worker=LONG, policy="OnFailure"))
    s.kubelet.behaviors[victim] = checkpoints_then_exits_0
    running(s, 3)
    old = uid(s, victim)
    s.kubelet.shutdown(s.pods()[victim]["spec"]["nodeName"], condition=condition)
    st = s.run_until(lambda st: st.get("phase") == "Failed" or (victim in s.pods() and uid(s, victim) != old and st.get("aggregate", {}).get("running") == 3), limit=200)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    assert "shutdown" in events(s, "Disrupted")[0]["message"]


def test_lifecycle_a_node_pressure_eviction_without_disruption_target_is_a_disruption() -> None:
    """A kubelet before 1.26 writes no DisruptionTarget; its node-pressure message names it."""
    s = Scenario(pytorch(master="sleep 300; exit 0", worker=LONG, policy="ExitCode"))
    running(s, 3)
    old = uid(s, "sim-worker-0")
    s.kubelet.evict("sim-worker-0", message="The node was low on resource: memory. ", condition=False)
    st = s.run_until(replaced(s, "sim-worker-0", old), limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    assert events(s, "Disrupted")[0]["message"].startswith("sim-worker-0 was evicted by its node (The node was low on resource: memory.)")
    s.settle(5)
    assert condition(s.status(), "Ready")["message"] == "All pods are running normally."


DEEPSPEED = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata:
  name: ds
spec:
  config: {slotsPerWorker: 1, run: {python: [train.py]}}
  runPolicy: {backoffLimit: 1}
  worker:
    replicas: 3
    restartPolicy: OnFailure
    template:
      spec:
        containers:
          - {name: worker, image: "deepspeed:latest"}
"""


def test_lifecycle_a_drained_deepspeed_worker_replaces_the_gang_as_a_new_attempt() -> None:
    """deepspeed cannot take a new member: the gang comes back whole, and a disruption is no
    failure, so backoffLimit 1 is untouched; the launcher's 255 (ssh lost its peer) is not counted."""
    s = Scenario(DEEPSPEED)
    s.kubelet.behaviors["ds-worker-0"] = lambda pod, env: Program(20, 0) if env.get("FLATJOB_ATTEMPT") == "2" else Program()
    for name in ("ds-worker-1", "ds-worker-2"):
        s.kubelet.behaviors[name] = until_deleted
    running(s, 3)
    old = uid(s, "ds-worker-0")
    s.cluster.evict_pod(NAMESPACE, "ds-worker-1")
    st = s.run_until(lambda st: st["runtime"]["attempt"] == 2 and st.get("aggregate", {}).get("running") == 3, limit=120)
    assert st["backoffCount"] == 0 and restarts(st) == {"worker": 0} and uid(s, "ds-worker-0") != old
    assert events(s, "Disrupted")[0]["message"].startswith("ds-worker-1 was disrupted (EvictionByEvictionAPI")
    assert s.finished()["phase"] == "Succeeded"


# --- coupled peers: a rank fails because a member went --------------------------------------------

STRICT = DEEPSPEED.replace("backoffLimit: 1", "backoffLimit: 0").replace(
    '- {name: worker, image: "deepspeed:latest"}', '- {name: worker, image: "deepspeed:latest", resources: {requests: {cpu: "1"}}}')


def _on_three_nodes(**behaviors: Program) -> Scenario:
    """STRICT (backoffLimit 0: any failure counted would end it) with a worker per node."""
    s = Scenario(STRICT)
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "1"}
    for node in ("fake-node-2", "fake-node-3"):
        s.kubelet.add_node(node, {"cpu": "1"})
    for name in ("ds-worker-0", "ds-worker-1", "ds-worker-2"):
        program = behaviors.get(name.replace("-", "_"))
        s.kubelet.behaviors[name] = (lambda p: lambda pod, env: p)(program) if program else until_deleted
    running(s, 3)
    return s


def test_lifecycle_a_peer_failing_after_a_node_is_lost_is_the_losses_doing() -> None:
    """A node stops reporting; a minute later deepspeed on worker-0 loses its ssh session to the
    lost worker and exits 255.  Its failure is the lost node's doing: a new attempt, uncounted."""
    s = _on_three_nodes()
    s.kubelet.lose_node(s.pods()["ds-worker-2"]["spec"]["nodeName"])
    s.settle(60)
    s.kubelet.kill("ds-worker-0", 255)
    st = s.run_until(lambda st: st["phase"] == "Failed" or st["runtime"]["attempt"] == 2, limit=60)
    assert st["phase"] != "Failed" and st["backoffCount"] == 0 and restarts(st) == {"worker": 0}
    s.settle(5)
    st = s.status()  # the new attempt waits for the lost pod's object to go, and the record says so
    assert "ds-worker-0" not in s.pods() and condition(st, "Ready")["reason"] == "NodeLost"
    assert condition(st, "Ready")["message"].startswith("pod ds-worker-2 is being deleted, but its node ")
    assert "so the deletion cannot finish and the job cannot replace the pod" in condition(st, "Ready")["message"]
    (event,) = events(s, "Disrupted")
    assert event["message"].startswith("ds-worker-0 failed with exit code 255 (effective 137) while ds-worker-2 is on a node that stopped reporting")


def test_lifecycle_a_peer_failing_before_its_nodes_eviction_is_visible_waits_for_it() -> None:
    """A soft node-pressure eviction: worker-1 checkpoints for 20 s on SIGTERM, and the kubelet
    reports it Evicted only once it has stopped; deepspeed on worker-0 exits 255 at once.  A
    failure that would end the job first settles (SETTLE), and the eviction explains it."""
    s = _on_three_nodes(ds_worker_1=Program(on_term=143, term_seconds=20))
    old = uid(s, "ds-worker-1")
    s.kubelet.evict("ds-worker-1", grace=30)
    s.tick()
    s.kubelet.kill("ds-worker-0", 255)
    st = s.run_until(lambda st: st["phase"] == "Failed" or st["runtime"]["attempt"] == 2, limit=60)
    assert st["phase"] != "Failed" and st["backoffCount"] == 0 and restarts(st) == {"worker": 0}
    s.run_until(lambda st: "ds-worker-1" in s.pods() and uid(s, "ds-worker-1") != old, limit=60)  # the evicted pod, replaced
    assert [e["message"].split(" (")[0] for e in events(s, "Disrupted")] == ["ds-worker-0 failed with exit code 255"]


def test_lifecycle_a_peer_failing_before_an_eviction_is_visible_is_not_counted_under_on_failure() -> None:
    """The same node-pressure eviction under OnFailure: the master's failure is not final, so
    it is counted and restarted at once; when worker-1's eviction shows up (its pod already
    stopped), that restart is taken back: backoffCount and restartCount stay 0."""
    s = Scenario(pytorch(master=LONG, worker=LONG, policy="OnFailure"))
    s.kubelet.behaviors["sim-worker-1"] = lambda pod, env: Program(on_term=143, term_seconds=20)
    running(s, 3)
    old = uid(s, "sim-master-0")
    s.kubelet.evict("sim-worker-1", grace=30)
    s.tick(2)
    s.kubelet.kill("sim-master-0", 1)
    st = s.run_until(lambda st: st["runtime"].get("disruptions", 0) >= 1 and st.get("aggregate", {}).get("running") == 3, limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    assert uid(s, "sim-master-0") != old
    (event,) = events(s, "RestartNotCounted")
    assert event["message"].startswith("the restart of sim-master-0 ") and event["message"].endswith("was sim-worker-1's disruption's doing: not counted")


def test_lifecycle_a_peer_failing_before_an_eviction_is_visible_is_not_counted_in_a_group_restart() -> None:
    """The same eviction in a DeepSpeedJob (group scope, OnFailure, backoffLimit 1): deepspeed on
    worker-0 exits 255 at once and the gang's restart is counted; when worker-1's eviction shows
    up on the old attempt's pod, the gang's restart is taken back (review 23, round 5)."""
    s = Scenario(DEEPSPEED)
    s.kubelet.behaviors["ds-worker-1"] = lambda pod, env: Program(on_term=143, term_seconds=20) if env.get("FLATJOB_ATTEMPT") == "1" else until_deleted(pod, env)
    for name in ("ds-worker-0", "ds-worker-2"):
        s.kubelet.behaviors[name] = until_deleted
    running(s, 3)
    old = {name: uid(s, name) for name in s.pods()}
    s.kubelet.evict("ds-worker-1", grace=30)
    s.tick(2)
    s.kubelet.kill("ds-worker-0", 255)
    st = s.run_until(lambda st: st["runtime"]["attempt"] == 2 and st.get("aggregate", {}).get("running") == 3, limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"worker": 0})
    assert all(uid(s, name) != before for name, before in old.items())  # the whole gang is new
    (event,) = events(s, "RestartNotCounted")
    assert event["message"].startswith("the restart of all 3 pods ") and event["message"].endswith("was ds-worker-1's disruption's doing: not counted")


@pytest.mark.parametrize(("policy", "after"), [("ExitCode", 5), ("ExitCode", 15), ("OnFailure", 10)])
def test_lifecycle_a_peer_failing_before_its_lost_node_is_marked_is_the_losses_doing(policy: str, after: int) -> None:
    """A node loses power; NCCL notices in seconds and the master exits 1, but the node lifecycle
    controller marks the node's pods NotReady only after node-monitor-grace-period (50 s).
    A failure for good settles past that (SETTLE = NODE_NOTICE + 5 s), and a failure already
    counted is taken back when the mark shows: the loss of a node never decides the job nor
    counts a restart (review 23, round 5)."""
    s = Scenario(pytorch(master="sleep 2000; exit 0", worker="sleep 3000; exit 0", policy=policy).replace(
        "command: [sh, -c,", "resources: {requests: {cpu: '1'}}\n              command: [sh, -c,"))
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "1"}
    s.kubelet.add_node("fake-node-2", {"cpu": "1"})
    s.kubelet.add_node("fake-node-3", {"cpu": "1"})
    running(s, 3)
    s.kubelet.lose_node(s.pods()["sim-worker-1"]["spec"]["nodeName"])
    s.settle(after)
    s.kubelet.kill("sim-master-0", 1)
    s.settle(NODE_MONITOR_GRACE + 60)
    st = s.status()
    assert condition(st, "Ready")["reason"] == "NodeLost"  # the loss is visible by now
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Unknown", 0, {"master": 0, "worker": 0}), [e["message"] for e in events(s, "Restarting")]


def test_lifecycle_a_peer_timing_out_while_a_preempted_masters_replacement_cannot_be_scheduled_is_excused() -> None:
    """The scheduler preempts the master for a pod that keeps its room, so the replacement is
    Unschedulable; two minutes later a worker's torchrun gives up waiting for the rendezvous
    (exit 1). The trouble lasts until the replacement runs: the worker is replaced, uncounted,
    not failed for good under ExitCode; once the room is back, every pod runs again."""
    cpu = "resources: {requests: {cpu: '1'}}\n              command: [sh, -c,"
    s = Scenario(pytorch(master=LONG, worker=LONG, policy="ExitCode").replace("command: [sh, -c,", cpu))
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "3"}
    running(s, 3)
    old = uid(s, "sim-master-0")
    s.kubelet.scheduler.preempt("sim-master-0")
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "2"}  # the preemptor holds the room
    s.run_until(lambda st: "Unschedulable" in str(st["conditions"]), limit=60)
    s.settle(120)
    w0 = uid(s, "sim-worker-0")
    s.kubelet.kill("sim-worker-0", 1)  # RendezvousTimeoutError
    st = s.run_until(lambda st: "sim-worker-0" in s.pods() and uid(s, "sim-worker-0") != w0, limit=60)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    assert "failed" not in st["runtime"] or "sim-worker-0" not in str(st["runtime"]["failed"])
    assert any("sim-worker-0 failed with exit code 1 while sim-master-0 was disrupted" in e["message"] for e in events(s, "Disrupted"))  # (combined from similar events)
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "3"}  # the preemptor left
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=120)
    assert uid(s, "sim-master-0") != old and st["backoffCount"] == 0


def test_lifecycle_two_overlapping_drains_each_excuse_their_own_peers() -> None:
    """A node upgrade drains worker-0's node (60 s of checkpointing on SIGTERM); 5 s later
    worker-1 is preempted and stops at once. When worker-0 finally stops, the master's
    collective breaks (exit 1, permanent under ExitCode): still worker-0's drain's doing."""
    text = pytorch(master=LONG, worker=LONG, policy="ExitCode").replace("          containers:", "          terminationGracePeriodSeconds: 120\n          containers:")
    s = Scenario(text)
    s.kubelet.behaviors["sim-worker-0"] = lambda pod, env: Program(on_term=0, term_seconds=60)
    s.kubelet.behaviors["sim-worker-1"] = lambda pod, env: Program(on_term=143, term_seconds=0)
    running(s, 3)
    w0 = uid(s, "sim-worker-0")
    s.cluster.evict_pod(NAMESPACE, "sim-worker-0")
    s.tick(5)
    s.kubelet.scheduler.preempt("sim-worker-1")
    s.run_until(lambda st: "sim-worker-0" not in s.pods() or uid(s, "sim-worker-0") != w0, limit=120)
    master = uid(s, "sim-master-0")
    s.kubelet.kill("sim-master-0", 1)
    st = s.run_until(lambda st: st["phase"] == "Failed" or ("sim-master-0" in s.pods() and uid(s, "sim-master-0") != master), limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    assert any("sim-master-0 failed with exit code 1 while sim-worker-0 was disrupted" in e["message"] for e in events(s, "Disrupted"))  # (combined from similar events)


def test_lifecycle_a_failure_no_disruption_explains_ends_the_job_after_it_settles() -> None:
    s = _on_three_nodes()
    s.kubelet.kill("ds-worker-0", 1)
    killed = s.clock.now
    st = s.run_until(lambda st: st["phase"] == "Failed", limit=SETTLE + 30)
    assert SETTLE <= s.clock.now - killed <= SETTLE + 3
    assert condition(st, "Failed")["message"] == "DeepSpeedJob ds has failed: ds-worker-0 failed with exit code 1"
    assert not events(s, "Disrupted")


SINGLE = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: one
spec:
  replicaSpecs:
    - type: master
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: main
              image: busybox:1.36
              command: [sh, -c, 'sleep 3; exit 1']
"""


def test_lifecycle_a_job_of_one_pod_fails_at_once() -> None:
    """No peer can explain its failure (its own disruption would show on it with the failure),
    so it does not settle: Failed within a cycle, as T9k decides it."""
    s = Scenario(SINGLE)
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 1, limit=30)
    started = s.clock.now
    st = s.run_until(lambda st: st["phase"] == "Failed", limit=SETTLE)
    assert s.clock.now - started <= 5
    assert condition(st, "Failed")["message"] == "PyTorchTrainingJob one has failed: one-master-0 failed with exit code 1"


# --- admission: a pod its node refuses never ran ---------------------------------------------------

@pytest.mark.parametrize("policy", ["Never", "ExitCode"])
def test_lifecycle_a_pod_its_node_rejects_at_admission_is_replaced_uncounted_after_its_back_off(policy: str) -> None:
    """A device plugin restarting after a driver update: the kubelet rejects the master at
    admission (UnexpectedAdmissionError, "Pod was rejected: ..."), no container ran.  It was read
    as a lost pod (137) and ended the job under Never or backoffLimit 0 (review 23, round 5).
    Now it is replaced uncounted, after the pod's back-off (a pinned node may refuse it again)."""
    s = Scenario(pytorch(master="sleep 120; exit 0", worker="sleep 120; exit 0", policy=policy, limit=0))
    s.kubelet.reject("sim-master-0")
    s.run_until(lambda st: (s.pods().get("sim-master-0") or {}).get("status", {}).get("phase") == "Failed", limit=30)
    rejected = uid(s, "sim-master-0")
    st = s.run_until(lambda st: st.get("phase") == "Failed" or st.get("aggregate", {}).get("running") == 3, limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st), st["runtime"]["disruptions"]) == ("Running", 0, {"master": 0, "worker": 0}, 1)
    assert uid(s, "sim-master-0") != rejected
    (event,) = events(s, "Disrupted")
    assert event["message"].startswith("sim-master-0 was rejected by its node before it ran (UnexpectedAdmissionError: Allocate failed")
    assert "; replacing it in 1" in event["message"]  # BACKOFF_BASE, jittered
    assert s.finished()["phase"] == "Succeeded"


def test_lifecycle_a_deepspeed_worker_its_node_rejects_brings_the_gang_back_after_a_back_off() -> None:
    s = Scenario(STRICT)
    for name in ("ds-worker-0", "ds-worker-1", "ds-worker-2"):
        s.kubelet.behaviors[name] = until_deleted
    s.kubelet.reject("ds-worker-2", "OutOfcpu", "Node didn't have enough resource: cpu, requested: 1000, used: 1000, capacity: 1000")
    s.run_until(lambda st: (s.pods().get("ds-worker-2") or {}).get("status", {}).get("phase") == "Failed", limit=30)
    rejected = uid(s, "ds-worker-2")
    st = s.run_until(lambda st: st.get("phase") == "Failed" or (st["runtime"]["attempt"] == 2 and st.get("aggregate", {}).get("running") == 3), limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"worker": 0})
    assert uid(s, "ds-worker-2") != rejected
    assert events(s, "Disrupted")[0]["message"].startswith("ds-worker-2 was rejected by its node before it ran (OutOfcpu: Node didn't have enough resource")


# --- a lost node -------------------------------------------------------------------------------------

TWO_NODES = pytorch(master="sleep 2000; exit 0", worker="sleep 3000; exit 0").replace(
    "command: [sh, -c,", "resources: {requests: {cpu: '1'}}\n              command: [sh, -c,")


def test_lifecycle_a_lost_node_is_named_then_the_job_recovers_once_the_node_is_deleted() -> None:
    """Virtual time.  Node a holds the master and worker-0, node b worker-1; b loses power.
    Kubernetes never sets a phase Unknown: the pod stays Running with Ready=False after 50 s,
    taint eviction deletes it after 300 s more, and the deletion hangs until the Node object
    goes (a cloud provider deletes it; a human on bare metal), then PodGC removes the pod."""
    s = Scenario(TWO_NODES)
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "2"}
    s.kubelet.add_node("fake-node-2", {"cpu": "2"})
    s.kubelet.add_node("fake-node-3", {"cpu": "2"})
    running(s, 3)
    assert s.pods()["sim-worker-1"]["spec"]["nodeName"] == "fake-node-2"
    old, lost_at = uid(s, "sim-worker-1"), s.clock.now
    s.kubelet.lose_node("fake-node-2")
    st = s.run_until(lambda st: st["phase"] == "Unknown", limit=NODE_MONITOR_GRACE + 60)
    named_after = s.clock.now - lost_at
    assert named_after <= NODE_MONITOR_GRACE + 60  # named within a minute of the node going NotReady
    ready = condition(st, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "NodeLost")
    assert ready["message"].startswith("pod sim-worker-1 on node fake-node-2 has not been reported since ")
    assert condition(st, "Running")["status"] == "Unknown"
    entry = next(r for r in st["tasks"][1]["replicas"] if r["name"] == "sim-worker-1")
    assert entry["reason"] == "NodeLost" and "fake-node-2" in entry["message"]
    assert "All pods are running normally." not in [c["message"] for c in st["conditions"]]
    # Taint eviction: the pod is deleted, but no kubelet can finish it; the record says what to do.
    st = s.run_until(lambda st: "kubectl delete node fake-node-2" in condition(st, "Ready")["message"], limit=400)
    assert s.pods()["sim-worker-1"]["metadata"].get("deletionTimestamp") and st["backoffCount"] == 0
    assert "kubectl delete pod sim-worker-1 --grace-period=0 --force" in condition(st, "Ready")["message"]
    # The machine is gone for good: its Node object is deleted, PodGC removes the pod, the job runs again.
    s.kubelet.delete_node("fake-node-2")
    deleted_at = s.clock.now
    st = s.run_until(replaced(s, "sim-worker-1", old), limit=300)
    bound = PODGC_QUARANTINE + 2 * PODGC_PERIOD + 10  # found gone by a pass, quarantined 40 s, collected by a later pass, then a start
    assert s.clock.now - deleted_at <= bound, s.clock.now - deleted_at
    assert s.pods()["sim-worker-1"]["spec"]["nodeName"] == "fake-node-3"
    st = s.run_until(lambda st: st["phase"] == "Running" and condition(st, "Ready")["status"] == "True", limit=30)
    assert (st["backoffCount"], restarts(st), st["runtime"]["disruptions"]) == (0, {"master": 0, "worker": 0}, 1)


@pytest.mark.parametrize("policy", ["ExitCode", "OnFailure"])
def test_lifecycle_a_node_that_reboots_replaces_its_pod_uncounted(policy: str) -> None:
    """Virtual time.  worker-1's node loses power and comes back 2 minutes later, rebooted: no
    container survived, containerd reports the program exited 255, reason Unknown, and the
    kubelet fails the pod (restartPolicy Never).  That end is the node's, not the training's:
    the pod is replaced at once and not counted, under ExitCode (where 255 is permanent) and
    OnFailure alike (review 23, round 15: ExitCode left worker-1 failed for good, OnFailure
    counted a restart)."""
    s = Scenario(TWO_NODES.replace("restartPolicy: OnFailure", f"restartPolicy: {policy}"))
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "2"}
    s.kubelet.add_node("fake-node-2", {"cpu": "2"})
    running(s, 3)
    old = uid(s, "sim-worker-1")
    s.kubelet.lose_node("fake-node-2")
    s.run_until(lambda st: st["phase"] == "Unknown", limit=NODE_MONITOR_GRACE + 60)
    s.settle(60)
    s.kubelet.reboot_node("fake-node-2")
    st = s.run_until(replaced(s, "sim-worker-1", old), limit=60)
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=60)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    (event,) = events(s, "Disrupted")
    assert event["message"].startswith("sim-worker-1 was lost with its node: the container runtime found its program gone (a node restart) (exit code 255, reason Unknown)")
    assert condition(st, "Ready")["status"] == "True" and condition(st, "Failed")["status"] == "False"


def _lost(text: str) -> tuple[Scenario, str]:
    s = Scenario(text)
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "2"}
    s.kubelet.add_node("fake-node-2", {"cpu": "2"})
    s.kubelet.add_node("fake-node-3", {"cpu": "2"})
    running(s, 3)
    node = s.pods()["sim-worker-1"]["spec"]["nodeName"]
    assert s.pods()["sim-master-0"]["spec"]["nodeName"] != node
    s.kubelet.lose_node(node)
    return s, node


def test_lifecycle_a_peer_failing_at_the_nccl_timeout_after_taint_eviction_is_the_losses_doing() -> None:
    """worker-1's node loses power; the master blocks in a collective until NCCL's watchdog
    (10 min by default) and exits 1, long after taint eviction (350 s) marked worker-1, which
    still sits on the dead node: its failure is the lost node's doing, not the training's."""
    s, _ = _lost(pytorch(master="sleep 2000; exit 0", worker="sleep 3000; exit 0", policy="ExitCode").replace(
        "command: [sh, -c,", "resources: {requests: {cpu: '1'}}\n              command: [sh, -c,"))
    s.settle(600)
    assert s.pods()["sim-worker-1"]["metadata"].get("deletionTimestamp")  # taint eviction fired
    s.kubelet.kill("sim-master-0", 1)
    s.settle(90)
    st = s.status()
    assert st["phase"] != "Failed" and st["backoffCount"] == 0, [c["message"] for c in st["conditions"] if c["type"] == "Failed"]
    assert any("sim-master-0 failed with exit code 1 while sim-worker-1 is on a node that stopped reporting" in e["message"] for e in events(s, "Disrupted"))  # after the recorder's "(combined from similar events): "


def test_lifecycle_a_pod_that_tolerates_a_lost_node_forever_says_what_a_human_must_do() -> None:
    """`tolerations: [{operator: Exists}]` (common on tainted GPU pools): taint eviction never
    deletes the pod (getMinTolerationTime: forever), so the record says what to do at once."""
    s, node = _lost(TWO_NODES.replace("          containers:", "          tolerations: [{operator: Exists}]\n          containers:"))
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "NodeLost", limit=NODE_MONITOR_GRACE + 60)
    message = condition(st, "Ready")["message"]
    assert "tolerates an unreachable node forever, so Kubernetes never deletes it" in message
    assert f"kubectl delete node {node}" in message and "kubectl delete pod sim-worker-1 --grace-period=0 --force" in message
    s.settle(1200)
    assert not s.pods()["sim-worker-1"]["metadata"].get("deletionTimestamp")  # as Kubernetes: never evicted
    st = s.status()
    assert condition(st, "Ready")["message"] == message
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Unknown", 0, {"master": 0, "worker": 0})  # nothing to count: a human decides


def test_lifecycle_a_lost_nodes_eviction_time_is_the_pods_own_toleration() -> None:
    s, _ = _lost(TWO_NODES.replace("          containers:", (
        "          tolerations: [{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 60}]\n"
        "          containers:")))
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "NodeLost", limit=NODE_MONITOR_GRACE + 60)
    assert "its toleration of an unreachable node runs out (60 s, about " in condition(st, "Ready")["message"]
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Unknown", 0, {"master": 0, "worker": 0})


def test_lifecycle_a_toleration_past_any_time_kubernetes_writes_is_said_not_a_reconcile_error() -> None:
    """hx22: a toleration of 10^15 s (the API server takes any int64) put the eviction time past
    what gmtime takes, and its OverflowError failed every reconcile of the job (ReconcileError,
    no decision made) once the node was lost; the time is said as the last one RFC 3339 writes."""
    s, _ = _lost(TWO_NODES.replace("          containers:", (
        "          tolerations: [{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 1000000000000000}]\n"
        "          containers:")))
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] in ("NodeLost", "ReconcileError"), limit=NODE_MONITOR_GRACE + 60)
    assert condition(st, "Ready")["reason"] == "NodeLost", condition(st, "Ready")
    assert "runs out (1000000000000000 s, about 9999-12-31T23:59:59Z)" in condition(st, "Ready")["message"]


@pytest.mark.parametrize("master_too", [False, True])
def test_lifecycle_a_failure_while_its_own_node_was_cut_off_is_the_losses_doing(master_too: bool) -> None:
    """A partition cuts fake-node-2 off for 200 s, less than taint eviction's 300 s: worker-1's
    collective times out 120 s in and its program exits 1, which its kubelet reports only once
    the node is back (status_manager.go sends its cached status then).  The node was marked
    not ready 50 s in, so the exit came while the pod was known lost: the loss's doing, as the
    master's failure beside it is.  It was counted, and under ExitCode ended the job (review hx21)."""
    s = Scenario(pytorch(master="sleep 2000; exit 0", worker="sleep 3000; exit 0", policy="ExitCode").replace(
        "command: [sh, -c,", "resources: {requests: {cpu: '1'}}\n              command: [sh, -c,"))
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "2"}
    s.kubelet.add_node("fake-node-2", {"cpu": "2"})
    running(s, 3)
    old = uid(s, "sim-worker-1")
    assert s.pods()["sim-worker-1"]["spec"]["nodeName"] == "fake-node-2"
    s.kubelet.lose_node("fake-node-2")
    cut = s.clock.now
    s.kubelet.runs[old].containers[0].exits(cut + 120, 1)  # NCCL's timeout, unseen while the node is cut off
    s.run_until(lambda st: condition(st, "Ready")["reason"] == "NodeLost", limit=NODE_MONITOR_GRACE + 15)
    s.settle(cut + 120 - s.clock.now)
    if master_too:
        s.kubelet.kill("sim-master-0", 1)  # its side of the same collective
    s.settle(cut + 200 - s.clock.now)
    s.kubelet.restore_node("fake-node-2")
    st = s.run_until(replaced(s, "sim-worker-1", old), limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0}), [e["message"] for e in events(s, "Restarting")]
    assert any(e["message"].endswith("sim-worker-1 failed with exit code 1 while its node was not reporting; replacing it (not a restart)") for e in events(s, "Disrupted"))
    s.settle(SETTLE + 5)
    assert s.status()["phase"] == "Running"


def test_lifecycle_a_node_that_comes_back_finishes_what_was_asked_meanwhile() -> None:
    s = Scenario(TWO_NODES)
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "2"}
    s.kubelet.add_node("fake-node-2", {"cpu": "2"})
    running(s, 3)
    old = uid(s, "sim-worker-1")
    s.kubelet.lose_node("fake-node-2")
    s.run_until(lambda st: "kubectl delete node" in condition(st, "Ready")["message"], limit=500)
    s.kubelet.runs[old].containers[0].program = Program(on_term=0, term_seconds=10)  # its program checkpoints for 10 s on SIGTERM
    for _ in range(60):  # back after its deletion's grace (30 s) ran out
        s.tick()
    s.kubelet.restore_node("fake-node-2")  # its kubelet sees the deletion: SIGTERM, status, removal
    back = s.clock.now
    s.run_until(lambda st: s.pods()["sim-worker-1"]["status"].get("phase") in ("Succeeded", "Failed"), limit=60)
    ended = s.pods()["sim-worker-1"]  # the grace counts from its kubelet's return (pod_workers.go), not from the deletion: its own exit
    assert (ended["metadata"]["uid"], ended["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]) == (old, 0) and s.clock.now - back >= 10
    st = s.run_until(replaced(s, "sim-worker-1", old), limit=120)
    assert st["backoffCount"] == 0


def test_lifecycle_a_kubelet_whose_pleg_is_unhealthy_leaves_its_pods_running_then_its_deletion_hangs() -> None:
    """Virtual time.  worker-1's node keeps reporting, but its kubelet's PLEG stalls (a hung
    container runtime): the node is Ready=False by its kubelet's own word and tainted
    not-ready, but no pod is marked NotReady (monitorNodeHealth marks pods only when the
    controller itself finds a node silent) and the kubelet syncs none.  The program runs on:
    nothing is lost, nothing counted.  After the pod's 300 s not-ready toleration taint eviction
    deletes it, which the stalled kubelet cannot act on: the record names the disruption, then
    the deletion that does not finish.  Once the PLEG relists, the kubelet stops the pod and the
    job replaces it, uncounted."""
    s = Scenario(TWO_NODES)
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "2"}
    s.kubelet.add_node("fake-node-2", {"cpu": "2"})
    running(s, 3)
    assert s.pods()["sim-worker-1"]["spec"]["nodeName"] == "fake-node-2"
    old, stalled_at = uid(s, "sim-worker-1"), s.clock.now
    s.kubelet.pleg_unhealthy("fake-node-2")
    s.settle(120)
    st = s.status()
    assert s.kubelet.nodes["fake-node-2"].ready == "False" and s.pods()["sim-worker-1"]["status"]["phase"] == "Running"
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    assert condition(st, "Ready")["message"] == "All pods are running normally."  # its containers do run
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "Disrupted", limit=300)
    assert s.clock.now - stalled_at >= 300  # the pod's not-ready toleration
    assert condition(st, "Ready")["message"] == ("pod sim-worker-1 is being disrupted (DeletionByTaintManager: Taint manager: deleting due to "
                                                 "NoExecute taint); the job replaces it once it has stopped (not a restart)")
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "DeletionStuck", limit=120)
    assert "kubectl delete pod sim-worker-1 --grace-period=0 --force" in condition(st, "Ready")["message"]
    assert (st["phase"], st["backoffCount"], restarts(st), uid(s, "sim-worker-1")) == ("Running", 0, {"master": 0, "worker": 0}, old)
    s.kubelet.pleg_unhealthy("fake-node-2", healthy=True)  # it relists: SIGTERM, the grace, status, removal
    st = s.run_until(replaced(s, "sim-worker-1", old), limit=120)
    st = s.run_until(lambda st: condition(st, "Ready")["status"] == "True", limit=30)
    assert (st["phase"], st["backoffCount"], restarts(st), st["runtime"]["disruptions"]) == ("Running", 0, {"master": 0, "worker": 0}, 1)
    assert [e["message"] for e in events(s, "Disrupted")] == [
        "sim-worker-1 was disrupted (DeletionByTaintManager: Taint manager: deleting due to NoExecute taint); replacing it (not a restart)"]


# --- init containers -----------------------------------------------------------------------------------

INIT = pytorch(master=LONG, worker=LONG, policy="ExitCode").replace(
    "      template:\n        spec:\n          containers:\n            - name: pytorch\n              image: busybox:1.36\n              command: [sh, -c, 'sleep 600; exit 0']\n    - type: worker",
    "      template:\n        spec:\n          initContainers:\n            - {name: fetch, image: busybox:1.36, command: [sh, -c, 'exit 1']}\n"
    "          containers:\n            - name: pytorch\n              image: busybox:1.36\n              command: [sh, -c, 'sleep 600; exit 0']\n    - type: worker", 1)


def test_lifecycle_an_init_containers_exit_1_is_permanent_under_exit_code() -> None:
    """The init container's exit code is the pod's: 1 is permanent under ExitCode (it used to
    be read as a kill, 137, and retried until backoffLimit was spent)."""
    assert "initContainers" in INIT
    s = Scenario(INIT)
    st = s.finished()
    assert st["phase"] == "Failed" and st["backoffCount"] == 0 and restarts(st) == {"master": 0, "worker": 0}
    t9k = "PyTorchTrainingJob sim has failed: sim-master-0 failed with exit code 1"  # T9k's message, bare
    assert condition(st, "Failed")["message"] == t9k
    assert [e["message"] for e in events(s, "Failed")] == [f"{t9k}; sim-master-0 failed with exit code 1 in an init container (Init:Error)"]


FETCH = INIT.replace("command: [sh, -c, 'exit 1']", "command: [sh, -c, 'sleep 30; exit 0']")


def test_lifecycle_an_init_container_the_oom_killer_hit_is_a_kill_whatever_its_exit_code() -> None:
    """The OOM killer ends a child of the master's init container (cgroup v1, or the kubelet's
    singleProcessOOMKill): the container exits 1 with reason OOMKilled.  A regular container's
    OOMKilled is 137 whatever its code; an init container's read as its bare 1 and failed the
    job for good under ExitCode (review hx14).  Now it is a kill, retried and counted."""
    assert FETCH != INIT
    s = Scenario(FETCH)
    s.run_until(lambda st: any("running" in (c.get("state") or {}) for c in s.pods().get("sim-master-0", {}).get("status", {}).get("initContainerStatuses") or []), limit=60)
    old = uid(s, "sim-master-0")
    s.kubelet.kill("sim-master-0", 1, "OOMKilled")
    st = s.run_until(lambda st: st["phase"] == "Failed" or st["backoffCount"] == 1, limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 1, {"master": 1, "worker": 0})
    assert next(e["message"] for e in events(s, "Restarting")).startswith("sim-master-0 failed with exit code 1 (effective 137) in an init container (Init:OOMKilled)")
    s.run_until(lambda st: "sim-master-0" in s.pods() and uid(s, "sim-master-0") != old, limit=60)


def busy(s: Scenario, seconds: int) -> None:
    """The runtime's cycles wait (a busy namespace runtime, a slow watch) while the cluster goes
    on: its watch then brings every change of those seconds in one batch."""
    for _ in range(seconds):
        s.kubelet.tick()
        s.clock.now += 1


@pytest.mark.parametrize("how", ["delete", "evict"])
def test_lifecycle_a_completed_worker_deleted_before_a_cycle_saw_it_succeed_is_not_run_again(how: str) -> None:
    """A worker finishes (exit 0) while the master still runs; the runtime's cycles come late, and
    8 s later someone deletes the completed pod (`kubectl delete` of completed pods; `kubectl
    drain` evicts them too).  A terminal pod goes at once (strategy.go CheckGracefulDelete), so
    the watch brings its success and its deletion together.  The DELETED event's object (ended
    before the deletion began) decides: a success, not run again.  It used to read "deleted
    before it finished" and ran the completed replica a second time (review hx14)."""
    s = Scenario(pytorch(master="sleep 200; exit 0", worker="sleep 20; exit 0", policy="ExitCode"))
    s.run_until(lambda st: s.pods().get("sim-worker-1", {}).get("status", {}).get("phase") == "Succeeded", limit=120)
    busy(s, 8)
    old = uid(s, "sim-worker-1")
    if how == "delete":
        s.cluster.delete_pod(NAMESPACE, "sim-worker-1", old)
    else:
        s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
    busy(s, 2)
    s.settle(30)
    st = s.status()
    assert "sim-worker-1" not in s.pods() and events(s, "Disrupted") == []
    assert (st["backoffCount"], restarts(st), st["runtime"].get("disruptions")) == (0, {"master": 0, "worker": 0}, None)
    assert st["runtime"]["succeeded"] == "sim-worker-{0..1}" or st["runtime"]["succeeded"] == ["sim-worker-{0..1}"]
    st = s.finished()
    assert st["phase"] == "Succeeded" and s.starts[("sim-worker-1", "1", "0")] == 1


# --- many pods failing at once -------------------------------------------------------------------------

MASS = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: mass
spec:
  replicaSpecs:
    - type: worker
      replicas: 40
      restartPolicy: {policy: OnFailure, limit: 3}
      template:
        spec:
          containers:
            - name: main
              image: busybox:1.36
              command: [sh, -c, '[ "$FLATJOB_RESTART_COUNT" -ge 1 ] && { sleep 20; exit 0; }; sleep 30; exit 1']
"""


def test_lifecycle_forty_pods_failing_together_are_one_incident_and_run_again_within_one_back_off_step() -> None:
    """A NCCL abort: every rank exits 1 within the same second.  One incident (backoffCount 1),
    forty restarts of the workers, each back after the first step, never an escalated one."""
    s = Scenario(MASS)
    running(s, 40)
    before = {name: pod["metadata"]["uid"] for name, pod in s.pods().items()}
    s.run_until(lambda st: st["backoffCount"] == 1, limit=60)
    failed_at = s.clock.now
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 40, limit=120)
    # One back-off step (10 s and its jitter), plus the 120 writes it takes (deletes, creates,
    # releases) through the write budget, which a 1-second tick of this harness caps at its burst.
    assert s.clock.now - failed_at <= BACKOFF_BASE * (1 + JITTER) + 120 / BURST + 3
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 1, {"worker": 40})
    assert all(s.pods()[name]["metadata"]["uid"] != was for name, was in before.items())  # every pod a new one
    assert condition(st, "ReplicaFailure")["message"].endswith("exited with error code 1")
    st = s.finished()
    assert st["phase"] == "Succeeded" and st["backoffCount"] == 1
    restarting = events(s, "Restarting")
    assert len(restarting) == 1 and restarting[0]["count"] == 40  # one Event, counted, not forty


def test_lifecycle_forty_pods_failing_together_under_a_throttling_api_server_wait_out_its_retry_after() -> None:
    """Client manners (issue 23, case 6): the same NCCL abort while the API server throttles
    (429 Too Many Requests with Retry-After, as max-in-flight and APF answer,
    filters/maxinflight.go tooManyRequests).  The runtime sends no pod create before the
    Retry-After is over, never more writes in a second than its write budget's burst, one
    Restarting Event counted forty times, and the job still runs again: every pod a new uid, one
    incident, nothing lost."""
    from flatjob.runtime.api import ApiError

    s = Scenario(MASS)
    running(s, 40)
    before = {name: pod["metadata"]["uid"] for name, pod in s.pods().items()}
    writes: list[tuple[float, str, str]] = []  # (virtual time, verb, resource) of each runtime write that reached the server
    throttled: list[float] = []  # when a create was answered 429
    inner = s.server.on_request

    def throttle(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        inner(verb, resource, namespace, name, agent)
        if "(runtime-" not in agent or verb not in ("create", "update", "patch", "delete"):
            return
        if resource == "pods" and verb == "create" and len(throttled) < 3:
            throttled.append(s.clock.now)
            raise ApiError("Too many requests, please try again later.", 429, "TooManyRequests", retry_after=RETRY_AFTER)
        writes.append((s.clock.now, verb, resource))

    s.server.on_request = throttle
    s.run_until(lambda st: st["backoffCount"] == 1, limit=60)
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 40, limit=180)
    assert len(throttled) == 3, throttled
    tried = sorted([*throttled, *(at for at, verb, resource in writes if (verb, resource) == ("create", "pods"))])
    for at in throttled:  # Retry-After honoured: the next create is tried once it is over, not after 1 s
        assert min(later for later in tried if later > at) >= at + RETRY_AFTER, (at, tried[:8])
    per_second = Counter(int(at) for at, _, _ in writes)
    assert max(per_second.values()) <= BURST, per_second.most_common(3)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 1, {"worker": 40})
    assert all(s.pods()[name]["metadata"]["uid"] != was for name, was in before.items())  # every pod a new one
    assert condition(st, "ReplicaFailure")["message"].endswith("exited with error code 1")
    (restarting,) = events(s, "Restarting")
    assert restarting["count"] == 40
    assert s.finished()["phase"] == "Succeeded"


RETRY_AFTER = 5


# --- pods that cannot start ------------------------------------------------------------------------------

def test_lifecycle_an_image_that_cannot_be_pulled_is_named_until_it_can() -> None:
    s = Scenario(pytorch(master=LONG, worker=LONG).replace("image: busybox:1.36\n              command: [sh, -c, 'sleep 600; exit 0']\n    - type: worker",
                                                            "image: registry.example/typo:1\n              command: [sh, -c, 'sleep 600; exit 0']\n    - type: worker", 1))
    s.kubelet.unpullable.add("registry.example/typo:1")
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "ImagePullBackOff", limit=30)
    message = condition(st, "Ready")["message"]
    assert message.startswith('pod sim-master-0 cannot start: ImagePullBackOff: Back-off pulling image "registry.example/typo:1": ErrImagePull: ')
    entry = st["tasks"][0]["replicas"][0]
    assert (entry["phase"], entry["reason"]) == ("Pending", "ImagePullBackOff")
    assert condition(st, "Reconciling")["status"] == "True"
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})  # the workers run; the master waits, never counted
    s.kubelet.unpullable.clear()  # the image is pushed: the next pull (within 5 min) succeeds
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=400)
    assert condition(st, "Ready")["status"] == "True"


def test_lifecycle_an_init_containers_image_that_cannot_be_pulled_is_named() -> None:
    """kubectl's Init:ImagePullBackOff: the error is on initContainerStatuses, the regular
    containers wait PodInitializing."""
    s = Scenario(INIT.replace("{name: fetch, image: busybox:1.36, command: [sh, -c, 'exit 1']}",
                              "{name: fetch, image: registry.example/fetch:typo, command: [sh, -c, 'exit 0']}"))
    s.kubelet.unpullable.add("registry.example/fetch:typo")
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "ImagePullBackOff", limit=30)
    assert condition(st, "Ready")["message"].startswith('pod sim-master-0 cannot start: ImagePullBackOff: Back-off pulling image "registry.example/fetch:typo"')
    assert condition(st, "Ready")["message"].endswith("(init container fetch)")
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})  # the workers run


SLOW_INIT = TWO_NODES.replace(
    "      template:\n        spec:\n          containers:",
    "      template:\n        spec:\n          initContainers:\n            - {name: fetch, image: busybox:1.36, command: [sh, -c, 'sleep 900']}\n          containers:")


def test_lifecycle_a_node_lost_before_its_pod_was_ready_is_named_once_its_deletion_is_overdue() -> None:
    """Ready was never True, so losing the node clears nothing the runtime can read; taint
    eviction deletes the pod after 300 s, and the deletion that cannot finish is named."""
    assert "initContainers" in SLOW_INIT
    s = Scenario(SLOW_INIT)
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "2"}
    for node in ("fake-node-2", "fake-node-3"):
        s.kubelet.add_node(node, {"cpu": "2"})
    s.run_until(lambda st: "running" in (s.pods().get("sim-worker-1", {}).get("status", {}).get("initContainerStatuses") or [{}])[0].get("state", {}), limit=60)
    node = s.pods()["sim-worker-1"]["spec"]["nodeName"]
    s.kubelet.lose_node(node)
    lost = s.clock.now
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "DeletionStuck", limit=600)
    assert s.clock.now - lost <= NODE_MONITOR_GRACE + 300 + 30 + 60 + 10  # NotReady, toleration, grace, overdue, a cycle
    message = condition(st, "Ready")["message"]
    assert message.startswith("pod sim-worker-1 should have stopped by ") and f"kubectl delete node {node}" in message
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Pending", 0, {"master": 0, "worker": 0})  # no pod got past its init container


def test_lifecycle_a_pod_whose_volume_cannot_be_mounted_is_named_after_the_kubelets_wait() -> None:
    """A volume that cannot be mounted (a ConfigMap the template names that does not exist, a
    PVC still attached to a lost node: Multi-Attach) keeps the pod Pending, its containers
    waiting ContainerCreating, and says why only in Events (volumemanager WaitForAttachAndMount,
    FailedMount).  The record said nothing: the job read Pending with no reason for as long as
    it lasted (review hx21).  It is named once the kubelet's own wait (2m3s) is over."""
    s = Scenario(pytorch(master=LONG, worker=LONG))
    s.kubelet.unmountable.add("sim-worker-1")
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "ContainerCreating", limit=200)
    created = s.pods()["sim-worker-1"]["status"]["startTime"]
    message = condition(st, "Ready")["message"]
    assert message.startswith(f"pod sim-worker-1 has waited on node fake-node-1 since {created} for its containers to be created: a volume it mounts may be missing")
    assert message.endswith("`kubectl describe pod sim-worker-1`")
    entry = next(r for t in st["tasks"] for r in t["replicas"] if r["name"] == "sim-worker-1")
    assert (entry["phase"], entry["reason"]) == ("Pending", "ContainerCreating")
    assert (st["backoffCount"], restarts(st)) == (0, {"master": 0, "worker": 0})
    s.kubelet.unmountable.clear()  # the ConfigMap is applied: the next sync mounts it
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=120)
    assert condition(st, "Ready")["message"] == "All pods are running normally."


def test_lifecycle_a_long_init_container_is_not_a_pod_that_cannot_be_created() -> None:
    """The regular containers of a pod in its init container wait PodInitializing too; the init
    container's own status, running, tells it from a volume that cannot be mounted."""
    s = Scenario(SLOW_INIT)
    s.settle(300)
    st = s.status()
    assert all(c["reason"] != "ContainerCreating" for c in st["conditions"]), st["conditions"]
    assert st["phase"] == "Pending"


def test_lifecycle_a_template_pinned_to_a_node_by_node_name_runs_there() -> None:
    """T9k's ColossalAIJob tutorial pins its workers with `nodeName: sm02`.  kube-apiserver
    refuses to create a pod with a nodeName and scheduling gates (validation.go
    ValidatePodCreate: "spec.nodeName: Forbidden: cannot be set until all schedulingGates have
    been cleared"), though it stores such a PodTemplate (ValidatePodTemplate checks the spec
    alone), so every pod of the job was refused and it never ran (review hx21).  The pin is
    rendered as the node affinity the DaemonSet controller uses for the same reason."""
    s = Scenario(pytorch(master=LONG, worker=LONG).replace(
        "      template:\n        spec:\n          containers:", "      template:\n        spec:\n          nodeName: fake-node-2\n          containers:"))
    s.kubelet.add_node("fake-node-2")
    st = running(s, 3)
    assert {p["spec"]["nodeName"] for p in s.pods().values()} == {"fake-node-2"}
    assert (st["phase"], st["backoffCount"]) == ("Running", 0) and events(s, "PodRefused") == []


def test_lifecycle_an_unschedulable_pod_says_why() -> None:
    s = Scenario(TWO_NODES.replace("cpu: '1'", "cpu: '4'"))
    s.kubelet.nodes["fake-node-1"].allocatable = {"cpu": "2"}
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "Unschedulable", limit=30)
    assert "0/1 nodes are available: 1 Insufficient cpu." in condition(st, "Ready")["message"]
    assert st["tasks"][0]["replicas"][0]["reason"] == "Unschedulable"
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Pending", 0, {"master": 0, "worker": 0})  # no pod of the job has run


# --- the namespace, the CRD ------------------------------------------------------------------------------

def test_lifecycle_a_namespace_being_deleted_counts_no_restart() -> None:
    s = Scenario(pytorch(master=LONG, worker=LONG, policy="OnFailure", limit=1))
    running(s, 3)
    s.cluster.terminate_namespace(NAMESPACE)
    for _ in range(60):
        s.tick()
    st = s.status()
    assert st["backoffCount"] == 0 and restarts(st) == {"master": 0, "worker": 0} and st["phase"] != "Failed"
    assert "because it is being terminated" in condition(st, "Ready")["message"]


def test_lifecycle_a_drain_seen_by_a_relist_whose_continue_token_expired_is_not_missed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23, case 7: a relist whose continue token expired between pages (kube-apiserver's
    410 "The provided continue parameter is too old", etcd compacted meanwhile) never fell back
    to a full list, and the record stayed stale while saying Ready.  Here worker-1 is drained
    while the API server is away; back, the runtime must relist (its watch's history is gone), in
    pages of two, and the history is compacted again between its first and second page.  The
    list starts over (client-go's pager, FullListIfExpired), the drain is seen, the pod replaced."""
    from flatjob.runtime import kube

    monkeypatch.setattr(kube, "PAGE", 2)  # three pods: two pages
    s = Scenario(pytorch(master=LONG, worker=LONG, policy="ExitCode"))
    running(s, 3)
    old = uid(s, "sim-worker-1")
    pages: list[float] = []  # the runtime's pod list requests after the outage
    inner = s.server.on_request

    def expire(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        inner(verb, resource, namespace, name, agent)
        if "(runtime-" in agent and (verb, resource) == ("list", "pods"):
            pages.append(s.clock.now)
            if len(pages) == 2:  # the second page's token is now too old
                s.cluster.compact()

    with s.server.outage():
        s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
        busy(s, 3)  # SIGTERM sent; sh as PID 1 ignores it, so the pod stops at its grace period's end
        s.cluster.compact()  # the watches cannot resume: a relist
        s.server.on_request = expire
    said: set[str] = set()

    def watch(st: dict[str, Any]) -> bool:
        said.add(condition(st, "Ready")["message"])
        return replaced(s, "sim-worker-1", old)(st)

    st = s.run_until(watch, limit=120)
    assert len(pages) >= 4, pages  # page 1, page 2 refused (410), then the list again from the start
    assert "pod sim-worker-1 is being disrupted (EvictionByEvictionAPI: Eviction API: evicting); the job replaces it once it has stopped (not a restart)" in said, said
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Running", 0, {"master": 0, "worker": 0})
    assert [e["message"] for e in events(s, "Disrupted")] == ["sim-worker-1 was disrupted (EvictionByEvictionAPI: Eviction API: evicting); replacing it (not a restart)"]


def test_lifecycle_a_record_field_a_newer_crd_adds_does_not_stall_the_job() -> None:
    """A newer CRD's defaults fill in fields this version does not know on every read."""
    s = Scenario(pytorch(master="sleep 30; exit 0", worker="sleep 20; exit 0"))
    key = (kinds.record("pytorchtrainingjobs").key, NAMESPACE, "sim")
    newer = copy.deepcopy(s.cluster.store.objects[key])
    newer["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 600
    newer["spec"]["futureField"] = {"enabled": True}
    with s.cluster.store.lock:
        s.cluster.store.system_update(key, newer, "kube-apiserver")
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert condition(st, "Stalled")["status"] == "False"
    (note,) = events(s, "UnknownFields")
    assert "spec.futureField" in note["message"] and "spec.runPolicy.ttlSecondsAfterFinished" in note["message"]


@pytest.mark.parametrize("policy", ["ExitCode", "Never"])
@pytest.mark.parametrize("how", ["drain", "preempt"])
def test_lifecycle_a_final_failure_is_not_excused_by_a_drain_that_began_after_it(policy: str, how: str) -> None:
    """The master exits 1 on its own (permanent under ExitCode, final under Never) and settles
    for SETTLE in case a disruption explains it; 20 s after it ended, an unrelated drain (or a
    preemption) of worker-1 begins.  It cannot be the cause (docs/architecture.md §5: "a
    failure before the disruption began stays counted"): the job fails as it would without it.
    Before review round 12 the master was replaced "while sim-worker-1 was disrupted", uncounted."""
    s = Scenario(pytorch(master=LONG, worker=LONG, policy=policy))
    running(s, 3)
    s.tick(10)
    s.kubelet.kill("sim-master-0", 1)
    failed_at = s.clock.now
    s.tick(20)
    assert s.status()["phase"] == "Running"  # settling
    if how == "drain":
        s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
    else:
        s.kubelet.scheduler.preempt("sim-worker-1")
    st = s.run_until(lambda st: st["phase"] == "Failed" or s.clock.now > failed_at + SETTLE + 30, limit=SETTLE + 60)
    assert not any("sim-master-0 failed with exit code 1 while" in e["message"] for e in events(s, "Disrupted"))
    assert (st["phase"], st["runtime"].get("disruptions"), restarts(st)) == ("Failed", 1, {"master": 0, "worker": 0})
    assert condition(st, "Failed")["message"] == "PyTorchTrainingJob sim has failed: sim-master-0 failed with exit code 1"


@pytest.mark.parametrize("how", ["drain", "preempt"])
def test_lifecycle_a_disruption_reusing_a_stale_disruption_target_is_dated_by_its_deletion(how: str) -> None:
    """A drain of worker-1 whose delete was refused (a webhook on pod DELETE) leaves it running
    with DisruptionTarget=True (for 2 min, disruption.go); the master then exits 1 on its own
    (permanent under ExitCode) and settles; 30 s later worker-1 is drained again, or preempted,
    and goes.  That writer keeps the old condition's lastTransitionTime, since its status is
    still True (apipod.UpdatePodCondition), so the condition dates the disruption 60 s back,
    before the master's failure, which it would then excuse.  It began with the deletion
    (deletionTimestamp less its grace): the master's failure came first, and the job fails as
    it would without the stale condition."""
    s = Scenario(pytorch(master=LONG, worker=LONG, policy="ExitCode"))
    running(s, 3)
    s.cluster.evict_pod(NAMESPACE, "sim-worker-1", delete_refused=True)
    refused_at = s.clock.now
    s.tick(30)
    s.kubelet.kill("sim-master-0", 1)
    failed_at = s.clock.now
    s.tick(30)
    assert s.status()["phase"] == "Running"  # settling
    if how == "drain":
        s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
    else:
        s.kubelet.scheduler.preempt("sim-worker-1")
    target = next(c for c in s.pods()["sim-worker-1"]["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert seconds(target["lastTransitionTime"]) == refused_at  # reused: the new reason, the old time
    st = s.run_until(lambda st: st["phase"] == "Failed" or s.clock.now > failed_at + SETTLE + 30, limit=SETTLE + 60)
    assert not any("sim-master-0 failed with exit code 1 while" in e["message"] for e in events(s, "Disrupted"))
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Failed", 0, {"master": 0, "worker": 0})
    assert condition(st, "Failed")["message"] == "PyTorchTrainingJob sim has failed: sim-master-0 failed with exit code 1"


# --- native sidecars: they run beside the regular containers and never decide the phase -------------

SHIPPER = ("            - name: log-shipper\n              image: busybox:1.36\n              restartPolicy: Always\n"
           "              command: [sh, -c, 'sleep inf']\n")


def _with_inits(inits: str) -> str:
    """The 30 s job with these init containers in the first replica type's pods."""
    return pytorch(master="sleep 30; exit 0", worker="sleep 30; exit 0").replace("          containers:", "          initContainers:\n" + inits + "          containers:", 1)


SIDECAR = _with_inits(SHIPPER)


def test_lifecycle_a_pod_with_a_native_sidecar_runs_and_ends_by_its_regular_containers() -> None:
    """A native sidecar (an init container with restartPolicy Always) is started in its place
    among the init containers, and the next container starts once it has *started*, not
    ended (pkg/kubelet/kuberuntime/kuberuntime_manager.go computeInitContainerActions: a
    restartable init container that is running lets the next one start; the pod is
    Initialized when every init container completed or, for sidecars, started).
    Before review round 12 the sim waited for the sidecar to exit, so the pod never ran."""
    s = Scenario(SIDECAR)
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3 or s.clock.now > 1_000_060, limit=90)
    master = s.pods()["sim-master-0"]["status"]
    assert master["phase"] == "Running", (master["phase"], master["containerStatuses"][0]["state"])
    assert st["aggregate"]["running"] == 3
    side = next(c for c in master["initContainerStatuses"] if c["name"] == "log-shipper")
    assert "running" in side["state"] and side["started"] is True
    st = s.run_until(lambda st: st["phase"] in ("Succeeded", "Failed"), limit=120)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Succeeded", 0, {"master": 0, "worker": 0})  # the sidecar, stopped by SIGTERM (143), decides nothing
    assert condition(st, "Completed")["reason"] == "Succeeded"


CRASHING = SHIPPER.replace("'sleep inf'", "'sleep 5; exit 1'")


def _worker_sidecar(inits: str) -> str:
    """The job with the master's 300 s run and these init containers in the workers' pods."""
    text = pytorch(master="sleep 300; exit 0", worker=LONG)
    at = text.index("    - type: worker")
    return text[:at] + text[at:].replace("          containers:", "          initContainers:\n" + inits + "          containers:", 1)


def test_lifecycle_a_workers_crashing_sidecar_is_restarted_by_its_kubelet_not_replaced_by_the_runtime() -> None:
    """A worker's native sidecar exits 1 every 5 s.  Its kubelet restarts it in place, at once
    then after 10 s, 20 s, 40 s, 80 s (kuberuntime_manager.go doBackOff); the worker stays
    Running, not Ready while the sidecar is down, with ContainersReady False too, so no lost
    node.  The runtime counts no restart and replaces no pod, and the job succeeds when the
    master exits 0."""
    s = Scenario(_worker_sidecar(CRASHING))
    running(s, 3)
    uids = {name: uid(s, name) for name in ("sim-worker-0", "sim-worker-1")}
    seen: set[tuple[int, bool]] = set()  # (the sidecar's restartCount, the worker's Ready)

    def watch(st: dict[str, Any]) -> bool:
        if st["phase"] != "Running":
            return True
        assert (st["backoffCount"], restarts(st)) == (0, {"master": 0, "worker": 0})
        assert {name: uid(s, name) for name in uids} == uids
        worker = s.pods()["sim-worker-0"]["status"]
        assert worker["phase"] == "Running"
        side = next(c for c in worker["initContainerStatuses"] if c["name"] == "log-shipper")
        seen.add((side["restartCount"], condition(worker, "Ready")["status"] == "True"))
        return False

    st = s.run_until(watch, limit=400)
    assert (st["phase"], st["backoffCount"], restarts(st)) == ("Succeeded", 0, {"master": 0, "worker": 0})
    assert {count for count, _ in seen} >= {0, 1, 2, 3, 4, 5}  # restarted at 5, 20, 45, 90 and 175 s
    assert (4, False) in seen and (4, True) in seen  # not Ready in its back-off, Ready while it runs
    assert not events(s, "Disrupted") and not st["runtime"].get("disruptions")
    assert condition(st, "Completed")["reason"] == "Succeeded"


INIT_AFTER_SIDECAR = _with_inits(SHIPPER + "            - name: fetch\n              image: busybox:1.36\n              command: [sh, -c, 'sleep 2; exit 3']\n")


def test_lifecycle_a_failed_init_container_after_a_sidecar_is_not_terminal_while_the_sidecar_runs() -> None:
    """kubelet status_manager mergePodStatus (and the sim's own doc): the terminal phase is
    written only once every container has stopped; the sidecar is stopped first (review of round 13)."""
    s = Scenario(INIT_AFTER_SIDECAR)
    seen: list[tuple[str, Any]] = []
    s.run_until(lambda st: "sim-master-0" in s.pods(), limit=30)
    first = uid(s, "sim-master-0")

    def failed(st: dict[str, Any]) -> bool:
        pod = s.pods().get("sim-master-0")
        status = (pod or {}).get("status") or {}
        if status.get("phase") == "Failed":
            side = next(c for c in status["initContainerStatuses"] if c["name"] == "log-shipper")
            seen.append((status["phase"], side["state"]))
            return True
        return s.clock.now > 1_000_100

    s.run_until(failed, limit=120)
    assert seen, "the pod never failed"
    phase, state = seen[0]
    assert "running" not in state, f"pod {phase} while its sidecar is still {state}"
    st = s.run_until(lambda st: st["backoffCount"] >= 1 and "sim-master-0" in s.pods() and uid(s, "sim-master-0") != first, limit=60)
    # the failure is counted (restartPolicy OnFailure): a new master, the exit code named
    assert st["backoffCount"] >= 1 and restarts(st)["master"] >= 1 and uid(s, "sim-master-0") != first
    assert condition(st, "ReplicaFailure")["message"] == "Pod[sim-master-0] exited with error code 3"


# --- what holds a pod or its replacement back: Kueue's finalizer, a webhook that is down -------------

FOREVER = "sleep 100000; exit 0"


def _kueue(text: str, name: str = "sim") -> str:
    """The job under Kueue (flatjob.dev/scheduler: kueue): its pods form a Kueue pod group."""
    return text.replace(f"metadata:\n  name: {name}\n", f"metadata:\n  name: {name}\n  annotations:\n    flatjob.dev/scheduler: kueue\n    flatjob.dev/kueue-queue: team-a\n", 1)


def _with_kueue(text: str) -> Scenario:
    s = Scenario(text)
    assert s.kubelet.kueue is not None  # the harness installs Kueue for a job sent to it
    return s


@pytest.mark.parametrize("how", ["failure", "drain"])
def test_lifecycle_under_kueue_a_pod_held_by_its_finalizer_is_replaced(how: str) -> None:
    """Kueue keeps a Failed pod of a group (its finalizer) until a replacement exists, and the
    replacement has the same name, so it cannot exist first: the runtime, the pods' creating
    controller, takes Kueue's finalizer off the ended pod it deletes (review 23, round 15: the
    job never ran again, and the record said "Restarting" for ever)."""
    s = _with_kueue(_kueue(pytorch(master=FOREVER, worker=FOREVER, policy="OnFailure")))
    if how == "failure":
        s.kubelet.behaviors["sim-worker-1"] = first_then(Program(20, 1), Program())
    else:
        s.kubelet.behaviors["sim-worker-1"] = lambda pod, env: Program(on_term=143)
    running(s, 3)
    assert keys.KUEUE_FINALIZER in s.pods()["sim-master-0"]["metadata"]["finalizers"]  # Kueue's webhook stand-in
    old = uid(s, "sim-worker-1")
    if how == "drain":
        s.cluster.evict_pod(NAMESPACE, "sim-worker-1")
    st = s.run_until(replaced(s, "sim-worker-1", old), limit=120)
    assert (st["backoffCount"], restarts(st)) == ((1, {"master": 0, "worker": 1}) if how == "failure" else (0, {"master": 0, "worker": 0}))
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=60)
    assert condition(st, "Ready")["status"] == "True"


def test_lifecycle_under_kueue_a_deepspeed_group_restart_starts_its_next_attempt() -> None:
    s = _with_kueue(_kueue(DEEPSPEED, "ds"))
    s.kubelet.behaviors["ds-worker-0"] = lambda pod, env: Program(20, 0) if env.get("FLATJOB_ATTEMPT") == "2" else Program()
    s.kubelet.behaviors["ds-worker-1"] = first_then(Program(30, 1), Program())
    s.kubelet.behaviors["ds-worker-2"] = until_deleted
    st = s.run_until(lambda st: st["runtime"]["attempt"] == 2 and st.get("aggregate", {}).get("running") == 3, limit=300)
    assert st["backoffCount"] == 1
    assert s.finished()["phase"] == "Succeeded"


@pytest.mark.parametrize("admitted", [True, False])
def test_lifecycle_under_kueue_a_paused_job_resumes(admitted: bool) -> None:
    """Paused while Kueue still queues it (its ClusterQueue has no room: every pod gated, none
    on a node), the job's pods are deleted, and Kueue keeps a deleted pod that never reached a
    node as it keeps a Failed one, until a replacement exists (pod_controller.go
    isPodRunnableOrSucceeded, FindMatchingWorkloads; its test "workload is not deleted if all
    of the pods in the group are deleted" leaves their finalizers): the runtime takes the
    finalizer off, or the names stay taken and the job never resumes (review hx18)."""
    job = _kueue(pytorch(master=FOREVER, worker=FOREVER))
    pause = "spec:\n  runMode:\n    pause:\n      enabled: {}\n  runPolicy:"
    s = _with_kueue(job)
    if admitted:
        running(s, 3)
    else:
        s.kubelet.kueue.pods_quota = 2  # the group counts 3
        s.run_until(lambda st: len(s.pods()) == 3, limit=60)
        s.tick(10)
        assert not any(p["spec"].get("nodeName") for p in s.pods().values())
    s.update_spec(job.replace("spec:\n  runPolicy:", pause.format("true")))
    s.run_until(lambda st: st.get("phase") == "Paused" and not s.pods(), limit=120)
    s.kubelet.kueue.pods_quota = None
    s.update_spec(job.replace("spec:\n  runPolicy:", pause.format("false")))
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=200)
    assert st["phase"] == "Running" and st["backoffCount"] == 0


def test_lifecycle_a_pod_held_by_someone_elses_finalizer_is_named_with_what_to_do() -> None:
    """A finalizer the runtime does not own (a policy controller's) keeps an ended pod it
    deleted: the job cannot replace it, and the record says so, naming the finalizer."""
    s = Scenario(pytorch(master=FOREVER, worker=FOREVER, policy="OnFailure"))
    s.kubelet.behaviors["sim-worker-1"] = first_then(Program(20, 1), Program())
    running(s, 3)
    s.cluster.patch_pod(NAMESPACE, "sim-worker-1", {"metadata": {"finalizers": ["audit.example.com/keep"]}})
    st = s.run_until(lambda st: condition(st, "Ready")["reason"] == "DeletionStuck", limit=200)
    message = condition(st, "Ready")["message"]
    assert message.startswith("pod sim-worker-1 has ended and was deleted, but its finalizer(s) audit.example.com/keep keep it")
    assert "kubectl patch pod sim-worker-1 --type=json" in message
    s.cluster.patch_pod(NAMESPACE, "sim-worker-1", [{"op": "replace", "path": "/metadata/finalizers", "value": []}])
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=120)
    assert condition(st, "Ready")["status"] == "True"


WEBHOOK_DOWN = ('Internal error occurred: failed calling webhook "validate.pods.policy.example.com": failed to call webhook: '
                'Post "https://policy-webhook.policy-system.svc:443/validate?timeout=10s": context deadline exceeded')


def test_lifecycle_a_webhook_that_is_down_is_named_on_the_record_and_the_pod_made_once_it_is_back() -> None:
    """kube-apiserver answers a pod create whose webhook (failurePolicy Fail) cannot be called
    with 500 "failed calling webhook" (webhook/validating/dispatcher.go; apierrors.NewInternalError):
    the second such answer in a row is a refusal, said in the record and a Warning, backed off
    10 s doubling (review 23, round 15: 20 minutes of "Restarting" and nothing about it)."""
    from flatjob.runtime.api import ApiError

    s = Scenario(pytorch(master=FOREVER, worker=FOREVER, policy="OnFailure"))
    s.kubelet.behaviors["sim-worker-1"] = first_then(Program(20, 1), Program())
    running(s, 3)
    inner, down = s.server.on_request, [True]

    def webhook(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        if inner is not None:
            inner(verb, resource, namespace, name, agent)
        if down[0] and verb == "create" and resource == "pods":
            raise ApiError(WEBHOOK_DOWN, status=500)

    s.server.on_request = webhook
    st = s.run_until(lambda st: "failed calling webhook" in condition(st, "Ready")["message"], limit=300)
    assert condition(st, "Ready")["message"].startswith(f"the API server refused pod sim-worker-1: {WEBHOOK_DOWN}; retrying in ")
    assert any("failed calling webhook" in e["message"] for e in events(s, "PodRefused"))
    down[0] = False
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=400)
    assert condition(st, "Ready")["status"] == "True" and st["backoffCount"] == 1
