"""Hostile-input fixtures: a sandbox per test (tests/hostile/kit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import Sandbox


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)
