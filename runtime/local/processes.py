"""Containers as local process trees: start, log, stop, and leave nothing running.

Every process of a container carries FLATJOB_LOCAL_MARK=<run>/<pod>/<uid>/<container> in
its environment, inherited by children of children (torchrun starts its workers in their
own sessions, so a process group is not enough).  A program that rewrites its environment
area for a process title (sshd) loses the mark: such processes are found by a string their
command line keeps (`titled`: the pod's sshd_config path).  When a container's main process exits,
whatever still carries its mark is killed, as the kernel kills a pid namespace whose init
exits, and so is whatever is still in its session (a process that dropped the mark); run-local
itself is a subreaper and, at its end, kills whatever is still below it (one that left both).
Stopping a pod is SIGTERM to each main process, then SIGKILL after the grace period.
Output (stdout and stderr together) goes line by line to a sink; the last lines are kept
for the termination message (terminationMessagePolicy FallbackToLogsOnError).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..sim.podstatus import Ended, Exited
from ..sim.timings import MIN_GRACE, Backoff, next_backoff, wait_left

MARK = "FLATJOB_LOCAL_MARK"
TAIL_LINES, TAIL_BYTES = 80, 2048  # the kubelet's limits for a termination message from logs
START_ERROR = 128  # what container runtimes report for a command that cannot start
STOPPING = "the pod is being stopped"  # why a container was not started: the pod is stopping

Sink = Callable[[str, str], None]  # (label, line without newline)
Report = Callable[[str, str, object], None]  # (event, pod uid, payload)


def shell_code(returncode: int) -> int:
    """A Popen return code as a container exit code: death by signal N is 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def _environ_has(pid: str, entry: bytes, whole: bool) -> bool:
    try:
        data = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return any((e == entry) if whole else e.startswith(entry) for e in data.split(b"\0"))


def _cmdline_has(pid: str, needles: tuple[bytes, ...]) -> bool:
    try:
        data = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return any(n in data for n in needles)


def marked(mark: str, *, whole: bool = True, titled: tuple[str, ...] = ()) -> list[int]:
    """Pids of live processes carrying this mark (whole=False: any mark starting with it),
    or whose command line holds one of the `titled` strings."""
    entry = f"{MARK}={mark}".encode()
    needles = tuple(t.encode() for t in titled)
    return [int(p) for p in _pids() if _environ_has(p, entry, whole) or (needles and _cmdline_has(p, needles))]


def _pids() -> list[str]:
    """The live processes' pids (as /proc names them), this one left out."""
    me = os.getpid()
    try:
        return [p for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
    except OSError:
        return []


def _stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, session id) of a live process, from /proc/<pid>/stat."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
    try:
        return int(fields[1]), int(fields[3])
    except (IndexError, ValueError):
        return None


def _processes() -> dict[int, tuple[int, int]]:
    return {int(p): st for p in _pids() if (st := _stat(p)) is not None}


def in_sessions(sessions: set[int]) -> list[int]:
    """Pids of live processes in these sessions: a container's processes that dropped the mark
    (`env -u`, sudo's env_reset, `env -i`) but not its session (review of round 14)."""
    return [pid for pid, (_, sid) in _processes().items() if sid in sessions] if sessions else []


def descendants(root: int) -> list[int]:
    """Pids of every live process below `root`."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in _processes().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def become_subreaper() -> bool:
    """Orphans of this process's descendants become its children, not init's (Linux
    PR_SET_CHILD_SUBREAPER), so a process that left its container's mark and session is still
    found below run-local when it ends; False where the system has no such call."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _signal_all(pids: list[int], sig: int) -> int:
    count = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            count += 1
        except OSError:
            pass
    return count


def kill_marked(mark: str, sig: int = signal.SIGKILL, *, whole: bool = True, titled: tuple[str, ...] = (), sessions: set[int] | None = None) -> int:
    """Signal every process carrying the mark (or titled so, or in one of `sessions`); returns
    how many were signalled."""
    return _signal_all(sorted({*marked(mark, whole=whole, titled=titled), *in_sessions(sessions or set())}), sig)


def kill_descendants(sig: int = signal.SIGKILL) -> int:
    """Signal every process below this one (run-local's own process, once its run is over)."""
    return _signal_all(descendants(os.getpid()), sig)


@dataclass(frozen=True)
class Launch:
    """One container to run: its argv, environment and where its output goes."""

    container: str
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    label: str  # log prefix: the pod name, or pod/container for extra containers
    mark: str
    fallback_logs: bool = False  # terminationMessagePolicy FallbackToLogsOnError
    titled: tuple[str, ...] = ()  # command-line strings of its processes that lose the mark (sshd)


class Container:
    """A started container: its main process, its mark, and its log tail."""

    def __init__(self, launch: Launch, sink: Sink):
        self.launch = launch
        self.sink = sink
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Start the main process in its own session (raises OSError when it cannot start)."""
        env = {**self.launch.env, MARK: self.launch.mark}
        self.proc = subprocess.Popen(
            list(self.launch.argv), env=env, cwd=self.launch.cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"log {self.launch.label}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.tail.append(line)
            self.sink(self.launch.label, line)
        self.proc.stdout.close()

    def wait(self) -> int:
        """Wait for the main process; then kill what is left of the container; its exit code."""
        assert self.proc is not None
        code = shell_code(self.proc.wait())
        kill_marked(self.launch.mark, titled=self.launch.titled, sessions={self.proc.pid})  # its session: start_new_session
        if self._reader is not None:
            self._reader.join(timeout=5)
        return code

    def exits_by(self, deadline: float) -> bool:
        """Wait for the main process until `deadline` (time.monotonic()); True once it has exited."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            return False
        return True

    def terminate(self) -> None:
        """SIGTERM to the main process, as the kubelet sends it to a container's PID 1."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to every process of the container."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        kill_marked(self.launch.mark, titled=self.launch.titled)

    def message(self) -> str:
        """The termination message from the log: its last 80 lines, at most 2048 bytes."""
        text = "\n".join(self.tail)
        return text.encode()[-TAIL_BYTES:].decode("utf-8", "ignore")


@dataclass(frozen=True)
class PodLaunch:
    """Everything to run for one pod incarnation."""

    name: str
    uid: str
    init: tuple[Launch, ...]  # in order: each runs to completion, or (a sidecar) until it has started
    sidecars: tuple[Launch, ...]  # those init containers with restartPolicy Always: they run alongside
    main: tuple[Launch, ...]
    grace: float  # terminationGracePeriodSeconds


@dataclass
class Sidecar:
    """A native sidecar of a running pod: its instance now and the exit before it."""

    launch: Launch
    current: Container | str  # the instance now, or why it could not start
    restarts: int = 0
    last: Exited | None = None  # how the instance before `current` ended
    backoff: Backoff | None = None  # the kubelet's restart back-off, on time.monotonic()

    def news(self, exited: Exited | None = None) -> SidecarNews:
        return SidecarNews(self.launch.container, self.restarts, exited)


@dataclass(frozen=True)
class SidecarNews:
    """What the pod's status says of a sidecar: running again (`exited` None) or exited and
    waiting out its back-off, with its restart count (the kubelet keeps the exit before)."""

    container: str
    restarts: int
    exited: Exited | None = None


class PodRun:
    """Runs one pod's containers on a thread and reports "running" (the regular containers
    that started), "sidecar" (a SidecarNews: a native sidecar exited or started again) and
    "ended" (an Ended) for the pod's uid."""

    def __init__(self, launch: PodLaunch, sink: Sink, report: Report):
        self.launch = launch
        self.sink = sink
        self.report = report
        self._lock = threading.Lock()
        self._live: list[Container] = []
        self._stopping = False
        self._closed = False  # the regular containers have ended: no sidecar starts again
        self._closing = threading.Event()
        self._halt = threading.Event()  # stop() or kill() was called: a wait for a back-off ends
        self._deadline: float | None = None  # when the grace period of a stop ends (time.monotonic())
        self._timer: threading.Timer | None = None
        self.thread = threading.Thread(target=self._run, name=f"pod {launch.name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM to every running container but the sidecars, which stop after them
        (`_stop_sidecars`); SIGKILL to what is left of them after the grace period."""
        grace = self.launch.grace if grace is None else grace
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            self._deadline = time.monotonic() + grace
            live = [c for c in self._live if c.launch not in self.launch.sidecars]
        self._halt.set()
        for c in live:
            c.terminate()
        self._timer = threading.Timer(grace, lambda: [c.kill() for c in live])
        self._timer.daemon = True
        self._timer.start()

    def kill(self) -> None:
        """SIGKILL to every process of every container, now."""
        with self._lock:
            self._stopping = True
            live = list(self._live)
        self._halt.set()
        for c in live:
            c.kill()

    def _started(self, launch: Launch, again: Sidecar | None = None, exited: Exited | None = None) -> Container | str:
        """The started container, or why it could not start (STOPPING when the pod is stopping);
        `again`: the sidecar it starts anew after `exited` (a restart even when the new instance
        cannot start, as the kubelet counts a StartError), unless the pod is stopping or its
        regular containers have ended."""
        c = Container(launch, self.sink)
        with self._lock:
            if self._stopping or (again is not None and self._closed):
                return STOPPING
            try:
                c.start()
                self._live.append(c)
                now: Container | str = c
            except OSError as exc:
                now = f"cannot start {launch.argv[0]!r}: {exc.strerror or exc}"
                self.sink(launch.label, f"flatjob run-local: {now}")
            if again is not None:  # under the lock: _stop_sidecars sees this instance or none
                again.last, again.restarts, again.current = exited, again.restarts + 1, now
        return now

    def _run(self) -> None:
        try:
            how = self._run_pod()
        except Exception as exc:  # a bug here must still end the pod, or the pod runs for ever
            how = Ended((), error=f"flatjob run-local: {type(exc).__name__}: {exc}")
        finally:
            if self._timer is not None:
                self._timer.cancel()
        self.report("ended", self.launch.uid, how)

    def _run_pod(self) -> Ended:
        init: list[Exited] = []
        sidecars: list[Sidecar] = []
        for launch in self.launch.init:
            if launch in self.launch.sidecars:
                side = self._first_start(launch)
                if side is None:  # the pod was stopped before this sidecar could start
                    return self._ended_in_init(init, sidecars)
                sidecars.append(side)
                continue
            exited = _exited(launch, self._started(launch))
            init.append(exited)
            if exited.code != 0:
                return self._ended_in_init(init, sidecars)
        mains = [(m, self._started(m)) for m in self.launch.main]
        self.report("running", self.launch.uid, tuple(m.container for m, c in mains if isinstance(c, Container)))
        keepers = [threading.Thread(target=self._keep, args=(side,), name=f"sidecar {side.launch.label}", daemon=True) for side in sidecars]
        for k in keepers:
            k.start()
        containers = tuple(_exited(m, c) for m, c in mains)
        with self._lock:
            self._closed = True
        self._closing.set()
        stopped = self._stop_sidecars(sidecars)
        for k in keepers:
            k.join()
        return Ended(containers, tuple(init), stopped)

    def _first_start(self, launch: Launch) -> Sidecar | None:
        """A native sidecar, started: the kubelet starts the next init container, or the regular
        ones, only once it runs (kuberuntime_container.go computeInitContainerActions), so one that
        cannot start is tried again after the back-off (sim/timings.py) until it does, or the pod
        stops (None)."""
        side = Sidecar(launch, self._started(launch))
        while not isinstance(side.current, Container):
            if side.current == STOPPING:
                return None
            failed = time.monotonic()
            if self._halt.wait(wait_left(side.backoff, failed, failed)):
                return None
            side.backoff = next_backoff(side.backoff, failed, time.monotonic())
            self._started(launch, again=side, exited=_exited(launch, side.current))
        return side

    def _ended_in_init(self, init: list[Exited], sidecars: list[Sidecar]) -> Ended:
        """An init container failed (or the pod stopped) before the regular containers started:
        the sidecars already running stop, last first, and the pod ends with what ran."""
        with self._lock:
            self._closed = True
        self._closing.set()
        return Ended((), tuple(init), self._stop_sidecars(sidecars) if sidecars else ())

    def _keep(self, side: Sidecar) -> None:
        """A sidecar that exits, or cannot start, while the regular containers run is started
        again, whatever its code, at once the first time, then after the kubelet's back-off
        (sim/timings.py), for as long as the pod runs (the kubelet never gives up on one)."""
        while True:
            exited = _exited(side.launch, side.current)
            finished = time.monotonic()
            if self._closing.is_set() or self._stopping:
                return
            self.report("sidecar", self.launch.uid, side.news(exited))
            if self._closing.wait(wait_left(side.backoff, finished, time.monotonic())):
                return
            side.backoff = next_backoff(side.backoff, finished, time.monotonic())
            started = self._started(side.launch, again=side, exited=exited)
            if started == STOPPING:
                return
            if isinstance(started, Container):
                self.report("sidecar", self.launch.uid, side.news())

    def _stop_sidecars(self, sidecars: list[Sidecar]) -> tuple[Exited, ...]:
        """After the regular containers the sidecars stop last first, as a 1.29+ kubelet stops them
        (kuberuntime_termination_order.go): each gets SIGTERM once the one after it has exited;
        once the grace period is spent, the rest get it together, and SIGKILL after what was left
        of the grace, never under MIN_GRACE (kuberuntime_container.go killContainer)."""
        deadline = self._deadline if self._deadline is not None else time.monotonic() + self.launch.grace
        waiting = [side.current for side in reversed(sidecars) if isinstance(side.current, Container)]
        while waiting:
            c = waiting.pop(0)
            turn = time.monotonic()
            c.terminate()
            if c.exits_by(deadline):
                continue
            for later in waiting:
                later.terminate()
            told = time.monotonic()
            for late, by in [(c, max(deadline, turn + MIN_GRACE)), *((later, told + MIN_GRACE) for later in waiting)]:
                if not late.exits_by(by):
                    late.kill()
            break
        return tuple(replace(_exited(side.launch, side.current), restarts=side.restarts, last=side.last) for side in sidecars)


def _exited(launch: Launch, started: Container | str) -> Exited:
    """Wait for a started container (or take its start error): how it ended."""
    if not isinstance(started, Container):
        return Exited(launch.container, START_ERROR, "StartError", started)
    code = started.wait()
    message = started.message() if code and launch.fallback_logs else None
    return Exited(launch.container, code, "Completed" if code == 0 else "Error", message)
