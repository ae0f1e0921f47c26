"""`flatjob run-local` up to the moment it would start a process, for tests of hostile jobs.

run-local compiles the jobs (compile_local), then Runner.run checks them before anything starts
(Runner._preflight: loopback addresses, every container's env, command and files, sshd, the
store ports jobs would share).  `checks_only()` replaces Runner.run with those checks, so the
real command, with its exit codes, runs on fuzzed jobs without a cluster, a kubelet or a process.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from typing import Any


def _preflight_only(runner: Any) -> int:
    """Runner.run without the run: its checks, then exit 0; the block locks and the folder freed."""
    try:
        runner._preflight()
        return 0
    finally:
        for job in runner.jobs:
            if job.lock is not None:
                job.lock.close()
        shutil.rmtree(runner.folder, ignore_errors=True)


@contextlib.contextmanager
def checks_only() -> Iterator[None]:
    """Within it, `flatjob run-local` checks and plans but starts nothing."""
    from flatjob.runtime.local.runner import Runner

    real = Runner.run
    Runner.run = _preflight_only  # type: ignore[method-assign]
    try:
        yield
    finally:
        Runner.run = real  # type: ignore[method-assign]
