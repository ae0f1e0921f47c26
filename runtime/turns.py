"""Cycles of several jobs at once (namespace mode): threads that take turns holding one lock.

Everything the runtime keeps (the informers' caches, the workers, the write budget, the
queue) is read and changed only by the thread that holds the Controller's `TurnLock`.  A
thread lets go of it only while one of its requests waits on the API server (`Unlocked`
wraps the cluster), so a job whose request hangs (a slow admission webhook on its pods, API
priority and fairness queueing it) holds one thread, not the loop and not the other jobs,
and the code still reads as single-threaded code: what it keeps can change only across a
request.  As with client-go's workqueue (MaxConcurrentReconciles), one job is never in two
threads at once (`CyclePool`).  Python runs one thread at a time anyway (the GIL): the
threads add waiting in parallel, not CPU.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

REQUEST_METHODS = ("list", "watch", "get", "create", "replace", "patch", "delete")
# Namespace mode: jobs whose cycles run at once.  One hung request holds one thread; more
# threads add no CPU (Python runs one at a time), only requests waiting in parallel.
CONCURRENCY = 4
# A cycle whose request has been out this long (worker.SLOW_CYCLE) no longer counts against
# the pool's size, and the pool grows a thread for the others, up to GROWTH x its size, so jobs
# whose requests hang (as many as the threads, or more, up to the cap) never hold the others'
# status.  Cycles only waiting for their turn (the CPU) never count: they are not stuck.
STUCK_AFTER = 0.5
GROWTH = 8


class TurnLock:
    """A reentrant lock that knows its holder, can be let go of for the length of a request,
    and counts, per thread, the time spent waiting for it (that wait is not the API server's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        self._local = threading.local()
        self.out: dict[int, float] = {}  # thread -> since when its request has been out (Unlocked)

    def _take(self) -> None:
        started = time.perf_counter()
        self._lock.acquire()
        self._local.waited = self.waited() + time.perf_counter() - started

    def __enter__(self) -> TurnLock:
        me = threading.get_ident()
        if self._owner != me:
            self._take()
            self._owner = me
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()

    def held(self) -> bool:
        return self._owner == threading.get_ident()

    def waited(self) -> float:
        """Seconds this thread has waited for the lock, in all."""
        return getattr(self._local, "waited", 0.0)

    @contextmanager
    def requesting(self) -> Iterator[None]:
        """Count a request of this thread's (`requests`) and mark it as out (`out`) while the
        block runs."""
        self._local.requests = self.requests() + 1
        me = threading.get_ident()
        self.out[me] = time.monotonic()
        try:
            yield
        finally:
            self.out.pop(me, None)

    def requests(self) -> int:
        """Requests this thread has made through `Unlocked`, in all."""
        return getattr(self._local, "requests", 0)

    @contextmanager
    def released(self) -> Iterator[None]:
        """Let the other threads take their turn while this one waits (a no-op for a thread
        that does not hold the lock: a test's, or the health server's)."""
        if not self.held():
            yield
            return
        depth, self._depth, self._owner = self._depth, 0, None
        self._lock.release()
        try:
            yield
        finally:
            self._take()
            self._owner, self._depth = threading.get_ident(), depth


class Unlocked:
    """A Cluster whose requests let go of the TurnLock while they wait on the API server."""

    def __init__(self, cluster: Any, lock: TurnLock):
        self.inner = cluster
        self._lock = lock
        for method in REQUEST_METHODS:
            setattr(self, method, self._unlocked(getattr(cluster, method)))

    def _unlocked(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def request(*args: Any, **kwargs: Any) -> Any:
            with self._lock.released(), self._lock.requesting():
                return call(*args, **kwargs)

        return request

    def __getattr__(self, name: str) -> Any:  # anything else the cluster has (its notify Event, its timeouts)
        return getattr(self.inner, name)


class CyclePool:
    """`size` daemon threads that run jobs' cycles, each holding the lock for its turn; a key
    in flight is never started again until it is done (`busy`).  `done` is called after each
    cycle (it wakes the loop); daemon threads never keep the process from exiting."""

    def __init__(self, size: int, lock: TurnLock, done: Callable[[], None], failed: Callable[[BaseException], None]):
        self.size = size
        self.cap = size * GROWTH  # threads at most, however many cycles hang
        self.lock = lock
        self.done = done
        self.failed = failed
        self.busy: set[Any] = set()
        self.slow: set[Any] = set()  # the keys in flight that were started as slow jobs
        self.ended = 0  # cycles ended so far (changed under the lock, with `busy`)
        self._thread_of: dict[Any, int] = {}  # key in flight -> the thread running its cycle
        self._idle = threading.Condition(threading.Lock())
        self._work: queue.SimpleQueue[tuple[Any, Callable[[], Any]] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        for _ in range(size):
            self._grow()

    def _grow(self) -> None:
        thread = threading.Thread(target=self._serve, daemon=True, name=f"flatjob-cycle-{len(self._threads)}")
        self._threads.append(thread)
        thread.start()

    def _requests_out(self) -> list[float]:
        """Since when each cycle in flight has had its request out (those waiting on one)."""
        out = self.lock.out
        return [t for thread in list(self._thread_of.values()) if (t := out.get(thread)) is not None]

    def stuck(self) -> int:
        """Cycles whose request has been out for STUCK_AFTER or longer."""
        now = time.monotonic()
        return sum(1 for t in self._requests_out() if now - t >= STUCK_AFTER)

    def free(self) -> int:
        """Cycles that may start now: `size`, plus one for each stuck cycle, up to `cap`."""
        return min(self.size + self.stuck(), self.cap) - len(self.busy)

    def unstuck_at(self) -> float | None:
        """When (monotonic) a request out now makes its cycle stuck, freeing a place (None: not
        sooner than a cycle ends, or at the cap)."""
        if self.size + self.stuck() >= self.cap:
            return None
        now = time.monotonic()
        return min((t + STUCK_AFTER for t in self._requests_out() if now - t < STUCK_AFTER), default=None)

    def submit(self, key: Any, cycle: Callable[[], Any], slow: bool = False) -> None:
        """Run `cycle` on a free thread (the caller holds the lock and checked `free`); past
        `size`, on a thread started for it (the others wait on their requests)."""
        self.busy.add(key)
        if slow:
            self.slow.add(key)
        if len(self.busy) > len(self._threads) and len(self._threads) < self.cap:
            self._grow()
        self._work.put((key, cycle))

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            key, cycle = item
            try:
                with self.lock:
                    self._thread_of[key] = threading.get_ident()
                    try:
                        cycle()
                    except Exception as exc:  # a cycle contains its own failures; this is the thread's last line of defence
                        self.failed(exc)
                    finally:
                        self.busy.discard(key)
                        self.slow.discard(key)
                        self._thread_of.pop(key, None)
                        self.ended += 1
            finally:
                with self._idle:
                    self._idle.notify_all()
                self.done()

    def wait(self, timeout: float, *, since: int | None = None) -> bool:
        """Wait (not holding the lock) until no cycle is in flight, or with `since` until a
        cycle has ended after that many had; False at the time-out."""
        end = time.monotonic() + timeout
        with self.lock.released(), self._idle:
            while self.busy and (since is None or self.ended == since):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.05))
        return True

    def close(self, join: float = 1.0) -> None:
        """End the threads once their cycle is done, waiting up to `join` seconds in all (call it
        without the lock: a cycle in flight needs it to end)."""
        for _ in self._threads:
            self._work.put(None)
        end = time.monotonic() + join
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))
