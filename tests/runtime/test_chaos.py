"""Chaos: kill the runtime at random API calls and random moments; nothing may change.

The runtime talks to the fake API server over HTTP through the real client; a kill at its
N-th write drops that request unanswered and everything the dead process sends afterwards
(the server's on_request hook), then a fresh process starts.  A killed runtime loses
everything in memory; the fresh one starts from the record's status (the ledger).  For every
scenario the outcome, the restart counts and the attempt number must equal those of an
undisturbed run, and no pod may run twice within one attempt.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from propertykit import examples

from flatjob.runtime.sim.kubelet import until_deleted

from .harness import REAL, Scenario, run_key
from .test_scenarios import DEEPSPEED, FAIL_ONCE, GENERIC, _launcher_fails_once, pytorch

pytestmark = [pytest.mark.skipif(REAL, reason="kills the runtime at chosen API calls of the fake cluster"), pytest.mark.usefixtures("runtime_mode")]  # each test in both runtime modes

POD_SCOPE = GENERIC.replace("policy: Never", "policy: OnFailure\n        limit: 2").replace(
    "sleep 2; exit 3", 'sleep 2; [ "$FLATJOB_RESTART_COUNT" -ge 1 ] || exit 3; exit 0'
).replace('{"worker": [1]}', '{"worker": [0, 1]}')

SCENARIOS: dict[str, tuple[str, str | None]] = {
    "pod-scope-restart": (POD_SCOPE, "argo"),
    "group-restart": (pytorch(master=FAIL_ONCE, policy="ExitCode"), None),
    "group-restart-argo": (pytorch(master=FAIL_ONCE, policy="ExitCode", cleanup="All"), "argo"),
    "backoff-limit": (pytorch(master="sleep 2; exit 137", policy="ExitCode", limit=2), "flux"),
    "pod-scope-rule": (GENERIC, None),
    "deepspeed": (DEEPSPEED, "flux"),
}


def _prepare(name: str) -> Scenario:
    text, gitops = SCENARIOS[name]
    s = Scenario(text, gitops=gitops)
    if name == "deepspeed":
        s.kubelet.behaviors["ds-worker-0"] = _launcher_fails_once
        for pod in ("ds-worker-1", "ds-worker-2"):
            s.kubelet.behaviors[pod] = until_deleted
    return s


def _summary(s: Scenario) -> dict[str, Any]:
    st = s.status()
    return {
        "phase": st["phase"],
        "backoffCount": st["backoffCount"],
        "attempt": st["runtime"]["attempt"],
        "restarts": {t["type"]: t["restartCount"] for t in st["tasks"]},
        "failed": next(c for c in st["conditions"] if c["type"] == "Failed")["reason"],
    }


def _run(s: Scenario, kills: dict[int, int] | None = None, limit: int = 2000) -> dict[str, Any]:
    kills = kills or {}
    for tick in range(limit):
        if kills.get(tick) == -1:
            s.controller = s.new_controller()  # killed between two cycles
        elif tick in kills:
            s.kill_after = kills[tick]  # die at the k-th write of this runtime step
        s.sync()
        s.controller.step()
        if s.dead:
            s.controller = s.new_controller()  # a fresh process: nothing survives but the ledger
        s.kill_after = None
        s.kubelet.tick()
        _count_starts(s)
        if s.tool is not None:
            s.tool.tick()
        s.clock.now += 1
        if s.status().get("phase") in ("Succeeded", "Failed") and tick > max(kills, default=0):
            break
    return _summary(s)


def _count_starts(s: Scenario) -> None:
    for name, pod in s.pods().items():
        uid = pod["metadata"]["uid"]
        if pod.get("status", {}).get("phase") == "Running" and uid not in s.__dict__.setdefault("_seen", set()):
            s.__dict__["_seen"].add(uid)
            s.starts[run_key(name, pod)] += 1


@functools.cache
def baseline(name: str, mode: str) -> dict[str, Any]:
    """The undisturbed run's outcome, once per scenario and mode, when a test first needs it."""
    return _run(_prepare(name))


@settings(max_examples=examples(30), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(SCENARIOS)),
    kills=st.dictionaries(st.integers(min_value=0, max_value=60), st.integers(min_value=-1, max_value=6), max_size=8),
)
@example(name="deepspeed", kills={2: 1})  # killed between the Secret's create and the first release: the next process replaces the Secret, then releases
def test_killing_the_runtime_changes_nothing(name: str, kills: dict[int, int]) -> None:
    s = _prepare(name)
    assert _run(s, kills) == baseline(name, s.mode)
    assert max(s.starts.values()) == 1, s.starts
