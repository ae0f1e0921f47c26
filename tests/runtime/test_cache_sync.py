"""No cycle runs on a cache known to lack a job's objects (client-go's WaitForCacheSync).

Review 24, round 7: a runtime restarted (a rollout, an OOM kill, a drain) whose first pods
LIST failed once ran every job's cycle on an empty pod cache; every running pod read as
vanished and was replaced.  The same held for a job moved into namespace mode whose pods
could not be read again, and a failed PodTemplates list flipped every job to Ready=False.
The jobs now stay queued until their objects are read (runtime/informer.py `ready_for`).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from flatjob.compiler.options import CompileOptions
from flatjob.runtime.api import ApiError

from .harness import MODE, NAMESPACE, Scenario
from .test_namespace import JOB, namespace_scenario, statuses

RUNNING = "sleep 3000; exit 0"


def fail_first(s: Scenario, resource: str, agent_tail: str, times: int = 1) -> list[str]:
    """The fake API server answers the first `times` lists of `resource` by one runtime process
    with a 500 (etcd timing out; a 429 from priority and fairness is handled alike)."""
    orig = s.server.on_request
    failed: list[str] = []

    def hook(verb: str, res: str, ns: str | None, name: str | None, agent: str = "") -> None:
        orig(verb, res, ns, name, agent)
        if verb == "list" and res == resource and agent.endswith(agent_tail) and len(failed) < times:
            failed.append(res)
            raise ApiError("etcdserver: request timed out", status=500)

    s.server.on_request = hook
    return failed


def running(s: Scenario, names: list[str]) -> None:
    for _ in range(120):
        s.tick()
        if all((st.get("aggregate") or {}).get("running") == 2 for n, st in statuses(s).items() if n in names):
            return
    raise AssertionError("the jobs never ran")


def uids(s: Scenario) -> dict[str, str]:
    return {n: p["metadata"]["uid"] for n, p in s.pods().items()}


@pytest.mark.parametrize("mode", ["namespace", "job"])
def test_a_runtime_restarted_while_its_pods_list_fails_replaces_no_pod(mode: str) -> None:
    names = ["a", "b"] if mode == "namespace" else ["a"]
    token = MODE.set(mode)
    try:
        s = Scenario("---".join(JOB.format(name=n, script=RUNNING) for n in names))
    finally:
        MODE.reset(token)
    running(s, names)
    before, ledgers = uids(s), {n: st["runtime"].get("disruptions") for n, st in statuses(s).items()}
    failed = fail_first(s, "pods", f"(runtime-{s.generation + 1})")
    s.controller = s.new_controller()  # the runtime restarts; its first pods list fails
    for _ in range(40):
        s.tick()
    assert failed == ["pods"]
    assert uids(s) == before, "a running pod was replaced"
    assert {n: st["runtime"].get("disruptions") for n, st in statuses(s).items()} == ledgers


def test_namespace_a_job_moved_in_while_its_pods_cannot_be_read_counts_nothing() -> None:
    """The move's read of the job's pods and the relist after it both fail: the job waits."""
    text = JOB.format(name="mover", script=RUNNING)
    s = namespace_scenario(text)
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 2, limit=60)
    before = uids(s)
    failed: list[str] = []
    for mode in ("job", "namespace"):
        if mode == "namespace":
            failed = fail_first(s, "pods", f"(runtime-{s.generation})", times=2)
        s.options = CompileOptions(namespace=NAMESPACE, runtime=mode)  # type: ignore[arg-type]
        s.update_spec(text)  # the commit
        for _ in range(3):
            s.tick()
    for _ in range(30):
        s.tick()
    assert failed == ["pods", "pods"]
    ledger = s.status()["runtime"]
    assert uids(s) == before and not ledger.get("disruptions")
    assert ledger["released"], ledger  # what it released is remembered: an empty list beside running pods is what replaces them


def test_namespace_a_restart_whose_podtemplates_list_fails_writes_no_job_not_ready() -> None:
    s = namespace_scenario("---".join(JOB.format(name=n, script=RUNNING) for n in ("a", "b")))
    running(s, ["a", "b"])
    flips: list[str] = []

    def note(change: Any) -> None:
        if change.key.startswith("records/") and change.type == "MODIFIED":
            ready = [c for c in (change.obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
            if ready and ready[0].get("status") == "False":
                flips.append(change.obj["metadata"]["name"])

    s.cluster.store.listeners.append(note)
    failed = fail_first(s, "podtemplates", f"(runtime-{s.generation + 1})")
    s.controller = s.new_controller()
    for _ in range(20):
        s.tick()
    assert failed == ["podtemplates"]
    assert not flips, f"written Ready=False though nothing changed: {flips}"


def test_namespace_a_job_waiting_for_a_relist_has_the_loop_woken_for_it() -> None:
    """A job moved into namespace mode; the take-back read of its pods fails once, so the job is
    `unread` and the pods informer is to relist "soon" (`_relist_soon`: retry_at None).  The
    job's cycle waits for that relist, so the loop must wake for it (Informer.due_at; review of
    round 8: wake_at said nothing was due, and run_loop slept IDLE_WAKE, 30 s, with the pods
    watch closed)."""
    text = JOB.format(name="mover", script=RUNNING)
    s = namespace_scenario(text)
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 2, limit=60)
    for mode in ("job", "namespace"):
        if mode == "namespace":
            failed = fail_first(s, "pods", f"(runtime-{s.generation})")
        s.options = CompileOptions(namespace=NAMESPACE, runtime=mode)  # type: ignore[arg-type]
        s.update_spec(text)
        c = s.controller
        if mode == "job":
            for _ in range(3):
                s.tick()
            continue
        end = time.monotonic() + 60  # a safety time-out: the record's watch event comes in milliseconds (200 steps were 4 s)
        while time.monotonic() < end:  # the loop's own steps (no test barrier, whose extra polls relist at once)
            c.step(0.02)
            if c.pods.unread:
                break
    assert failed == ["pods"] and c.pods.unread == {("GenericJob", "mover")} and ("GenericJob", "mover") in c.queue
    assert c.wake_at is not None and c.wake_at <= s.clock.now + 2, f"wake_at={c.wake_at} now={s.clock.now}: nothing schedules the relist the job waits for"
