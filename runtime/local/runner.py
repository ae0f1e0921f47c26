"""One run of `flatjob run-local`: a cluster on this machine, the jobs in it, until they end.

The compiled jobs (one, or every job of a folder, all of one namespace) go into a local API
server (cluster.py), where the namespace's real runtime creates, releases, restarts and
finishes their pods over HTTP, exactly as in a cluster; one local kubelet (kubelet.py) runs
every pod as processes.  This module is what the user sees of it: it watches the API server
in-process (the records' status, the pods, the runtime's Events) and shows them (table.py)
until every record has an outcome, a signal arrives or --timeout expires.  Then the runtime
is stopped, the kubelet stops every pod still running, whatever cleanUpPolicy says (it only
decides what a cluster keeps), and nothing of the run is left behind: no process, no
thread, no temp folder.
"""

from __future__ import annotations

import logging
import queue
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flatjob.compiler import keys

from .addresses import check_loopback, shared_ports, store_ports
from .cluster import LocalCluster
from .compiling import LocalJob
from .containers import Options, pod_launch, preflight
from .errors import EnvError
from .files import materialise
from .kubelet import LocalKubelet
from .processes import PodLaunch, kill_marked
from .ssh import SSH_KINDS, SshRun, home_problems, launcher_home_problem, secret_data
from .ssh import preflight as ssh_preflight
from .ssh import prepare as ssh_prepare
from .table import RuntimeLog, Screen, Section, Seen, Shown, event_note, quiet_note, quiet_note_due

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}
TICK_LIVE, TICK_PLAIN = 1.0, 30.0  # how often the table refreshes without any event


@dataclass(frozen=True)
class Settings:
    """run-local's own knobs (the job's behaviour comes from the job)."""

    timeout: float | None = None  # give up after this many seconds (exit 1)
    backoff_scale: float = 1.0  # multiply the runtime's restart back-off (1 = as in a cluster)
    options: Options = field(default_factory=Options)


@dataclass
class Member:
    """One job of the run: what its pods get here, and what the table shows of it."""

    job: LocalJob
    shown: Shown
    config: Path  # its ConfigMap's files
    ssh: SshRun | None = None  # SSH kinds: its pods' sshd


class Runner:
    """Runs compiled jobs of one namespace on this machine, together, until each has its outcome."""

    def __init__(self, jobs: Sequence[LocalJob], settings: Settings, screen: Screen, clock: Callable[[], float] = time.time):
        self.jobs = tuple(jobs)
        self.namespace = self.jobs[0].namespace  # compile_local refuses jobs of several namespaces
        self.settings = settings
        self.screen = screen
        self.clock = clock
        self.token = uuid.uuid4().hex[:12]  # marks every process of this run
        self.folder = Path(tempfile.mkdtemp(prefix=f"flatjob-{self.jobs[0].name if len(self.jobs) == 1 else 'jobs'}-"))
        self.members = [
            Member(j, Shown(j.kind, j.name, j.training(), {p.name: p.address for p in j.plan.pods}), self.folder / "config" / j.name)
            for j in self.jobs
        ]
        self.by_pod = {pod: m for m in self.members for pod in m.shown.addresses}
        self.by_record = {(f"records/{keys.RECORD_PLURALS[m.job.kind]}", m.job.name): m for m in self.members}
        self.addresses = {pod: address for m in self.members for pod, address in m.shown.addresses.items()}
        self.several = len(self.jobs) > 1  # notes then name their job
        self.inbox: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        self.seen = Seen()
        self.event_counts: dict[str, int] = {}  # each runtime Event's count as last noted (event_note)
        self.started = clock()
        self.signals = 0
        self.stopping = False  # in _stop: a signal kills every process at once
        self.last_signal: int = signal.SIGINT
        self.cluster: LocalCluster | None = None
        self.kubelet: LocalKubelet | None = None
        self._quiet_notes = 0  # "nothing new" notes in a row
        self._quiet_noted: float | None = None  # the screen's last write when the last one was made

    # --- the run ------------------------------------------------------------------------------
    def run(self) -> int:
        """Run the jobs to their outcome; the exit status of `flatjob run-local`."""
        previous = self._trap_signals()
        log = logging.getLogger("flatjob.runtime")
        handler, propagate = RuntimeLog(self.screen), log.propagate
        log.addHandler(handler)
        log.propagate = False
        try:
            self._preflight()
            for m in self.members:
                materialise(m.job.files, m.config)
                if m.job.kind in SSH_KINDS:
                    mount = m.job.plan.job.spec.ssh.auth_mount_path
                    m.ssh = ssh_prepare(self.folder / "pods" / m.job.name, m.job.files, mount, self.settings.options.base_env.get("PATH", ""))
            self._start()
            return self._watch()
        finally:
            self._close()
            log.removeHandler(handler)
            log.propagate = propagate
            for signum, old in previous.items():
                signal.signal(signum, old)
            shutil.rmtree(self.folder, ignore_errors=True)

    def _preflight(self) -> None:
        check_loopback(self.addresses.values())
        errors: list[str] = []
        warnings: list[str] = []
        for m in self.members:
            found, said = preflight(list(m.job.pods), m.shown.training, self.settings.options)  # each names its pod
            errors += found
            warnings += said
            if m.job.kind in SSH_KINDS:  # the machine's: with several jobs, say whose
                missing = ssh_preflight(m.job.kind, m.job.plan.job.spec.ssh.sshd_path, self.settings.options.base_env)
                errors += home_problems(m.job.pods, m.shown.training, self.settings.options, m.job.plan.job.spec.ssh.auth_mount_path)  # each names its pod
                errors += [p for p in [launcher_home_problem(m.job.plan)] if p]  # names its job
                errors += [f"{m.job.name}: {e}" if self.several else e for e in missing]
        warnings += shared_ports({m.job.name: store_ports(m.job.pods, m.job.files) for m in self.members})
        for w in dict.fromkeys(warnings):
            self.screen.note(f"warning: {w}")
        if errors:
            hint = "\n(to run the others: --job NAME runs one job of PATH, or run a folder without these)" if self.several else ""
            raise EnvError(f"cannot run {'these jobs' if self.several else 'this job'} here:\n  " + "\n  ".join(dict.fromkeys(errors)) + hint)

    def _start(self) -> None:
        """The API server with the jobs' objects, the kubelet, then the runtime."""
        self.cluster = LocalCluster([o for j in self.jobs for o in j.objects], self.namespace, self.settings.backoff_scale)
        self.cluster.listen(self._on_change)
        for job in self.jobs:
            secret = job.plan.ssh_secret
            if secret and job.plan.ssh_secret_named:  # the job names its own Secret, which only a cluster has
                from ..sshkeys import ssh_secret

                self.cluster.apply(ssh_secret(secret, job.namespace, job.record))
        self.kubelet = LocalKubelet(self.cluster.store, self.cluster.fake, self.namespace, self.addresses, self._launch, self.screen.log)
        self.kubelet.start()
        self.cluster.start_runtime()

    def _launch(self, pod: dict[str, Any]) -> PodLaunch:
        """What the kubelet runs for a stored pod (its own annotations and UID)."""
        meta = pod["metadata"]
        name, uid = meta["name"], meta["uid"]
        m = self.by_pod[name]
        address = self.addresses[name]
        extra = None
        if m.ssh is not None and m.job.plan.ssh_secret:
            extra = m.ssh.pod(name, uid, pod, address, secret_data(self._stored("secrets", m.job.plan.ssh_secret)))
        return pod_launch(
            pod, uid, address, meta.get("annotations") or {}, m.shown.training.get(name),
            self.settings.options, m.config, f"{self.token}/{name}/{uid}", m.job.files, extra,
        )

    def _stored(self, resource: str, name: str) -> dict[str, Any]:
        assert self.cluster is not None
        return self.cluster.get(resource, name)

    # --- what the API server says -------------------------------------------------------------
    def _on_change(self, change: Any) -> None:
        """A store listener (any thread, under the store's lock): queue what this run shows."""
        if change.namespace == self.namespace and (change.key in ("pods", "events") or change.key.startswith("records/")):
            self.inbox.put(("change", change, None))

    def _take(self, timeout: float) -> None:
        """Wait up to `timeout` for news, then take in everything that arrived."""
        try:
            item = self.inbox.get(timeout=timeout) if timeout > 0 else self.inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            self._apply(*item)
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return

    def _apply(self, what: str, change: Any, _: Any) -> None:
        if what == "signal":
            self.signals += 1
            self.last_signal = change
            if (self.signals > 1 or self.stopping) and self.kubelet is not None:
                self.screen.note("killing every process now")
                self.kubelet.kill()
            return
        obj = change.obj
        if change.key == "pods":
            self.seen.apply(change.type, obj)
        elif change.key == "events":
            note = event_note(change.type, obj, self.event_counts)
            if note is not None:
                job = f"{(obj.get('involvedObject') or {}).get('name')}: " if self.several else ""
                self.screen.note(f"{job}{note}")
        elif change.type != "DELETED":
            m = self.by_record.get((change.key, (obj.get("metadata") or {}).get("name")))
            if m is not None:
                m.shown.saw(obj.get("status") or {}, self.clock() - self.started)

    def _watch(self) -> int:
        deadline = self.started + self.settings.timeout if self.settings.timeout else None
        while True:
            now = self.clock()
            wait = TICK_LIVE if self.screen.live else TICK_PLAIN
            self._take(min(wait, deadline - now) if deadline is not None else wait)
            if self.signals:
                return self._stop(f"stopping on {'Ctrl-C' if self.last_signal == signal.SIGINT else 'SIGTERM'}", EXIT_SIGNAL[self.last_signal])
            if all(m.shown.outcome for m in self.members):
                return self._finish()
            if deadline is not None and self.clock() >= deadline:
                return self._stop(f"gave up after {self.settings.timeout:g}s (--timeout); {self._unfinished()} had not finished", EXIT_FAILED)
            self._show()
            self._say_still_running()

    def _say_still_running(self) -> None:
        """In a log (no terminal redraws the table), a run with nothing new says what it waits on."""
        quiet = time.monotonic() - self.screen.written
        if self.screen.written != self._quiet_noted:
            self._quiet_notes = 0  # something else was printed since the last note
        if self.screen.live or not quiet_note_due(quiet, self._quiet_notes):
            return
        self.screen.note(quiet_note(self._sections(), quiet))
        self._quiet_notes += 1
        self._quiet_noted = self.screen.written

    # --- the end ------------------------------------------------------------------------------
    def _unfinished(self) -> str:
        if not self.several:
            return "the job"
        return ", ".join(f"{m.job.kind} {m.job.name}" for m in self.members if not m.shown.outcome)

    def _sections(self, stopped: bool = False) -> list[Section]:
        """The table: each job the runtime has written a status for, in the order compiled."""
        elapsed = self.clock() - self.started
        return [m.shown.section(self.seen, elapsed, stopped) for m in self.members if m.shown.status]

    def _show(self) -> None:
        sections = self._sections()
        if sections:
            self.screen.table(sections)

    def _finish(self) -> int:
        failed = [m for m in self.members if m.shown.outcome != "Succeeded"]
        code = self._stop(None, EXIT_FAILED if failed else EXIT_SUCCEEDED)
        if code in EXIT_SIGNAL.values():
            return code
        for m in self.members:
            self.screen.note(m.shown.verdict())
        if self.several:
            self.screen.note(f"{len(self.members) - len(failed)} of {len(self.members)} jobs Succeeded" + (f"; Failed: {', '.join(m.job.name for m in failed)}" if failed else ""))
        return code

    def _stop(self, why: str | None, code: int) -> int:
        """Stop the runtime, then every pod still running, and wait for them (a second signal
        kills at once); print the final table.  At the end of the jobs (no `why`) the runtime
        is stopped and what it wrote taken in before the stop line: the cycle that wrote the
        last status writes that job's Events after it (Failed, PhaseFailed, ReplicaFailed),
        which printed below 'stopping the pods still running' as if they came of the stop."""
        assert self.cluster is not None and self.kubelet is not None
        signals = self.signals
        if why is None:
            self.cluster.stop_runtime()  # after its current cycle: every write of it is in the inbox
            self._take(0)
        busy = any(p in self.seen.present and (self.seen.pods[p].get("status") or {}).get("phase") == "Running" for p in self.seen.pods)
        if why or busy:
            self.screen.note((why or "stopping the pods still running") + ((" (Ctrl-C again to kill now)" if self.signals else " (Ctrl-C to kill now)") if busy else ""))
        self.stopping = True  # from here a signal kills at once
        if why is not None:
            self.cluster.stop_runtime()
        self.kubelet.shutdown()
        while not self.kubelet.wait_idle(0.02):
            self._take(0)
        self._take(0)
        sections = self._sections(stopped=why is not None)
        if sections:
            self.screen.final(sections)
        if self.signals > signals and code == EXIT_SUCCEEDED:
            return EXIT_SIGNAL[self.last_signal]
        return code

    def _close(self) -> None:
        """Whatever happened, no process, thread or server of this run survives it."""
        if self.kubelet is not None:
            self.kubelet.close()
        if self.cluster is not None:
            self.cluster.close()
        for m in self.members:
            if m.ssh is not None:
                m.ssh.close()
        kill_marked(f"{self.token}/", whole=False, titled=(f"{self.folder}/",))

    def _trap_signals(self) -> dict[int, Any]:
        """SIGINT and SIGTERM become inbox items; a helper thread queues them (no lock in a handler)."""
        def on_signal(signum: int, frame: Any) -> None:
            threading.Thread(target=self.inbox.put, args=(("signal", signum, None),), daemon=True).start()

        if threading.current_thread() is not threading.main_thread():
            return {}
        return {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
