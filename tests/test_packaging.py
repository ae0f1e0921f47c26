"""Packaging: every package folder ships in the wheel, and the wheel really works.

pyproject.toml lists the packages explicitly (the folders compiler/ and runtime/ are mapped
into `flatjob.`); a folder with an __init__.py that is not listed is missing from the wheel,
and the runtime image fails at import.  The editable install is what the test run uses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def listed_packages() -> set[str]:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib needs Python 3.11")
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["tool"]["setuptools"]["packages"])


def packages(folder: str = "runtime") -> list[str]:
    return sorted(
        "flatjob." + ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / folder).rglob("__init__.py")
        if "__pycache__" not in p.parts
    )


def runtime_packages() -> list[str]:
    return packages("runtime")


def test_runtime_packages_are_found() -> None:
    assert "flatjob.runtime" in runtime_packages()
    assert "flatjob.runtime.decisions" in runtime_packages()


def test_every_runtime_package_is_in_the_wheel() -> None:
    assert set(runtime_packages()) - listed_packages() == set()


def test_every_compiler_package_is_in_the_wheel() -> None:
    assert set(packages("compiler")) - listed_packages() == set()


def test_the_wheel_holds_code_and_schema_data(tmp_path: Path) -> None:
    """Build the wheel for real and check what the runtime image would install."""
    import subprocess
    import zipfile

    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("flatjob-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "flatjob/compiler/cli/__init__.py",
        "flatjob/runtime/decisions/__init__.py",
        "flatjob/schemas/kubernetes/v1.32.0.json",
        "flatjob/schemas/crds/pytorchtrainingjobs.flatjob.dev.yaml",
    ):
        assert needed in names, needed
    assert not any(n.startswith(("compiler/", "runtime/", "tests/")) for n in names)  # no squatted names
