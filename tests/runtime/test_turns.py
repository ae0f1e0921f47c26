"""The namespace runtime's cycles on threads (runtime/turns.py), `pytest -k turns`:
- a job whose status write hangs holds one thread: another job's status is written meanwhile,
  within the same step, through the real client over HTTP;
- one job is never in two threads at once, however often the loop turns;
- a write's answer never overwrites what the watch brought while the request was out;
- a shutdown hands the Lease over only once no cycle is in flight;
- the lock is let go of only around requests, and only by the thread that holds it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from flatjob.runtime import controller as controller_module
from flatjob.runtime.informer import Informer
from flatjob.runtime.turns import TurnLock, Unlocked

from .harness import REAL
from .test_namespace import JOB, namespace_scenario, statuses

pytestmark = pytest.mark.skipif(REAL, reason="makes the fake API server's answers hang")

HANG = 3.0  # seconds a hung status write takes


def _running(s: Any, names: tuple[str, ...]) -> None:
    for _ in range(60):
        s.tick()
        if all(statuses(s).get(n, {}).get("aggregate", {}).get("running") == 2 for n in names):
            return
    raise AssertionError(statuses(s))


def test_turns_a_hung_status_write_holds_one_thread_not_the_other_jobs() -> None:
    """Before: cycles ran one at a time, so one job's status write held by a webhook (or API
    priority and fairness) for its whole time-out kept every other job's status waiting."""
    s = namespace_scenario(JOB.format(name="hung", script="sleep 3000; exit 0") + "---" + JOB.format(name="good", script="sleep 3000; exit 0"))
    _running(s, ("hung", "good"))
    written: dict[str, float] = {}
    gate = threading.Event()

    def webhook(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "genericjobs.flatjob.dev/status":
            if name == "hung":
                gate.set()
                time.sleep(HANG)
            written.setdefault(name, time.monotonic())

    s.server.on_request = webhook
    c = s.controller
    c.turn_wait = 0.0  # as in its pod: the loop does not wait for the cycles it started
    s.kubelet.kill("hung-worker-0", 3)
    s.kubelet.kill("good-worker-1", 0)
    s.sync()
    t0 = time.monotonic()
    c.step()
    assert gate.wait(2.0), "the hung job's status write never went out"
    while "good" not in written and time.monotonic() - t0 < HANG:
        time.sleep(0.01)
    assert "good" in written and written["good"] - t0 < 1.0, f"the good job's status waited {written.get('good', float('inf')) - t0:.2f} s"
    assert "hung" not in written  # still out
    assert c.pool is not None and c.pool.wait(HANG + 5)
    assert statuses(s)["good"]["aggregate"]["succeeded"] == 1
    assert "hung" in written


def test_turns_one_job_is_never_in_two_threads_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job is due on every turn (their status writes are slow), and the loop turns far
    faster than a cycle ends: no job's cycle ever starts while its last one is in flight."""
    s = namespace_scenario("---".join(JOB.format(name=f"j{i}", script="sleep 3000; exit 0") for i in range(6)))
    _running(s, tuple(f"j{i}" for i in range(6)))
    c = s.controller
    c.turn_wait = 0.0
    inside: Counter[Any] = Counter()
    most: Counter[Any] = Counter()
    together: list[int] = []  # cycles in flight, each time one starts
    real = controller_module.JobWorker.reconcile

    def counted(self: Any) -> Any:
        inside[self.key] += 1
        most[self.key] = max(most[self.key], inside[self.key])
        together.append(sum(inside.values()))
        try:
            return real(self)
        finally:
            inside[self.key] -= 1

    monkeypatch.setattr(controller_module.JobWorker, "reconcile", counted)

    def slow(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and verb in ("update", "patch", "create"):
            time.sleep(0.05)

    s.server.on_request = slow
    for i in range(40):
        for w in c.workers.values():
            w.dirty = True
        pod = f"j{i % 6}-worker-{i % 2}"
        if i % 5 == 0 and (s.cluster.pods("default").get(pod) or {}).get("status", {}).get("phase") == "Running":
            s.kubelet.kill(pod, 3)
        s.kubelet.tick()
        c.step()
        time.sleep(0.01)
    assert c.pool is not None and c.pool.wait(10)
    assert most and max(most.values()) == 1, dict(most)
    assert sum(most.values()) == 6
    assert max(together) > 1  # the jobs' cycles did run at once


def test_turns_a_write_answer_never_overwrites_what_the_watch_brought_meanwhile() -> None:
    """The answer to a status write is cached only if the object is still the one the request
    went out from; a newer version the watch applied while it was out (another thread's turn)
    stays."""
    informer = Informer(lambda: ([], "1"), lambda rv: None)  # type: ignore[arg-type,return-value]
    old = {"metadata": {"name": "a", "resourceVersion": "1"}}
    informer.store(old)
    newer = {"metadata": {"name": "a", "resourceVersion": "3"}}
    informer.store(newer)  # the watch, while our request was out
    informer.answer(old, {"metadata": {"name": "a", "resourceVersion": "2"}})
    assert informer.get("a") is newer
    informer.answer(newer, {"metadata": {"name": "a", "resourceVersion": "4"}})
    assert informer.get("a")["metadata"]["resourceVersion"] == "4"
    informer.answer(None, {"metadata": {"name": "b", "resourceVersion": "5"}})  # a create: nothing cached yet
    assert informer.get("b") is not None


def test_turns_a_shutdown_keeps_the_lease_while_a_cycle_is_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """client-go's ReleaseOnCancel asks that everything the Lease guards has stopped before it
    is handed over: a cycle still waiting on its request would act beside the next holder."""
    monkeypatch.setattr(controller_module, "STOP_WAIT", 0.3)
    s = namespace_scenario(JOB.format(name="hung", script="sleep 3000; exit 0"))
    s.server.on_request = None
    s.controller.close()
    c = s.controller = s.runtime("runtime-a", use_lease=True)
    c.start()
    _running(s, ("hung",))
    c.turn_wait = 0.0

    def webhook(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "genericjobs.flatjob.dev/status":
            time.sleep(1.5)

    s.server.on_request = webhook
    s.kubelet.kill("hung-worker-0", 3)
    s.sync()
    c.step()
    time.sleep(0.1)
    c.release_lease()
    lease = s.cluster.objects[("leases", "default", "flatjob")]
    assert lease["spec"]["holderIdentity"] == "runtime-a"  # left to lapse
    assert c.pool is not None and c.pool.wait(5)
    c.release_lease()
    lease = s.cluster.objects[("leases", "default", "flatjob")]
    assert lease["spec"].get("holderIdentity") in (None, "")  # handed over once nothing is in flight


def test_turns_the_lock_is_let_go_only_around_requests_by_its_holder() -> None:
    lock = TurnLock()
    seen: list[bool] = []

    class Cluster:
        def get(self, *args: Any) -> str:
            taken = lock._lock.acquire(blocking=False)  # free while a request waits
            if taken:
                lock._lock.release()
            seen.append(taken)
            return "answer"

        list = watch = create = replace = patch = delete = get
        notify = "the cluster's own attribute"

    cluster = Unlocked(Cluster(), lock)
    assert cluster.notify == "the cluster's own attribute"
    with lock, lock:  # reentrant
        assert cluster.get("x") == "answer"
        assert lock.held()
        other = threading.Thread(target=cluster.get, args=("x",))  # a thread that does not hold it: nothing to let go of
        other.start()
        other.join()
    assert seen == [True, False] and not lock.held()
