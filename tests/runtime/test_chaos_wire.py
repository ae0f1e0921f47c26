"""Chaos on the wire: the API server goes away, watches drop or go half-open, at random.

The runtime runs as it does in its pod (runtime.cli.run_loop in its own thread, woken by its
watches, with its Lease), against the fake API server over HTTP, while the kubelet stand-in
runs pods in another thread.  Time runs SPEED times faster than the wall clock for every
part alike: the scenario clock, and the runtime's connect, read and watch time-outs
(Timeouts.scaled), so "30 s" below means 30 s of the scenario's time.

For random outages of 1-30 s (connections refused, open ones dropped), dropped watch
connections and half-open watches (open sockets that never send again), at random instants:
- the runtime's loop never ends;
- after an outage it is watching again within twice its read time-out, and after a
  half-open watch within twice its watch read time-out;
- the outcome, restart counts and attempt equal an undisturbed run's.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from propertykit import examples

from flatjob.runtime.cli import run_loop
from flatjob.runtime.controller import CONCURRENCY
from flatjob.runtime.kube import Timeouts
from flatjob.runtime.server import Health

from .harness import REAL, Scenario
from .test_scenarios import FAIL_ONCE, pytorch

pytestmark = [pytest.mark.skipif(REAL, reason="stops and breaks the fake API server"), pytest.mark.usefixtures("runtime_mode")]  # each test in both runtime modes

SPEED = 20.0  # scenario seconds per wall-clock second
TIMEOUTS = Timeouts()  # as in the runtime image; scaled below
JOB = pytorch(master=FAIL_ONCE, worker="sleep 20; exit 0", policy="ExitCode")


@dataclass
class FastClock:
    """The scenario's time: SPEED times the wall clock, from a fixed origin."""

    origin: float = 1_000_000.0
    started: float = field(default_factory=time.monotonic)

    @property
    def now(self) -> float:
        return self.origin + (time.monotonic() - self.started) * SPEED

    def __call__(self) -> float:
        return self.now


class Live:
    """A scenario whose runtime and kubelet run on their own threads, on fast time."""

    def __init__(self) -> None:
        self.clock = FastClock()
        self.s = Scenario(JOB, clock=self.clock)  # type: ignore[arg-type]
        self.s.controller.close()
        self.s.server.bookmark_every = 60 / SPEED  # kube-apiserver's bookmark interval, on fast time
        kube = self.s.kube("live")
        kube.timeouts = kube.http.timeouts = TIMEOUTS.scaled(1 / SPEED)
        threads = {"concurrency": CONCURRENCY, "notify": kube.notify} if self.s.mode == "namespace" else {}  # as in its pod: the loop never waits for a cycle
        self.controller = self.s.runtime("live", cluster=kube, **threads)
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.kube = kube
        self.runtime = threading.Thread(target=self._run, args=(kube,), daemon=True)
        self.kubelet = threading.Thread(target=self._kubelet, daemon=True)

    def _run(self, kube: Any) -> None:
        try:
            run_loop(self.controller, self.stop, kube.notify, Health(), wall=lambda seconds: seconds / SPEED)
        except BaseException as exc:  # the test fails on any: the loop must never end by itself
            self.errors.append(exc)

    def _kubelet(self) -> None:
        while not self.stop.is_set():
            self.s.kubelet.tick()
            time.sleep(0.01)

    def start(self) -> None:
        self.runtime.start()
        self.kubelet.start()

    def watching_since(self, t: float) -> bool:
        """Every watch of the runtime is open and has heard from the server after `t`."""
        return all(i.retry_at is None and i.last_heard >= t for i in self.controller.informers())

    def wait(self, done: Any, seconds: float) -> bool:
        """Up to `seconds` of scenario time for done()."""
        end = self.clock.now + seconds
        while self.clock.now < end:
            if done():
                return True
            time.sleep(0.01)
        return bool(done())

    def summary(self) -> dict[str, Any]:
        st = self.s.status()
        return {"phase": st.get("phase"), "backoffCount": st.get("backoffCount"), "attempt": (st.get("runtime") or {}).get("attempt"), "restarts": {t["type"]: t["restartCount"] for t in st.get("tasks") or []}}

    def close(self) -> None:
        self.stop.set()
        self.kube.notify.set()
        self.runtime.join(10)
        self.kubelet.join(10)
        self.controller.close()


def finished(live: Live) -> bool:
    return live.s.status().get("phase") in ("Succeeded", "Failed")


def _undisturbed() -> dict[str, Any]:
    live = Live()
    live.start()
    try:
        assert live.wait(lambda: finished(live), 600), live.summary()
        return live.summary()
    finally:
        live.close()


BASELINE: dict[str, Any] = {}

disruptions = st.lists(
    st.tuples(st.sampled_from(["outage", "drop", "half-open"]), st.floats(0, 60), st.floats(1, 30)),
    min_size=1,
    max_size=3,
).map(lambda ds: sorted(ds, key=lambda d: d[1]))


@settings(max_examples=examples(8), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(disruptions)
def test_outages_dropped_and_half_open_watches_change_nothing(plan: list[tuple[str, float, float]]) -> None:
    if not BASELINE:
        BASELINE.update(_undisturbed())
    assert BASELINE["phase"] == "Succeeded" and BASELINE["backoffCount"] == 1
    live = Live()
    live.start()
    try:
        start = live.clock.now
        for kind, at, length in plan:
            live.wait(lambda: False, max(0.0, start + at - live.clock.now))
            assert live.runtime.is_alive()
            if kind == "outage":
                live.s.server.stop_serving()
                live.wait(lambda: False, length)
                live.s.server.resume_serving()
                back = live.clock.now
                assert live.wait(lambda back=back: live.watching_since(back), 2 * TIMEOUTS.read), f"not watching {2 * TIMEOUTS.read:g} s after an outage of {length:.1f} s"
            elif kind == "drop":
                live.s.server.drop_watches()
            else:
                froze = live.clock.now
                live.s.server.half_open_watches()
                assert live.wait(lambda froze=froze: live.watching_since(froze + 0.001), 2 * TIMEOUTS.watch_read), "a half-open watch was never replaced"
        assert live.wait(lambda: finished(live), 900), live.summary()
        assert live.runtime.is_alive() and not live.errors, live.errors
        assert live.summary() == BASELINE
    finally:
        live.close()
