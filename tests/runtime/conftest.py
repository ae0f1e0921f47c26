"""Runtime tests: close every scenario (stop its runtime, delete its namespace) after each test."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from flatjob.runtime import worker

from .harness import MODE, MODES, OPEN, REAL


@pytest.fixture(autouse=True)
def _close_scenarios() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


@pytest.fixture(autouse=True)
def _virtual_budgets(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the fake cluster's virtual clock, the runtime's wall-clock budgets never decide what a
    step does: a cycle acting past ACT_BUDGET yields the rest of its actions to the next tick,
    and a cycle waiting past SLOW_CYCLE puts its job last (one such job a turn), so on a loaded
    machine the same scenario took more virtual seconds, by luck (a stress run saw a forty-pod
    restart's 20 releases cut to 11 in a tick, and jobs of multi-job scenarios marked slow).
    Tests of the act budget move its clock themselves (worker._wall); tests of the budgets on
    real time, real threads and real waits are marked `wall_budgets`."""
    if REAL or request.node.get_closest_marker("wall_budgets"):
        return
    monkeypatch.setattr(worker, "_wall", lambda: 0.0)
    monkeypatch.setattr(worker, "SLOW_CYCLE", math.inf)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests that use `runtime_mode` run once per runtime mode: the default (namespace) in the
    README's quick run, each other mode again in the slow run (`-m slow`, as .ci/run does).
    Both modes share every decision; what differs (scope, Lease, RBAC) has tests of its own."""
    if "runtime_mode" in metafunc.fixturenames:
        params = [mode if mode == MODES[0] else pytest.param(mode, marks=pytest.mark.slow) for mode in MODES]
        metafunc.parametrize("runtime_mode", params, indirect=True)


@pytest.fixture
def runtime_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """The runtime mode the test's scenarios compile and run in."""
    token = MODE.set(request.param)
    yield request.param
    MODE.reset(token)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """With FLATJOB_REAL_CLUSTER=1 every scenario test carries the `cluster` marker."""
    if REAL:
        for item in items:
            if "scenario" in item.nodeid or "chaos" in item.nodeid:
                item.add_marker(pytest.mark.cluster)
