"""Keep the test suite independent of how it is started, and clean of stray processes.

- `reset_signals()`: a shell starts `cmd &` with SIGINT and SIGQUIT ignored, `nohup` with
  SIGHUP ignored, and an ignored signal stays ignored across exec: a launch script under
  test could then not trap SIGINT (POSIX sh cannot trap what was ignored on entry).  Each
  ignored signal gets a handler that does nothing instead: pytest itself still ignores it,
  and every child starts with the default (exec resets handled signals).
- `Watch`: the processes a test leaves behind.  pytest becomes a child subreaper (Linux),
  so what a test's processes orphan stays its descendant; the processes started from the
  test on are found by their start time, waited for briefly, then killed, and the test fails.
  Only tests that started a process through `subprocess` pay for the look (one pass over
  /proc, a few milliseconds).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

_STARTABLE_IGNORED = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTSTP", "SIGTTIN", "SIGTTOU")
_PR_SET_CHILD_SUBREAPER = 36
_TICKS = os.sysconf("SC_CLK_TCK")
# Seconds a test's processes get to exit after its teardown: a safety time-out, waited only
# while one still runs (a passing test's are gone or go within milliseconds; 1 s was within
# reach of a process ending on a loaded machine), never by a test whose processes are gone.
GRACE = 10.0

spawned = 0  # processes started through subprocess in this pytest process


def reset_signals() -> None:
    """Replace every ignored signal disposition by a handler that does nothing (see above)."""
    for name in _STARTABLE_IGNORED:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, _ignore)
    if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:  # would reap children for subprocess
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def _ignore(signum: int, frame: object) -> None:
    """A handled signal that does nothing: pytest ignores it, its children do not."""


def count_spawns() -> None:
    """Count processes started through subprocess (wraps Popen._execute_child once)."""
    original = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    if getattr(original, "_counted", False):
        return

    def execute_child(self: subprocess.Popen[object], *args: object, **kwargs: object) -> None:
        global spawned
        spawned += 1
        original(self, *args, **kwargs)

    execute_child._counted = True  # type: ignore[attr-defined]
    subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]


def become_subreaper() -> bool:
    """Orphans of pytest's descendants come back to pytest instead of init (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    start: int  # clock ticks after boot
    cmd: str


def _table() -> dict[int, Proc]:
    """Every process, from /proc (none where there is no /proc: the check is Linux's)."""
    out: dict[int, Proc] = {}
    if not os.path.isdir("/proc/self"):
        return out
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        out[int(name)] = Proc(int(name), int(fields[1]), fields[0].decode(), int(fields[19]), cmd[:200])
    return out


def descendants(root: int = 0) -> list[Proc]:
    """Every process below `root` (default: this one)."""
    table = _table()
    children: dict[int, list[int]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = [], list(children.get(root or os.getpid(), []))
    while todo:
        pid = todo.pop()
        if pid in table:
            out.append(table[pid])
            todo.extend(children.get(pid, []))
    return out


def now_ticks() -> int:
    """The current time in the unit of a process's start time (clock ticks after boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS)


def _reap(procs: list[Proc]) -> None:
    for p in procs:
        if p.state == "Z" and p.ppid == os.getpid():
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(p.pid, os.WNOHANG)


class Watch:
    """One test's window: what it started, and what of that is still running at the end."""

    def __init__(self) -> None:
        self.start = now_ticks()
        self.spawned = spawned

    def leftovers(self) -> list[Proc]:
        """The test's processes still running after GRACE seconds (their zombies are reaped)."""
        if spawned == self.spawned:
            return []
        deadline = time.monotonic() + GRACE
        while True:
            found = [p for p in descendants() if p.start >= self.start]
            _reap(found)
            alive = [p for p in found if p.state != "Z"]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.05)


def kill(procs: list[Proc]) -> None:
    """SIGKILL each process (children first: they are listed after their parents)."""
    for p in reversed(procs):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, signal.SIGKILL)
    time.sleep(0.05)
    _reap(descendants())


def describe(procs: list[Proc]) -> Iterator[str]:
    for p in procs:
        yield f"pid {p.pid}: {p.cmd or '?'}"
