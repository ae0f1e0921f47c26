"""Shared fixtures: the real T9k corpus (skipped when ../shared is absent), golden updates,
signal dispositions reset for children, a check that no test leaves a process behind
(tests/prockit.py), and hypothesis derandomized (the same examples, and time, on every run)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prockit
import pytest
from hypothesis import HealthCheck, settings
from propertykit import examples

# Property tests draw the same examples on every run, so a run's verdict and its time do not
# depend on luck (one random draw took a test from 3 s to 51 s). To search afresh locally:
#   HYPOTHESIS_PROFILE=random python -m pytest tests/test_render_size.py
# A property without settings of its own draws hypothesis's 100 examples in CI and an eighth of
# them in the README's quick run, as those with settings do (propertykit.examples). No example
# has a deadline and none is judged too slow: a verdict never depends on the machine's load
# (a 200-name ledger example took over hypothesis's 200 ms at load 11 and failed the run).
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("flatjob", derandomize=True, database=None, max_examples=examples(100), **_UNTIMED)
settings.register_profile("random", derandomize=False, max_examples=examples(100), **_UNTIMED)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "flatjob"))

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("FLATJOB_CORPUS", ROOT.parent / "shared" / "corpus"))


def pytest_configure(config: pytest.Config) -> None:
    prockit.reset_signals()  # `nohup pytest &` must test what an interactive run tests
    prockit.count_spawns()
    prockit.become_subreaper()


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Fail a test whose processes still run after it (they are killed first)."""
    watch = prockit.Watch()
    yield
    left = watch.leftovers()
    if left:
        prockit.kill(left)
        pytest.fail("the test left processes running (killed now):\n  " + "\n  ".join(prockit.describe(left)), pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing outlives the suite: whatever is still running below pytest is killed and reported."""
    left = [p for p in prockit.descendants() if p.state != "Z"]
    if left:
        prockit.kill(left)
        print("\nprocesses still running at the end of the session (killed):\n  " + "\n  ".join(prockit.describe(left)))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# What `-m slow` selects besides tests marked one by one: every end-to-end test (real
# launchers, sshd, torchrun) and the chaos runs, which kill and restart runtimes many times.
SLOW_PATHS = ("e2e/", "runtime/test_chaos.py", "runtime/test_chaos_wire.py")


# Where the quick run takes each parametrized test's first input only and the slow run the
# rest: hostile inputs start flatjob up to three times each, and the launch-script tests run
# bash with stubbed launchers for each config field or hostile word (0.3-0.7 s each); the first
# input still meets each test's behaviour once (docs/architecture.md §9).
FIRST_INPUT_ONLY = ("hostile/", "test_scripts_")


# The quick run's longest tests (5-16 s each, `--durations`), started first: xdist hands tests
# out in collection order, and one of them drawn last kept a worker busy 13 s after the others
# had finished (the README's 180 s bound; longest-first is the classic fix for that tail).
LONGEST_FIRST = frozenset({
    "test_namespace_killing_the_runtime_mid_way_through_fifty_jobs_restarts_keeps_every_count_exact",
    "test_namespace_a_job_failing_in_a_loop_does_not_hold_up_the_others",
    "test_replicas_0_is_the_first_replica_while_the_others_restart",
    "test_moving_an_env_value_into_an_overlay_does_not_change_the_budget",
    "test_turns_a_hung_status_write_holds_one_thread_not_the_other_jobs",
    "test_two_compiles_at_once_leave_one_whole_tree",
    "test_the_wheel_holds_code_and_schema_data",
    "test_losing_5000_replicas_with_their_own_limits_keeps_the_status_small",
})


def _where(item: pytest.Item) -> str:
    return Path(str(item.path)).resolve().relative_to(ROOT / "tests").as_posix() if str(item.path).startswith(str(ROOT / "tests")) else ""


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects anything
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first: set[tuple[str, str]] = set()
    for item in items:
        where = _where(item)
        if where.startswith(SLOW_PATHS):
            item.add_marker(pytest.mark.slow)
        if where.startswith(FIRST_INPUT_ONLY) and isinstance(item, pytest.Function) and hasattr(item, "callspec"):
            test = (where, item.originalname)
            if test in first:
                item.add_marker(pytest.mark.slow)
            else:
                first.add(test)
    items.sort(key=lambda item: getattr(item, "originalname", "") not in LONGEST_FIRST)  # stable: the rest keep their order


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per usable core and one more, since about a sixth of the suite's
    time is spent waiting on child processes and sockets (2 cores: 146 s with 2 workers, 128 s with 3)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def corpus_dir(name: str = "t9k") -> Path:
    """A corpus folder, or skip the test when the shared corpus is not beside the project."""
    path = CORPUS / name
    if not path.is_dir():
        pytest.skip(corpus_absent(name))
    return path


def corpus_files(name: str = "t9k") -> list[Path]:
    """The corpus files (empty when absent: parametrize with corpus_params, which skips)."""
    path = CORPUS / name
    return sorted(path.glob("*.yaml")) if path.is_dir() else []


def corpus_absent(name: str = "t9k") -> str:
    """The reason a test that needs the corpus skips."""
    return f"the corpus {CORPUS / name} is absent (../shared/corpus beside the project, or FLATJOB_CORPUS)"


def corpus_params(files: list[Path], name: str = "t9k") -> list[Any]:
    """`files` to parametrize a test with, or one case that skips naming the missing corpus
    (pytest's own "got empty parameter set" names nothing)."""
    if files:
        return list(files)
    return [pytest.param(None, id="corpus-absent", marks=pytest.mark.skip(reason=corpus_absent(name)))]
