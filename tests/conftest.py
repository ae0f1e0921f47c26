"""Shared fixtures: the real T9k corpus (skipped when ../shared is absent) and golden updates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("FLATJOB_CORPUS", ROOT.parent / "shared" / "corpus"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def corpus_dir(name: str = "t9k") -> Path:
    """A corpus folder, or skip the test when the shared corpus is not beside the project."""
    path = CORPUS / name
    if not path.is_dir():
        pytest.skip(f"corpus not found at {path} (set FLATJOB_CORPUS)")
    return path


def corpus_files(name: str = "t9k") -> list[Path]:
    """The corpus files, for parametrization (empty when absent; tests then skip)."""
    path = CORPUS / name
    return sorted(path.glob("*.yaml")) if path.is_dir() else []
