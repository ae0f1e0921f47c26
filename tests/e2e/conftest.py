"""End-to-end fixtures: a tag every process of a test inherits, checked to be gone afterwards."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator

import pytest

from .kit import kill_tagged, tagged


@pytest.fixture
def tag() -> Iterator[str]:
    """A tag (E2E_TAG) for the test's processes; the test fails if any of them outlives it."""
    if not sys.platform.startswith("linux"):
        pytest.skip("run-local needs Linux (all of 127/8 on loopback, /proc)")
    value = uuid.uuid4().hex
    yield value
    left = tagged(value)
    kill_tagged(value)
    assert not left, f"processes left running after run-local exited: {left}"
