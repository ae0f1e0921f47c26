"""The quick run leaves to the slow run exactly what docs/architecture.md §9 says: per-job
runtime scenarios, hostile and launch-script inputs after each test's first, and the hostile
tests that measure CPU and memory; the slow run collects all of them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IN_MODE = {mode: re.compile(rf"\[(?:.*-)?{mode}(?:-.*)?\]$") for mode in ("job", "namespace")}
MODULES = ["tests/runtime/test_gang.py", "tests/hostile/test_job_values.py", "tests/hostile/test_entry_points.py", "tests/test_scripts_deepspeed.py"]


def collected(marks: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-n", "0", "-p", "no:randomly", "-m", marks, *MODULES],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=False).stdout
    return {line.strip() for line in out.splitlines() if "::" in line}


@pytest.mark.slow  # collects three modules twice in children (4-5 s): run by .ci/run after the README's command
def test_the_quick_run_leaves_job_mode_later_inputs_and_measurements_to_the_slow_run() -> None:
    quick, slow = collected("not slow"), collected("slow")
    assert quick and slow and not quick & slow
    assert not [t for t in quick if IN_MODE["job"].search(t)] and [t for t in quick if IN_MODE["namespace"].search(t)]
    assert [t for t in slow if "test_gang.py" in t and IN_MODE["job"].search(t)]
    assert not [t for t in quick if "test_job_values.py::test_a_bad_value_is_a_diagnostic_at_its_line_everywhere" in t]  # MEASURED
    krm = sorted(t for t in quick | slow if "test_krm_reports_a_bad_resource_list_in_results" in t)
    assert len(krm) > 1 and sum(t in quick for t in krm) == 1, krm  # the first input only
    argv = sorted(t for t in quick | slow if "test_deepspeed_argv_per_config_field" in t)
    assert len(argv) > 1 and sum(t in quick for t in argv) == 1, argv  # a launch script's first input only


def test_the_hostile_cpu_bound_is_one_second_where_a_test_runs_alone() -> None:
    """Issue 21's 1 s holds in the slow pass (no xdist workers); 2 s beside other workers."""
    probe = "import os, sys; sys.path.insert(0, 'tests'); from hostile import kit; print(kit.BOUNDED_CPU)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    alone = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    beside = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**env, "PYTEST_XDIST_WORKER_COUNT": "2"},
                            capture_output=True, text=True, check=True).stdout
    assert (alone.strip(), beside.strip()) == ("1.0", "2.0")


def test_only_conftest_knows_where_the_corpus_is() -> None:
    """Every test finds the corpus through conftest.py (FLATJOB_CORPUS, else ../shared/corpus) and
    skips naming it when it is absent: a path built elsewhere ignored FLATJOB_CORPUS=/nonexistent."""
    built = re.compile(r"""/\s*["']shared["']|["']\.\./shared""")
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").rglob("*.py")) if p.name != "conftest.py" and built.search(p.read_text())]
    assert offenders == []


def test_a_property_without_settings_of_its_own_draws_the_quick_share_in_the_quick_run() -> None:
    from hypothesis import settings
    from propertykit import examples

    assert settings.default is not None and settings.default.max_examples == examples(100)
