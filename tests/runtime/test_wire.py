"""The runtime on the real wire: what broke when it first met the real client and server.

- pods asking for `nvidia.com/gpu: 1` and `cpu: 1.0` restart through the real client (the
  typed models of kubernetes 3x refused integer quantities before any request was sent);
- two runtimes, and a Lease API that fails for the one holding it: at no instant do both act;
- a record or pod edited by hand into a shape the runtime does not expect gives an Event and
  a Stalled condition on the record, never a crash, and a repaired record is acted on again.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flatjob.compiler import keys
from flatjob.runtime.api import NotFound
from flatjob.runtime.lease import LEASE_SECONDS, RENEW_DEADLINE
from flatjob.runtime.sim.server import ConnectionAbort

from .harness import NAMESPACE, REAL, Scenario
from .test_scenarios import FAIL_ONCE, pytorch

pytestmark = pytest.mark.usefixtures("runtime_mode")  # each test in both runtime modes

fake_only = pytest.mark.skipif(REAL, reason="drives the fake API server's hooks")

GPU_JOB = pytorch(master=FAIL_ONCE, policy="ExitCode").replace(
    "              image: busybox:1.36\n",
    "              image: busybox:1.36\n              resources: {limits: {nvidia.com/gpu: 1, cpu: 1.0}, requests: {cpu: 1.0}}\n",
)


def test_gpu_pods_restart_through_the_real_client() -> None:
    s = Scenario(GPU_JOB)
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert st["backoffCount"] == 1
    assert sum(t["restartCount"] for t in st["tasks"]) == 1
    master = s.pods()["sim-master-0"]
    assert master["metadata"]["annotations"][keys.RESTART_COUNT] == "1"
    limits = next(c for c in master["spec"]["containers"] if c["name"] == "pytorch")["resources"]["limits"]
    assert limits == {"cpu": "1", "nvidia.com/gpu": "1"}  # the API server's canonical quantities


# --- leadership ----------------------------------------------------------------------------------


class Acts:
    """Every write each runtime makes to the job (its pods, its record's status, its events)."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        self.log: list[tuple[float, str]] = []
        self.failing: set[str] = set()  # runtimes whose Lease calls fail

    def __call__(self, verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        who = agent.rpartition("(")[2].rstrip(")") if "(" in agent else ""
        if resource.startswith("leases") and who in self.failing:
            raise ConnectionAbort(resource)
        if who and verb in ("create", "update", "patch", "delete") and not resource.startswith("leases"):
            self.log.append((self.s.clock.now, who))


@fake_only
def test_two_runtimes_never_act_at_once_when_the_leaders_lease_calls_fail() -> None:
    # The master fails just after the leader loses the Lease API, and again later: both
    # runtimes have work to do around the hand-over.
    master = 'sleep 63; [ "$FLATJOB_RESTART_COUNT" -ge 2 ] || exit 137; sleep 20; exit 0'
    s = Scenario(pytorch(master=master, worker="sleep 400; exit 0", policy="ExitCode"))
    s.controller.close()
    acts = Acts(s)
    s.server.on_request = acts
    a, b = (s.runtime(who) for who in ("a", "b"))
    a.start()
    b.start()
    failed_at = None
    for tick in range(600):
        for c in (a, b):
            s.step_other(c)  # after the watch barrier: a bare observe(0.002) let a loaded machine's watches lag the clock
        s.kubelet.tick()
        if tick == 60:
            acts.failing.add("a")  # the leader can no longer reach the Lease API
            failed_at = s.clock.now
        s.clock.now += 1
        if s.status().get("phase") in ("Succeeded", "Failed"):
            break
    a.close()
    b.close()
    assert s.status()["phase"] == "Succeeded" and s.status()["backoffCount"] == 2
    by_a = [t for t, who in acts.log if who == "a"]
    by_b = [t for t, who in acts.log if who == "b"]
    assert by_a and by_b, acts.log
    assert max(by_a) < min(by_b), "both runtimes acted in the same interval"
    assert failed_at is not None and max(by_a) < failed_at + RENEW_DEADLINE  # a stopped by its renew deadline
    assert min(by_b) >= failed_at + LEASE_SECONDS - 10  # b waited for the lease to run out (renewed every 5 s)
    assert [t for t in by_a if t > failed_at], "a acted after its Lease calls began to fail (within its deadline)"


@fake_only
def test_a_leader_whose_lease_calls_fail_stops_and_takes_it_back_when_they_work() -> None:
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    s.controller.close()
    acts = Acts(s)
    s.server.on_request = acts
    a = s.runtime("a")
    a.start()
    for _ in range(10):
        s.step_other(a)
        s.clock.now += 1
    assert a.leading()
    acts.failing.add("a")
    s.clock.now += RENEW_DEADLINE + 1
    a.step()
    assert not a.leading()
    acts.failing.clear()
    s.clock.now += 3
    a.step()
    assert a.leading()  # its own record: renewed at once, no wait
    a.close()


# --- bad input -------------------------------------------------------------------------------------


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == kind)


def _events(s: Scenario) -> list[dict[str, Any]]:
    return [o for (r, ns, _), o in s.cluster.objects.items() if r == "events" and ns == NAMESPACE]


@fake_only
@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda rec: rec["status"]["runtime"].update(attempt="one"), "InvalidRecord"),
        (lambda rec: rec["status"]["runtime"].update(restarts=["not", "a", "map"]), "InvalidRecord"),
        (lambda rec: rec["metadata"]["annotations"].update({keys.VERSION: "0.0.1"}), "VersionMismatch"),
    ],
    ids=["ledger-attempt", "ledger-restarts", "version"],
)
def test_a_record_edited_by_hand_gets_an_event_and_a_condition(edit: Any, reason: str) -> None:
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    s.run_until(lambda st: st.get("phase") == "Running")
    plural = s.kind.lower() + "s"
    good = s.cluster.record(NAMESPACE, plural, s.name)
    broken = copy.deepcopy(good)
    edit(broken)
    if reason == "VersionMismatch":
        s.cluster.apply_record(NAMESPACE, plural, broken)
    else:
        s.cluster.replace_record_status(NAMESPACE, plural, broken)
    for _ in range(5):
        s.tick()
    st = s.status()
    stalled = _condition(st, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", reason)
    assert _condition(st, "Ready")["status"] == "False"
    assert [e for e in _events(s) if e["reason"] == reason]
    # Repaired, it is acted on again.
    fixed = s.cluster.record(NAMESPACE, plural, s.name)
    if reason == "VersionMismatch":
        fixed["metadata"]["annotations"][keys.VERSION] = good["metadata"]["annotations"][keys.VERSION]
        s.cluster.apply_record(NAMESPACE, plural, fixed)
    else:
        fixed["status"]["runtime"] = good["status"]["runtime"]
        s.cluster.replace_record_status(NAMESPACE, plural, fixed)
    st = s.run_until(lambda st: _condition(st, "Stalled")["status"] == "False", limit=60)
    assert st["phase"] == "Running"


@fake_only
def test_pods_edited_by_hand_do_not_stop_the_runtime() -> None:
    s = Scenario(pytorch(master="sleep 60; exit 0", worker="sleep 60; exit 0"))
    s.run_until(lambda st: st.get("phase") == "Running")
    for name in list(s.pods()):
        s.cluster.patch_pod(NAMESPACE, name, [{"op": "add", "path": "/metadata/annotations/flatjob.dev~1attempt", "value": "{not a number"}, {"op": "add", "path": "/metadata/labels/extra", "value": "x"}])
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert s.controller.metrics.counters.get(("flatjob_loop_errors_total", (("op", "cycle"), ("status", "TypeError"))), 0) == 0


@fake_only
def test_a_lease_a_tenant_renews_for_ever_is_said_in_the_log_events_and_metrics(caplog: pytest.LogCaptureFixture) -> None:
    """Someone who may update Leases renews the runtime's under another holder every 3 s: the
    runtime serves no job (it must not), and says so where a user looks, at most once per
    HELD_SAID_EVERY once it has waited HELD_SAID_AFTER: a warning in its log, a Warning Event
    `LeaseHeld` on the Lease and on its own Pod (the one `kubectl describe` shows: its uid), and
    flatjob_lease_waiting_seconds. It writes nothing else while it waits (no record, no pod);
    the holder's name reaches no log or Event raw. Once the tenant stops, it takes the Lease."""
    import logging

    from flatjob.runtime.lease import HELD_SAID_AFTER, HELD_SAID_EVERY, LEASE_MAX, micro_time

    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    s.controller.close()
    writes: list[str] = []
    s.server.on_request = lambda verb, resource, ns, name, agent="": writes.append(f"{verb} {resource}") if "(a)" in agent and verb in ("create", "update", "patch", "delete") else None
    own = s.cluster.create_pod(NAMESPACE, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": NAMESPACE}, "spec": {"containers": [{"name": "runtime", "image": "flatjob"}]}})
    a = s.runtime("a")
    lease = a.scope.lease
    holder = "tenant\x1b[2J\n::error::x"
    began = s.clock.now

    def renew() -> None:  # a write of the whole Lease, whatever its resourceVersion
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": lease, "namespace": NAMESPACE},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30, "acquireTime": micro_time(began), "renewTime": micro_time(s.clock.now)}}
        try:
            s.cluster.replace_lease(NAMESPACE, body)
        except NotFound:
            s.cluster.create_lease(NAMESPACE, body)

    renew()
    caplog.set_level(logging.WARNING)
    a.start()
    waited = 700
    for tick in range(waited):
        if tick % 3 == 0:
            renew()
        s.step_other(a)
        s.clock.now += 1
    assert not a.leading() and [n for n in s.cluster.pods(NAMESPACE) if n != "a"] == []  # no job served
    assert writes and {w.split()[1] for w in writes} == {"events"}, writes  # while it waits: Events alone
    said = [r for r in caplog.records if r.getMessage() == "waiting for the Lease others hold"]
    most = 1 + (waited - HELD_SAID_AFTER) // HELD_SAID_EVERY
    assert 2 <= len(said) <= most
    held = {o["involvedObject"]["kind"]: o for (r, ns, _), o in s.cluster.objects.items() if r == "events" and o.get("reason") == "LeaseHeld"}
    assert set(held) == {"Lease", "Pod"}
    assert held["Lease"]["involvedObject"]["name"] == lease and held["Pod"]["involvedObject"]["uid"] == own["metadata"]["uid"]
    for event in held.values():
        assert event["type"] == "Warning" and event["count"] == len(said)
        assert "\x1b" not in event["message"] and "\n" not in event["message"] and '"tenant\\u001b[2J\\n::error::x"' in event["message"]
    assert "flatjob_lease_waiting_seconds" in a.metrics.render() and a.metrics.counters[("flatjob_lease_waiting_seconds", ())] >= waited - LEASE_MAX
    for _ in range(LEASE_MAX + 10):  # the tenant stops: the Lease lapses and the runtime serves the job
        s.step_other(a)
        s.kubelet.tick()
        s.clock.now += 1
    assert a.leading() and a.metrics.counters[("flatjob_lease_waiting_seconds", ())] == 0
    assert [n for n in s.cluster.pods(NAMESPACE) if n != "a"]
    a.close()
