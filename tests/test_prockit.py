"""The suite's process hygiene (tests/prockit.py, wired in tests/conftest.py), on a real inner pytest.

Covers: a pytest started with SIGINT, SIGQUIT and SIGHUP ignored (as `nohup cmd &` starts it)
gives its children the default dispositions, so a launch script can trap SIGINT; a test that
leaves a process running, or orphans one, fails at teardown and the process is killed; a
test that cleans up passes.
"""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import prockit
import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent
MARK = "31337"  # `sleep 31337` identifies this file's processes

INNER_CONFTEST = f"""
import importlib.util, sys
sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("flatjob_conftest", {str(TESTS / "conftest.py")!r})
ours = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ours)
pytest_configure = ours.pytest_configure
pytest_sessionfinish = ours.pytest_sessionfinish
no_process_left_behind = ours.no_process_left_behind
"""

INNER_TESTS = f"""
import subprocess

def test_leaves_a_child():
    subprocess.Popen(["sleep", "{MARK}"])

def test_orphans_a_grandchild():
    subprocess.run(["sh", "-c", "sleep {MARK} >/dev/null 2>&1 &"], check=True)

def test_cleans_up():
    p = subprocess.Popen(["sleep", "{MARK}"])
    p.kill()
    p.wait()

def test_children_start_with_default_signals():
    ignored = subprocess.run(["sh", "-c", "grep SigIgn /proc/$$/status"], capture_output=True, text=True, check=True).stdout
    mask = int(ignored.split()[1], 16)
    assert mask & ((1 << 0) | (1 << 1) | (1 << 2)) == 0, ignored  # SIGHUP, SIGINT, SIGQUIT (bits 0-2)
"""


def _ours() -> list[prockit.Proc]:
    return [p for p in prockit.descendants(1) if f"sleep {MARK}" in p.cmd and p.state != "Z"]


@pytest.mark.slow  # an inner pytest run (3 s): run by .ci/run after the README command
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_inner_suite_started_like_nohup_in_the_background(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    start = textwrap.dedent(
        """
        import signal, sys, pytest
        for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
            signal.signal(s, signal.SIG_IGN)
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "test_inner.py"]))
        """
    )
    result = pytester.run(sys.executable, "-c", start, timeout=120)
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_leaves_a_child*", "*left processes running*", f"*sleep {MARK}*"])
    deadline = time.monotonic() + 5
    while _ours() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _ours() == [], "a process of the inner suite outlived it"
