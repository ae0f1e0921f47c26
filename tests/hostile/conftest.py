"""Hostile-input fixtures: a sandbox per test (tests/hostile/kit.py), and which inputs the
README's quick run takes: each test's first input there, every input in the slow run
(`-m slow`, as .ci/run does). Most cases start flatjob three times (lint, compile, the plugin);
the quick run still meets every class of attack once."""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import Sandbox

HERE = Path(__file__).resolve().parent


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the marks must be on by then
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every input of a parametrized hostile test but its first as slow."""
    first: set[tuple[Path, str]] = set()
    for item in items:
        if not isinstance(item, pytest.Function) or not hasattr(item, "callspec") or HERE not in item.path.parents:
            continue
        test = (item.path, item.originalname)
        if test in first:
            item.add_marker(pytest.mark.slow)
        else:
            first.add(test)
