"""Every runtime package folder ships in the wheel the runtime image installs.

pyproject.toml lists the packages explicitly (the folders are mapped into `flatjob.`); a
folder with an __init__.py that is not listed is missing from the wheel, and the runtime
image fails at import.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def listed_packages() -> set[str]:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib needs Python 3.11")
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["tool"]["setuptools"]["packages"])


def runtime_packages() -> list[str]:
    return sorted(
        "flatjob." + ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "runtime").rglob("__init__.py")
        if "__pycache__" not in p.parts
    )


def test_runtime_packages_are_found() -> None:
    assert "flatjob.runtime" in runtime_packages()
    assert "flatjob.runtime.decisions" in runtime_packages()


def test_every_runtime_package_is_in_the_wheel() -> None:
    assert set(runtime_packages()) - listed_packages() == set()
