"""Runtime tests: close every scenario (stop its runtime, delete its namespace) after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import OPEN, REAL


@pytest.fixture(autouse=True)
def _close_scenarios() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """With FLATJOB_REAL_CLUSTER=1 every scenario test carries the `cluster` marker."""
    if REAL:
        for item in items:
            if "scenario" in item.nodeid or "chaos" in item.nodeid:
                item.add_marker(pytest.mark.cluster)
