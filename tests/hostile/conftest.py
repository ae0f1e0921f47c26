"""Hostile-input fixtures: a sandbox per test (tests/hostile/kit.py).  The README's quick run
takes each test's first input, the slow run every input (tests/conftest.py FIRST_INPUT_ONLY):
most cases start flatjob three times (lint, compile, the plugin); the quick run still meets
every class of attack once."""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import Sandbox


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)
