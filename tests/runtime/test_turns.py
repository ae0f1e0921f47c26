"""The namespace runtime's cycles on threads (runtime/turns.py), `pytest -k turns`:
- a job whose status write hangs holds one thread: another job's status is written meanwhile,
  within the same step, through the real client over HTTP;
- one job is never in two threads at once, however often the loop turns;
- a write's answer never overwrites what the watch brought while the request was out;
- a shutdown hands the Lease over only once no cycle is in flight;
- the lock is let go of only around requests, and only by the thread that holds it.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from flatjob.runtime import controller as controller_module
from flatjob.runtime.cli import run_loop
from flatjob.runtime.informer import Informer
from flatjob.runtime.lease import RENEW_EVERY, micro_time
from flatjob.runtime.server import Health
from flatjob.runtime.turns import CyclePool, TurnLock, Unlocked

from .harness import NAMESPACE, REAL
from .test_namespace import JOB, namespace_scenario, statuses
from .test_scenarios_t9k import TENSORBOARD

# Real threads and real waits: what a slow or hung request does to a cycle is measured on real time.
pytestmark = [pytest.mark.skipif(REAL, reason="makes the fake API server's answers hang"), pytest.mark.wall_budgets]

HANG = 3.0  # seconds a hung status write takes
# Tests that check a healthy job's status is written *while* other jobs' writes hang hold those
# writes until it is (at most HOLD s) and check the order, never how many seconds it took: on a
# busy machine any latency bound is luck.  A runtime that made the healthy job wait for a hung
# write waits HOLD (the test fails after WAIT_GOOD); the client's read time-out is raised past
# HOLD (_patient) so that no held write ends early on the runtime's side.
HOLD = 60.0
WAIT_GOOD = 30.0


def _patient(c: Any) -> None:
    """The runtime's requests wait for their answer past HOLD (the harness's read time-out is 30 s)."""
    kube = c.cluster.inner if hasattr(c.cluster, "inner") else c.cluster
    kube.timeouts = kube.http.timeouts = replace(kube.timeouts, read=2 * HOLD)


def _running(s: Any, names: tuple[str, ...]) -> None:
    for _ in range(60):
        s.tick()
        if all(statuses(s).get(n, {}).get("aggregate", {}).get("running") == 2 for n in names):
            return
    raise AssertionError(statuses(s))


def _leased(name: str) -> tuple[Any, Any]:
    """A job served by a namespace runtime `runtime-a` that holds the Lease, on its threads, the
    job running, the loop not waiting for the cycles it starts (as in its pod)."""
    s = namespace_scenario(JOB.format(name=name, script="sleep 3000; exit 0"), threads=True)
    s.server.on_request = None  # the harness aborts requests of any other runtime generation
    s.controller.close()
    c = s.controller = s.runtime("runtime-a", use_lease=True)
    c.start()
    _running(s, (name,))
    c.turn_wait = 0.0
    return s, c


def _hang_status_writes(s: Any, seconds: float, release: threading.Event | None = None) -> threading.Event:
    """Every status write of runtime-a waits `seconds` (a webhook on the records), or until
    `release` is set; the Event returned is set once the first has gone out."""
    gate = threading.Event()
    release = release or threading.Event()

    def webhook(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-a)" in agent and resource == "genericjobs.flatjob.dev/status":
            gate.set()
            release.wait(seconds)

    s.server.on_request = webhook
    return gate


@contextlib.contextmanager
def _counted_loop(c: Any, notify: threading.Event) -> Iterator[list[float]]:
    """run_loop on a thread of its own, as in the runtime's pod; yields the times of its turns."""
    steps: list[float] = []
    real_step = c.step

    def counted(timeout: float = 0.0) -> bool:
        steps.append(time.monotonic())
        return real_step(timeout)

    c.step = counted
    stop = threading.Event()
    loop = threading.Thread(target=run_loop, args=(c, stop, notify, Health()), daemon=True)
    loop.start()
    try:
        yield steps
    finally:
        stop.set()
        notify.set()
        loop.join(10)


def test_turns_a_hung_status_write_holds_one_thread_not_the_other_jobs() -> None:
    """Before: cycles ran one at a time, so one job's status write held by a webhook (or API
    priority and fairness) for its whole time-out kept every other job's status waiting."""
    s = namespace_scenario(JOB.format(name="hung", script="sleep 3000; exit 0") + "---" + JOB.format(name="good", script="sleep 3000; exit 0"), threads=True)
    _running(s, ("hung", "good"))
    written: list[str] = []
    gate, release = threading.Event(), threading.Event()

    def webhook(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "genericjobs.flatjob.dev/status":
            if name == "hung":
                gate.set()
                release.wait(HOLD)  # held until the good job's status is written
            written.append(name)

    s.server.on_request = webhook
    c = s.controller
    _patient(c)
    c.turn_wait = 0.0  # as in its pod: the loop does not wait for the cycles it started
    s.kubelet.kill("hung-worker-0", 3)
    s.kubelet.kill("good-worker-1", 0)
    s.sync()
    c.step()  # one turn of the loop: both jobs' cycles start in it
    assert gate.wait(WAIT_GOOD), "the hung job's status write never went out"
    end = time.monotonic() + WAIT_GOOD
    while "good" not in written and time.monotonic() < end:
        time.sleep(0.01)
    assert written == ["good"], f"the good job's status waited for the hung job's write: {written}"
    release.set()
    assert c.pool is not None and c.pool.wait(HOLD)
    assert statuses(s)["good"]["aggregate"]["succeeded"] == 1
    assert "hung" in written


def test_turns_one_job_is_never_in_two_threads_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job is due on every turn (their status writes are slow), and the loop turns far
    faster than a cycle ends: no job's cycle ever starts while its last one is in flight."""
    s = namespace_scenario("---".join(JOB.format(name=f"j{i}", script="sleep 3000; exit 0") for i in range(6)), threads=True)
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
    assert c.pool is not None and c.pool.wait(HOLD)
    assert most and max(most.values()) == 1, dict(most)
    assert sum(most.values()) == 6
    assert max(together) > 1  # the jobs' cycles did run at once


def test_turns_a_write_answer_never_overwrites_what_the_watch_brought_meanwhile() -> None:
    """The answer to the runtime's own write is cached only if the watch did not change or
    remove that object while the request was out (another thread's turn), nor a relist run."""
    informer = Informer(lambda: ([], "9"), lambda rv: None)  # type: ignore[arg-type,return-value]
    same = lambda o: o  # noqa: E731
    newer = {"metadata": {"name": "a", "resourceVersion": "3"}}
    informer.written("a", lambda _keep: (informer.store(newer), {"metadata": {"name": "a", "resourceVersion": "2"}})[1], same)
    assert informer.get("a") is newer  # the watch's newer version stays
    gone = {"metadata": {"name": "b", "resourceVersion": "4"}}
    informer.written("b", lambda _keep: (informer.store(gone), informer._forget("b"), {"metadata": {"name": "b", "resourceVersion": "4"}})[2], same)
    assert informer.get("b") is None  # created, then deleted, while the create's answer waited: not brought back
    informer.written("c", lambda _keep: {"metadata": {"name": "c", "resourceVersion": "5"}}, same)
    assert informer.get("c")["metadata"]["resourceVersion"] == "5"  # nothing meanwhile: the answer is cached
    with pytest.raises(RuntimeError):
        informer.written("d", lambda _keep: (_ for _ in ()).throw(RuntimeError("refused")), same)
    assert informer._moved == {}  # a failed write leaves nothing behind


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


# --- found by review (notes/review-threads.md), fixed since: answer resurrects ---
# Informer.answer(before=None, created) stores the create's answer when the cache holds no
# object of that name -- which is also the case when the watch brought ADDED *and* DELETED while
# the cycle thread waited for its answer or for the TurnLock.  The deleted pod is put back in the
# cache, and no later watch event removes it: the job waits on a pod that does not exist.

def test_turns_a_pod_deleted_while_its_create_answer_waits_is_not_brought_back() -> None:
    s = namespace_scenario(JOB.format(name="j", script="sleep 3000; exit 0"), threads=True)
    c = s.controller
    c.turn_wait = 0.0  # as in its pod: the loop turns while cycles wait on their requests
    creating, held = threading.Event(), threading.Event()

    def admission(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "pods" and verb == "create" and not creating.is_set():
            creating.set()
            held.wait(HOLD)  # a webhook: the pod is stored after this, once the test holds the turn
            # (a fixed 0.3 s let a loaded machine answer the create, and the cycle create the
            # second pod, before the test took the lock)

    s.server.on_request = admission
    _patient(c)
    s.sync()
    c.step()  # the job's first cycle, on a cycle thread: status, then its pods
    assert creating.wait(WAIT_GOOD)
    with c.lock:  # the loop's turn (or another job's cycle) while the create's answer is on its way
        held.set()
        end = time.monotonic() + WAIT_GOOD
        while not s.cluster.pods(NAMESPACE) and time.monotonic() < end:
            time.sleep(0.01)
        (name,) = s.cluster.pods(NAMESPACE)  # stored by the API server
        s.cluster.delete_pod(NAMESPACE, name, None, 0)  # kubectl delete --now, an eviction, GC of a replaced record
        s.sync()  # the loop's observe: ADDED, then DELETED
        assert c.pods.get(name) is None
    assert c.pool is not None and c.pool.wait(HOLD)
    assert name not in s.cluster.pods(NAMESPACE)
    for _ in range(20):  # twenty turns of the loop, 20 s of the job's time
        s.tick()
    on_server = s.cluster.pods(NAMESPACE)
    assert c.pods.get(name) is None, f"{name} deleted on the server ({sorted(on_server)} there) but still in the runtime's cache: {c.pods.get(name)['status']}"


# --- found by review (notes/review-threads.md), fixed since: thread death ---
# Nothing guards CyclePool._serve: an exception that escapes a cycle (JobWorker.reconcile's own
# except clause calls _fail and _report, which make requests and build a status; its finally
# clause updates metrics) ends that cycle thread for good.  The pool still counts it as free
# (free() = size - len(busy)), so work is submitted to threads that no longer exist; after four
# such escapes no job of the namespace is reconciled again, while the loop, /healthz and /readyz
# stay green.  Before, the same exception reached run_loop's `except Exception`, was counted in
# flatjob_loop_errors_total, and the loop went on.

def test_turns_an_exception_escaping_a_cycle_leaves_its_thread_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    s = namespace_scenario(JOB.format(name="bad", script="sleep 3000; exit 0") + "---" + JOB.format(name="good", script="sleep 3000; exit 0"), threads=True)
    for _ in range(60):
        s.tick()
        if all(statuses(s).get(n, {}).get("aggregate", {}).get("running") == 2 for n in ("bad", "good")):
            break
    c = s.controller
    c.turn_wait = 5.0  # the harness's 60 s would make each stuck step wait a minute
    real = controller_module.JobWorker.reconcile
    escapes = [0]

    def buggy(self: Any) -> Any:
        cycle = real(self)
        if self.name == "bad" and escapes[0] < 4:
            escapes[0] += 1
            raise RuntimeError("a bug in _report / a metrics call / a log handler")
        return cycle

    monkeypatch.setattr(controller_module.JobWorker, "reconcile", buggy)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the default prints the traceback, nothing more
    for _ in range(4):
        c.workers[("GenericJob", "bad")].dirty = True
        s.tick()
    alive = [t.name for t in threading.enumerate() if t.name.startswith("flatjob-cycle-")]
    s.kubelet.kill("good-worker-1", 0)
    for _ in range(3):
        s.tick()
    assert c.pool is not None
    assert statuses(s)["good"]["aggregate"]["succeeded"] == 1, (
        f"{4 - len(alive)} of 4 cycle threads dead, pool.free()={c.pool.free()}, busy={c.pool.busy}; good's status: {statuses(s)['good']['aggregate']}")


# --- found by review (notes/review-threads.md), fixed since: slow starved ---
# The slow-job rule ("never the last free thread") starves a slow job under turn_wait (the
# scenario harness): _whole_turn stops as soon as _dispatch starts nothing -- which it does when the
# queue's head is a slow job and exactly one thread is free -- so while three other jobs are due
# every step, the slow job's cycle never runs.  The single-thread drain ran one slow job a turn.

SLOW_NAMES = ("a-slow", "b0", "b1", "b2")


@pytest.mark.slow  # a webhook of real 0.7 s waits (3 s): run by .ci/run after the README command
def test_turns_a_slow_job_runs_while_three_others_are_due_each_step() -> None:
    text = JOB.format(name="a-slow", script="sleep 3000; exit 0").replace("limit: 2", "limit: 100000")
    s = namespace_scenario("---".join([text] + [JOB.format(name=n, script="sleep 3000; exit 0") for n in SLOW_NAMES[1:]]), threads=True)

    def webhook(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "genericjobs.flatjob.dev/status" and name == "a-slow":
            time.sleep(0.7)  # a webhook on its record

    s.server.on_request = webhook
    for _ in range(60):
        s.tick()
        if all(statuses(s).get(n, {}).get("aggregate", {}).get("running") == 2 for n in SLOW_NAMES):
            break
    c = s.controller
    assert c.workers[("GenericJob", "a-slow")].slow
    s.kubelet.kill("a-slow-worker-1", 0)  # news for the slow job's status
    ran = 0
    for _ in range(10):
        for n in SLOW_NAMES[1:]:
            c.workers[("GenericJob", n)].dirty = True  # three other jobs have news every turn (a busy namespace)
        before = c.workers[("GenericJob", "a-slow")].cycles
        s.tick()
        ran += c.workers[("GenericJob", "a-slow")].cycles - before
    assert statuses(s)["a-slow"]["aggregate"].get("succeeded") == 1, f"a-slow ran {ran} cycles in 10 turns; its status still says {statuses(s)['a-slow']['aggregate']}"


@pytest.mark.slow  # requests hung for real seconds (chaos): run by .ci/run
def test_turns_in_its_pod_too_a_slow_job_runs_while_three_others_keep_coming_back(monkeypatch: Any) -> None:
    """The same under cli.run_loop (turn_wait 0): three jobs whose cycles each wait 0.2 s on the
    API server (not slow: under SLOW_CYCLE) and have news after every cycle keep three threads
    busy, ending one at a time; each time the loop finds one free thread, a fast job takes it."""
    from flatjob.runtime.api import LEASES

    text = JOB.format(name="a-slow", script="sleep 3000; exit 0")
    s = namespace_scenario("---".join([text] + [JOB.format(name=n, script="sleep 3000; exit 0") for n in SLOW_NAMES[1:]]), threads=True)
    for _ in range(60):
        s.tick()
        if all(statuses(s).get(n, {}).get("aggregate", {}).get("running") == 2 for n in SLOW_NAMES):
            break
    c = s.controller
    c.turn_wait = 0.0
    c.notify = c.cluster.notify
    real = controller_module.JobWorker.reconcile

    def busy_namespace(self: Any) -> Any:
        cycle = real(self)
        if self.name != "a-slow":
            with contextlib.suppress(Exception):
                self.ctl.cluster.get(LEASES, self.namespace, "busy")  # 0.2 s on the API server (on_request below)
            self.dirty = True  # news again (a big job's pods changing all the time)
        return cycle

    def webhook(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and name == "busy":
            time.sleep(0.2)

    monkeypatch.setattr(controller_module.JobWorker, "reconcile", busy_namespace)
    s.server.on_request = webhook
    c.workers[("GenericJob", "a-slow")].slow = True  # its last cycle waited on a webhook
    c.workers[("GenericJob", "a-slow")].dirty = True  # and it has news now
    for n in SLOW_NAMES[1:]:
        c.workers[("GenericJob", n)].dirty = True
    before = c.workers[("GenericJob", "a-slow")].cycles
    fast_before = sum(c.workers[("GenericJob", n)].cycles for n in SLOW_NAMES[1:])
    stop = threading.Event()
    loop = threading.Thread(target=run_loop, args=(c, stop, c.notify, Health()), daemon=True)
    loop.start()
    t0 = time.monotonic()  # until the slow job has run, at most WAIT_GOOD: never, where the fast jobs take every free thread
    while c.workers[("GenericJob", "a-slow")].cycles == before and time.monotonic() - t0 < WAIT_GOOD:
        time.sleep(0.05)
    took = time.monotonic() - t0
    ran = c.workers[("GenericJob", "a-slow")].cycles - before
    fast = sum(c.workers[("GenericJob", n)].cycles for n in SLOW_NAMES[1:]) - fast_before
    stop.set()
    c.notify.set()
    loop.join(10)
    monkeypatch.setattr(controller_module.JobWorker, "reconcile", real)
    assert c.pool is not None and c.pool.wait(HOLD)
    assert ran >= 1, f"in {took:.1f} s the three busy jobs ran {fast} cycles in all, the slow job {ran} (a fourth thread idle all along)"


# --- found by review (notes/review-threads.md), fixed since: spin ---
# The loop (cli.run_loop) spins at MIN_WAIT while every cycle thread waits on a hung request
# and another job is queued: _set_wake says "now" for any queued job not in flight, although no
# thread is free to run it (the slow-job rule's held-back job does the same).

SPIN_NAMES = ("a0", "a1", "a2", "a3", "z")  # four hung jobs fill the four threads; z waits for one




@pytest.mark.slow  # requests hung for real seconds (chaos): run by .ci/run
def test_turns_loop_never_spins_while_all_threads_hang_and_a_job_waits() -> None:
    s = namespace_scenario("---".join(JOB.format(name=n, script="sleep 3000; exit 0") for n in SPIN_NAMES), threads=True)
    _running(s, SPIN_NAMES)
    c = s.controller
    c.turn_wait = 0.0  # as in its pod
    notify = c.cluster.notify  # the KubeCluster's Event, as runtime_command wires it
    c.notify = notify

    def webhook(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "genericjobs.flatjob.dev/status" and name != "z":
            time.sleep(HANG)

    s.server.on_request = webhook
    for n in SPIN_NAMES:
        s.kubelet.kill(f"{n}-worker-1", 0)  # every job has news for its status
    s.sync()
    t0 = time.monotonic()
    with _counted_loop(c, notify) as steps:
        time.sleep(2.0)  # the four hung status writes are out; z is queued, no thread is free
        during = sum(1 for t in steps if t - t0 < 2.0)
    assert c.pool is not None and c.pool.wait(HANG + 5)
    assert during <= 20, f"the loop turned {during} times in 2 s while no thread was free (every ~{2000 / max(during, 1):.0f} ms)"


# --- found by review (notes/review-threads.md), fixed since: lease events ---
# A cycle in flight when the loop learns the Lease is lost goes on writing: the worker checks
# ctl.leading() before its status write and each action, but not before its Events
# (_flush_events, _report) nor before _replace_unproven_secret's Secret delete.

def test_turns_no_event_is_written_after_the_lease_is_lost() -> None:
    s, c = _leased("j")
    _patient(c)
    release = threading.Event()
    gate = _hang_status_writes(s, HOLD, release)  # held until runtime-a knows it lost the Lease: a fixed 1 s let a loaded machine answer it first
    s.kubelet.kill("j-worker-0", 3)  # a failure: the cycle restarts the worker and records Events
    s.sync()
    c.step()
    assert gate.wait(WAIT_GOOD), "no status write went out"
    # While the status write waits: runtime-b holds the Lease now (runtime-a's renewals were
    # late, it expired, b took it); runtime-a's loop turns and sees it.
    s.clock.now += RENEW_EVERY + 0.1
    lease = copy.deepcopy(s.cluster.objects[("leases", "default", "flatjob")])
    lease["spec"].update({"holderIdentity": "runtime-b", "renewTime": micro_time(s.clock.now)})
    s.cluster.replace_lease("default", lease)
    end = time.monotonic() + WAIT_GOOD
    while time.monotonic() < end:  # the renewal runs on a cycle thread (review hx24): until its answer is in
        c.step()
        if not c.leading():
            break
        time.sleep(0.01)
    assert not c.leading()
    lost_at = len(s.server.log)
    release.set()  # the status write is answered only now: the rest of its cycle runs knowing the Lease is lost
    assert c.pool is not None and c.pool.wait(HOLD)
    after = [(r.verb, r.resource, r.name) for r in s.server.log[lost_at:]
             if "(runtime-a)" in r.agent and r.verb in ("create", "update", "patch", "delete")
             and r.resource != "genericjobs.flatjob.dev/status"]  # that one was sent before: it is logged when answered
    assert after == [], f"runtime-a wrote after it knew runtime-b holds the Lease: {after}"


# --- found by review (notes/review-threads.md), fixed since: labelwatch ---
# LabelWatch.want() starts its informer on a cycle thread; the informer's list releases the
# TurnLock, and the loop's observe() polls the same half-started informer (LabelWatch.informers()
# lists it as soon as `started` is set): two lists, two watches, one of them never closed.

def test_turns_tensorboard_informer_is_listed_and_watched_once() -> None:
    before = set(threading.enumerate())  # watch threads of earlier tests' closed runtimes may still be ending
    s = namespace_scenario(TENSORBOARD.replace("sleep 3; exit 0", "sleep 600; exit 0"), threads=True)
    c = s.controller
    c.turn_wait = 0.0  # as in its pod (runtime_command): the loop does not wait for cycles
    _patient(c)
    listing, observed = threading.Event(), threading.Event()

    def slow_list(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "deployments.apps" and verb == "list" and not listing.is_set():
            listing.set()
            observed.wait(HOLD)  # a busy API server: answered once the loop has turned (a fixed 0.5 s could end first on a loaded machine)

    s.server.on_request = slow_list
    c.step()  # dispatches the job: its cycle's want_lookups() starts the Deployments informer
    assert listing.wait(WAIT_GOOD), "the cycle never listed the Deployments"
    c.observe()  # the loop's next turn, while the cycle's list is out
    observed.set()
    assert c.pool is not None and c.pool.wait(HOLD)
    c.observe()
    time.sleep(0.3)
    lists = s.server.requests[("list", "deployments.apps")]
    watches = s.server.requests[("watch", "deployments.apps")]
    c.close()
    end = time.monotonic() + WAIT_GOOD  # the readers end once their socket is shut: soon, however slowly (a thread never ending still fails)
    while (left := [t for t in threading.enumerate() if t not in before and t.name == "flatjob-watch" and t.is_alive()]) and time.monotonic() < end:
        time.sleep(0.05)
    assert (lists, watches, len(left)) == (1, 1, 0), (
        f"Deployments listed {lists}x and watched {watches}x; {len(left)} watch reader thread(s) still running after Controller.close()")


# --- found by review (notes/review-threads.md), fixed since: close in flight ---
# Without a Lease (run-local: use_lease=False), release_lease() returns at once and close() does
# not wait for the cycles in flight: LocalCluster.stop_runtime() ("stop the runtime after its
# current cycle") returns while a cycle goes on to delete and create pods, after the loop has
# ended and the watches are closed (then the kubelet is shut down and the final table printed).

@pytest.mark.slow  # requests hung for real seconds (chaos): run by .ci/run
def test_turns_no_cycle_acts_after_the_runtime_was_stopped_and_closed() -> None:
    s = namespace_scenario(JOB.format(name="j", script="sleep 3000; exit 0"), threads=True)
    for _ in range(60):
        s.tick()
        if statuses(s).get("j", {}).get("aggregate", {}).get("running") == 2:
            break
    c = s.controller
    c.turn_wait = 0.0  # as run-local's loop thread runs it
    gate = threading.Event()

    def slow_status(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "genericjobs.flatjob.dev/status" and not gate.is_set():
            gate.set()
            time.sleep(0.5)

    s.server.on_request = slow_status
    s.kubelet.kill("j-worker-0", 3)  # a restart: status first, then the pods
    s.sync()
    c.step()
    assert gate.wait(WAIT_GOOD)
    c.release_lease()  # what stop_runtime / runtime_command do once the loop has ended
    c.close()
    closed_at = len(s.server.log)
    time.sleep(2.0)
    after = [(r.verb, r.resource, r.name) for r in s.server.log[closed_at:]
             if "(runtime-" in r.agent and r.verb in ("create", "patch", "delete") and r.resource == "pods"]
    assert after == [], f"pod writes after Controller.close() returned: {after}"


# --- found by the second review (notes/review-threads-2.md), fixed since ---

@pytest.mark.slow  # requests hung for real seconds (chaos): run by .ci/run
def test_turns_loop_never_spins_while_all_threads_hang_and_a_queued_job_is_due_by_its_timer() -> None:
    """A queued job due by its timer (a back-off ended) while every thread waits on a hung
    request: the loop waits for a cycle's end, it does not turn every 10 ms."""
    names = ("a0", "a1", "a2", "a3", "z")  # four hung jobs fill the four threads; z's restart back-off ends meanwhile
    s = namespace_scenario("---".join(JOB.format(name=n, script="sleep 3000; exit 0") for n in names), threads=True)
    _running(s, names)
    c = s.controller
    s.kubelet.kill("z-worker-0", 3)  # restarted by its policy after a 10 s back-off
    for _ in range(3):
        s.tick()
    wake = c.workers[("GenericJob", "z")].wake_at(s.clock.now)
    assert wake is not None and wake > s.clock.now, "z should wait on its restart back-off"
    c.turn_wait = 0.0  # as in its pod
    c.notify = notify = c.cluster.notify  # as runtime_command wires it
    out = threading.Semaphore(0)

    def webhook(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "genericjobs.flatjob.dev/status" and name != "z":
            out.release()
            time.sleep(HANG)

    s.server.on_request = webhook
    for n in names[:4]:
        s.kubelet.kill(f"{n}-worker-1", 0)  # news for the four hung jobs' status; none for z
    s.sync()
    with _counted_loop(c, notify) as steps:
        for _ in range(4):
            assert out.acquire(timeout=5), "the four status writes did not all go out"
        with c.lock:
            s.clock.now = wake + 1.0  # z's back-off ends while the four writes hang (virtual time)
        notify.set()  # the loop turns once and queues z
        t0 = time.monotonic()
        time.sleep(1.5)
        during = sum(1 for t in steps if t0 <= t < t0 + 1.5)
    assert c.pool is not None and c.pool.wait(HANG + 5)
    assert during <= 15, f"the loop turned {during} times in 1.5 s while no thread was free"


@pytest.mark.slow  # requests hung for real seconds (chaos): run by .ci/run
def test_turns_a_shutdown_waits_for_a_hung_cycle_once_and_keeps_the_lease_while_it_is_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """release_lease() then close() (runtime_command's order) wait STOP_WAIT in all, not each;
    and client-go's ReleaseOnCancel asks that everything the Lease guards has stopped before it
    is handed over: a cycle still waiting on its request would act beside the next holder."""
    monkeypatch.setattr(controller_module, "STOP_WAIT", 1.0)
    s, c = _leased("hung")
    _patient(c)
    release = threading.Event()
    gate = _hang_status_writes(s, HOLD, release)  # held until the shutdown is over: in flight throughout, however slow the machine
    s.kubelet.kill("hung-worker-0", 3)
    s.sync()
    c.step()
    assert gate.wait(WAIT_GOOD)
    assert c.pool is not None
    waits: list[float] = []  # what the shutdown asks the pool to wait, not how long it took: that is the machine's
    real_wait = c.pool.wait

    def wait(timeout: float, **kw: Any) -> bool:
        waits.append(timeout)
        return real_wait(timeout, **kw)

    c.pool.wait = wait  # type: ignore[method-assign]
    c.release_lease()
    c.close()
    c.pool.wait = real_wait  # type: ignore[method-assign]
    assert waits and sum(waits) <= 1.0, f"release_lease then close waited {waits} s with STOP_WAIT 1 s"
    lease = s.cluster.objects[("leases", "default", "flatjob")]
    assert lease["spec"]["holderIdentity"] == "runtime-a"  # left to lapse
    release.set()
    assert c.pool.wait(HOLD)
    c._stop_by = None  # a fresh shutdown, now that nothing is in flight
    c.release_lease()
    lease = s.cluster.objects[("leases", "default", "flatjob")]
    assert lease["spec"].get("holderIdentity") in (None, "")  # handed over once nothing is in flight

# --- found by review (notes/review-24-22-round12.md), fixed since: as many hung jobs as threads ---

HUNG = ("h0", "h1", "h2", "h3")


def _four_hung(hang: dict[str, float]) -> tuple[Any, Any, list[str], set[str], threading.Event]:
    """Four jobs whose status writes a webhook holds `hang["seconds"]` s (or until the returned
    Event is set), and a good one, all running; the loop as in its pod.  Returns the scenario,
    its controller, whose status writes were answered in order (since the last clear), which
    hung writes went out, and the Event."""
    s = namespace_scenario("---".join(JOB.format(name=n, script="sleep 3000; exit 0") for n in (*HUNG, "good")), threads=True)
    for _ in range(60):
        s.tick()
        if all(statuses(s).get(n, {}).get("aggregate", {}).get("running") == 2 for n in (*HUNG, "good")):
            break
    written: list[str] = []
    out: set[str] = set()
    release = threading.Event()

    def webhook(verb: str, resource: str, namespace: Any, name: Any, agent: str = "") -> None:
        if "(runtime-" in agent and resource == "genericjobs.flatjob.dev/status":
            if name in HUNG:
                out.add(name)
                release.wait(hang["seconds"])
            if name not in written:
                written.append(name)

    s.server.on_request = webhook
    s.controller.turn_wait = 0.0  # as in its pod
    _patient(s.controller)
    return s, s.controller, written, out, release


def _steps_until(c: Any, done: Any, seconds: float) -> None:
    end = time.monotonic() + seconds
    while not done() and time.monotonic() < end:
        c.step()
        time.sleep(0.02)


def _good_waits_for(s: Any, c: Any, written: list[str], release: threading.Event) -> list[str]:
    """The good job's pod finishes while the hung writes are held (until its status is written,
    at most HOLD s); returns the status writes answered before the good job's (none, unless it
    waited for a hung one)."""
    s.kubelet.kill("good-worker-1", 0)
    s.sync()
    _steps_until(c, lambda: "good" in written, WAIT_GOOD)
    release.set()
    assert c.pool is not None and c.pool.wait(HOLD)
    return written[: written.index("good")] if "good" in written else [*written, "(not the good job's at all)"]


@pytest.mark.slow  # requests hung for real seconds (chaos): run by .ci/run
def test_turns_four_jobs_whose_status_writes_hang_do_not_hold_a_fifth_jobs_status() -> None:
    """docs/runtime.md: "a job whose requests hang behind a slow admission webhook never keeps the
    other jobs' status waiting". With as many such jobs as threads (4), every thread hung and a
    healthy job's status waited a whole hang (review of round 12; bench --hung 4: 19.5 s): a cycle
    stuck on a request no longer counts against the pool's size, which grows a thread."""
    s, c, written, out, release = _four_hung({"seconds": HOLD})
    for n in HUNG:
        s.kubelet.kill(f"{n}-worker-1", 0)  # the hung jobs have news for their status: their writes go out and hang
    s.sync()
    _steps_until(c, lambda: len(out) == len(HUNG), WAIT_GOOD)
    assert len(out) == len(HUNG), out
    before = _good_waits_for(s, c, written, release)
    assert before == [], f"the good job's status waited behind four hung jobs: answered before it: {before}"


@pytest.mark.slow  # requests hung for real seconds (chaos): run by .ci/run
def test_turns_jobs_seen_slow_are_still_slow_when_their_next_write_hangs() -> None:
    """A job seen slow stays slow until requests of its own come back fast: the cycle after a hung
    status write (its own write's watch event, no request) cleared it at once, so the next hang
    of the same four jobs held every thread again (review of round 12; bench --hung 8: 39.5 s)."""
    hang = {"seconds": 3.0}  # the first hang: real seconds, well past SLOW_CYCLE however busy the machine (a wait only grows)
    s, c, written, out, release = _four_hung(hang)
    for n in HUNG:
        s.kubelet.kill(f"{n}-worker-1", 0)
    s.sync()
    _steps_until(c, lambda: len(written) >= 4, WAIT_GOOD)
    assert c.pool is not None and c.pool.wait(HOLD)
    for _ in range(3):
        c.step()
        time.sleep(0.05)
    assert c.pool.wait(HOLD)
    slow_after_first = {k[1]: w.slow for k, w in c.workers.items()}
    out.clear()
    written.clear()
    hang["seconds"] = HOLD  # the second: held until the good job's status is written
    for n in HUNG:
        s.kubelet.kill(f"{n}-worker-0", 0)
    s.sync()
    _steps_until(c, lambda: len(out) >= 3, WAIT_GOOD)
    before = _good_waits_for(s, c, written, release)
    assert before == [], f"second time: the good job's status waited behind {before}; slow flags after the first hang: {slow_after_first}"


# --- found by review (notes/review-runtime-round13.md): what counts as stuck ---

def _pool(size: int) -> tuple[TurnLock, CyclePool]:
    lock = TurnLock()
    return lock, CyclePool(size, lock, lambda: None, lambda exc: None)


@pytest.mark.slow  # 40 cycles of real CPU turns (6 s): run by .ci/run
def test_turns_a_cycle_waiting_for_the_turn_not_on_a_request_is_not_stuck() -> None:
    """turns.STUCK_AFTER: only a cycle whose request has been out 0.5 s is stuck, and the pool
    grows a thread for the next job (review of round 13: any cycle in flight 0.5 s was).  Here every request is answered
    in 5 ms; the cycles only take turns of their own work (0.1 s each, holding the TurnLock as a
    cycle's own work does).  None waits on a request, so the pool must stay at --concurrency (4):
    more threads only queue on the same lock (and hold more cycles' memory at once)."""
    lock, pool = _pool(4)

    def cycle() -> None:
        for _ in range(3):
            time.sleep(0.1)  # its own work, holding the turn
            with lock.released(), lock.requesting():
                time.sleep(0.005)  # a request answered in 5 ms

    queued = [f"job-{i}" for i in range(40)]
    most = 0
    try:
        end = time.monotonic() + 5.0
        while time.monotonic() < end and (queued or pool.busy):
            with lock:  # the loop's _dispatch
                while queued and pool.free() > 0:
                    pool.submit(queued.pop(0), cycle)
                most = max(most, len(pool.busy))
            time.sleep(0.02)
    finally:
        pool.close(join=5.0)
    assert (most, len(pool._threads)) == (4, 4), f"no request waited over 5 ms, yet {most} cycles were in flight on {len(pool._threads)} threads"


def test_turns_unstuck_at_names_the_moment_a_place_opens_near_the_cap() -> None:
    """_set_wake relies on unstuck_at for the moment a queued job may start: with 29 cycles in
    flight (25 stuck, 4 young) at --concurrency 4, free() is 0 now and 3 once the young ones count
    as stuck, so unstuck_at must name that moment, not None (the loop then sleeps until some
    other timer)."""
    lock, pool = _pool(4)
    young = 60.0  # the 4 young requests went out "in the future": young however slowly this runs (a busy machine)
    try:
        now = time.monotonic()
        with lock:
            for i in range(29):  # a cycle of each in flight on a thread (ids made up), its request out
                key = f"job-{i}"
                pool.busy.add(key)
                pool._thread_of[key] = -1 - i
                lock.out[-1 - i] = now - 10 if i < 25 else now + young
            assert pool.free() == 0
            when = pool.unstuck_at()
            for thread in list(lock.out):
                lock.out[thread] -= young + 1  # what the clock does meanwhile: the young ones are stuck now
            later = pool.free()
            pool.busy.clear()
            pool._thread_of.clear()
            lock.out.clear()
    finally:
        pool.close(join=1.0)
    assert later > 0
    assert when is not None, f"a place opens STUCK_AFTER from now (free() {later}), but unstuck_at() is None"
