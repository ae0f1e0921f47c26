"""The run-local loop: the runtime's pure decisions over local pods, until the job finishes.

Every process event (a pod's containers started or ended) and every wake-up the decisions
ask for (back-off, deadline) runs one `reconcile` cycle with the in-memory ledger, then its
actions are applied here: release starts a pod's processes with the release annotations,
delete stops them (SIGTERM, SIGKILL after the grace period), create makes a new gated pod.
After the outcome every pod still running is stopped, whatever cleanUpPolicy says (it only
decides what a cluster keeps), and nothing of the run is left behind.
"""

from __future__ import annotations

import itertools
import queue
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..decisions import Action, Cycle, World, reconcile
from ..job import job_view
from ..model import Ledger
from .addresses import check_loopback
from .compiling import LocalJob
from .containers import Options, pod_launch, preflight
from .errors import EnvError
from .files import materialise
from .pods import LocalPod, ended, new_pod, pod_state, released, running, terminating
from .processes import PodRun, kill_marked
from .ssh import SSH_KINDS, SshRun
from .ssh import preflight as ssh_preflight
from .ssh import prepare as ssh_prepare
from .table import Screen, rows, title

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}
TICK_LIVE, TICK_PLAIN = 1.0, 30.0  # how often the table refreshes without any event
MAX_BUSY_CYCLES = 100  # cycles in a row without waiting: a bug guard, never reached normally


@dataclass(frozen=True)
class Settings:
    """run-local's own knobs (the job's behaviour comes from the job)."""

    timeout: float | None = None  # give up after this many seconds (exit 1)
    backoff_scale: float = 1.0  # multiply the runtime's restart back-off (1 = as in a cluster)
    options: Options = field(default_factory=Options)


def scale_backoff(before: Ledger, after: Ledger, now: float, scale: float) -> Ledger:
    """Shorten (or lengthen) back-offs the last cycle just set, leaving older ones alone."""
    if scale == 1.0:
        return after
    fresh = {k: v for k, v in after.not_before.items() if before.not_before.get(k) != v and v > now}
    if not fresh:
        return after
    return after.evolve(not_before={**after.not_before, **{k: now + (v - now) * scale for k, v in fresh.items()}})


class Runner:
    """Runs one compiled job on this machine."""

    def __init__(self, job: LocalJob, settings: Settings, screen: Screen, clock: Callable[[], float] = time.time):
        self.job = job
        self.settings = settings
        self.screen = screen
        self.clock = clock
        self.view = job_view(job.record)
        self.token = uuid.uuid4().hex[:12]
        self.manifests = {m["metadata"]["name"]: m for m in job.pods}
        self.addresses = {p.name: p.address for p in job.plan.pods}
        self._uids = (f"{self.token}-{n}" for n in itertools.count())
        self.pods: dict[str, LocalPod] = {name: new_pod(m, next(self._uids)) for name, m in self.manifests.items()}
        self.runs: dict[str, PodRun] = {}  # uid -> running pod
        self.ledger = Ledger()
        self.status: dict[str, Any] = {}
        self.events: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        self.folder = Path(tempfile.mkdtemp(prefix=f"flatjob-{job.name}-"))
        self.started = clock()
        self.wake: float | None = None
        self.why: str | None = None  # what the runtime waits for (the table's title says it)
        self.signals = 0
        self.last_signal: int = signal.SIGINT
        self.stopping = False  # after the outcome or a signal: ended pods stay in the table
        self.incarnations: dict[str, int] = {}
        self.ssh: SshRun | None = None  # SSH kinds: key pair, host keys, per-pod sshd folders

    # --- the loop -----------------------------------------------------------------------------
    def run(self) -> int:
        """Run the job to its outcome; the exit status of `flatjob run-local`."""
        previous = self._trap_signals()
        try:
            self._preflight()
            materialise(self.job.files, self.folder / "config")
            if self.job.kind in SSH_KINDS:
                ssh = self.job.plan.job.spec.ssh
                self.ssh = ssh_prepare(self.folder / "pods", self.job.record, self.job.plan.ssh_secret or "", self.job.files, ssh.auth_mount_path, self.settings.options.base_env.get("PATH", ""))
            return self._loop()
        finally:
            self._kill_everything()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            shutil.rmtree(self.folder, ignore_errors=True)

    def _preflight(self) -> None:
        check_loopback(self.addresses.values())
        training = {p.name: p.container for p in self.view.pods}
        errors, warnings = preflight(list(self.manifests.values()), training, self.settings.options)
        if self.job.kind in SSH_KINDS:
            errors += ssh_preflight(self.job.kind, self.job.plan.job.spec.ssh.sshd_path, self.settings.options.base_env)
        for w in warnings:
            self.screen.note(f"warning: {w}")
        if errors:
            raise EnvError("cannot run this job here:\n  " + "\n  ".join(errors))

    def _loop(self) -> int:
        deadline = self.started + self.settings.timeout if self.settings.timeout else None
        busy = 0
        dirty = True
        while True:
            if dirty:
                dirty = self._cycle()
                busy = busy + 1 if dirty else 0
                if self.ledger.outcome is not None:
                    return self._finish()
                if busy < MAX_BUSY_CYCLES and dirty:
                    continue
            self._show()
            now = self.clock()
            times = [t for t in (self.wake, deadline) if t is not None]
            wait = min([TICK_LIVE if self.screen.live else TICK_PLAIN, *(t - now for t in times)])
            dirty = self._take_events(max(wait, 0.0))
            if self.signals:
                return self._stop_all(f"stopping on {'Ctrl-C' if self.last_signal == signal.SIGINT else 'SIGTERM'}", EXIT_SIGNAL[self.last_signal])
            now = self.clock()
            if deadline is not None and now >= deadline:
                return self._stop_all(f"gave up after {self.settings.timeout:g}s (--timeout); the job had not finished", EXIT_FAILED)
            dirty = dirty or (self.wake is not None and now >= self.wake)

    def _cycle(self) -> bool:
        """One reconcile cycle and its actions; True when something changed that needs another."""
        now = self.clock()
        states = {name: pod_state(p) for name, p in self.pods.items()}
        cycle: Cycle = reconcile(self.view, states, self.ledger, World(), self.status or None, now)
        ledger = scale_backoff(self.ledger, cycle.ledger, now, self.settings.backoff_scale)
        rescaled = ledger is not cycle.ledger
        wake = cycle.wake_at if cycle.wake_at is None or cycle.wake_at > now else None  # a past wake-up is this cycle
        self.ledger, self.status, self.wake, self.why = ledger, cycle.status, wake, cycle.wait
        for _etype, reason, message in cycle.events:
            self.screen.note(f"{reason}: {message}")
        changed = [self._act(a) for a in cycle.actions]
        return rescaled or any(changed)

    def _act(self, action: Action) -> bool:
        """Apply one action to the local pods; True when it changed anything."""
        pod = self.pods.get(action.name)
        if action.kind == "create" and pod is None:
            self.incarnations[action.name] = self.incarnations.get(action.name, 0) + 1
            self.pods[action.name] = new_pod(self.manifests[action.name], next(self._uids), self.incarnations[action.name])
            return True
        if pod is None or (action.uid is not None and pod.uid != action.uid):
            return False
        if action.kind == "release" and pod.gated:
            self.pods[action.name] = released(pod, action.annotations)
            self._start(self.pods[action.name])
            return True
        if action.kind == "delete" and not pod.deleting:
            run = self.runs.get(pod.uid)
            if run is None:
                del self.pods[action.name]
            else:
                self.pods[action.name] = terminating(pod)
                run.stop()
            return True
        return False

    def _start(self, pod: LocalPod) -> None:
        spec = self.view.pod(pod.name)
        manifest, address = self.manifests[pod.name], self.addresses[pod.name]
        extra = self.ssh.pod(pod.name, pod.uid, manifest, address) if self.ssh else None
        launch = pod_launch(
            manifest, pod.uid, address, pod.annotations, spec.container if spec else None,
            self.settings.options, self.folder / "config", f"{self.token}/{pod.name}/{pod.uid}", self.job.files, extra,
        )
        run = PodRun(launch, self.screen.log, lambda event, uid, payload: self.events.put((event, uid, payload)))
        self.runs[pod.uid] = run
        run.start()

    def _take_events(self, timeout: float) -> bool:
        """Wait up to `timeout` for process events, apply all that arrived; True if any did."""
        try:
            first = self.events.get(timeout=timeout)
        except queue.Empty:
            return False
        batch = [first]
        while True:
            try:
                batch.append(self.events.get_nowait())
            except queue.Empty:
                break
        for event, uid, payload in batch:
            self._on_event(event, uid, payload)
        return True

    def _on_event(self, event: str, uid: Any, payload: Any) -> None:
        if event == "signal":
            self.signals += 1
            self.last_signal = uid
            if self.signals > 1:
                self.screen.note("killing every process now")
                for run in list(self.runs.values()):
                    run.kill()
            return
        name = next((n for n, p in self.pods.items() if p.uid == uid), None)
        if event == "ended":
            self.runs.pop(uid, None)
        if name is None:
            return
        pod = self.pods[name]
        if event == "running":
            self.pods[name] = running(pod, payload)
        elif event == "ended" and pod.deleting and not self.stopping:
            del self.pods[name]
        elif event == "ended":
            self.pods[name] = ended(pod, payload)

    # --- the end ------------------------------------------------------------------------------
    def _show(self) -> None:
        if self.status:
            head = title(self.job.kind, self.job.name, self.status, self.clock() - self.started, self.why)
            self.screen.table(head, rows(self.status, self.pods, self.addresses))

    def _finish(self) -> int:
        outcome, message = self.ledger.outcome, self.ledger.message
        code = self._stop_all(None, EXIT_SUCCEEDED if outcome == "Succeeded" else EXIT_FAILED)
        if code in EXIT_SIGNAL.values():
            return code
        elapsed = self.clock() - self.started
        if outcome == "Succeeded":
            self.screen.note(f"{self.job.kind} {self.job.name} Succeeded in {elapsed:.1f}s")
        else:
            self.screen.note(f"{self.job.kind} {self.job.name} Failed ({self.ledger.reason}) after {elapsed:.1f}s: {message}")
        return EXIT_SUCCEEDED if outcome == "Succeeded" else EXIT_FAILED

    def _stop_all(self, why: str | None, code: int) -> int:
        """Stop every pod still running and wait for it (a second signal kills at once)."""
        self.stopping = True
        if why:
            self.screen.note(why + (" (Ctrl-C again to kill now)" if self.runs else ""))
        for uid, run in list(self.runs.items()):
            name = next((n for n, p in self.pods.items() if p.uid == uid), None)
            if name is not None:
                self.pods[name] = terminating(self.pods[name])
            run.stop()
        signals = self.signals
        while self.runs:
            self._take_events(0.5)
        if self.status:
            head = title(self.job.kind, self.job.name, self.status, self.clock() - self.started, "stopped" if why else None)
            self.screen.final(head, rows(self.status, self.pods, self.addresses))
        if self.signals > signals and code == EXIT_SUCCEEDED:
            return EXIT_SIGNAL[self.last_signal]
        return code

    def _kill_everything(self) -> None:
        """Whatever happened, no process of this run survives it."""
        for run in list(self.runs.values()):
            run.kill()
        kill_marked(f"{self.token}/", whole=False, titled=(f"{self.folder}/",))

    def _trap_signals(self) -> dict[int, Any]:
        """SIGINT and SIGTERM become events; a helper thread queues them (no lock in a handler)."""
        def on_signal(signum: int, frame: Any) -> None:
            threading.Thread(target=self.events.put, args=(("signal", signum, None),), daemon=True).start()

        if threading.current_thread() is not threading.main_thread():
            return {}
        return {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
