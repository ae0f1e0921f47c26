"""One run of `flatjob run-local`: a cluster on this machine, the job in it, until it ends.

The compiled job goes into a local API server (cluster.py), where the job's real runtime
creates, releases, restarts and finishes its pods over HTTP, exactly as in a cluster; the
local kubelet (kubelet.py) runs them as processes.  This module is what the user sees of it:
it watches the API server in-process (the record's status, the pods, the runtime's Events)
and shows them (table.py) until the record has an outcome, a signal arrives or --timeout
expires.  Then the runtime is stopped, the kubelet stops every pod still running, whatever
cleanUpPolicy says (it only decides what a cluster keeps), and nothing of the run is left
behind: no process, no thread, no temp folder.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flatjob.compiler import keys

from ..model import Ledger
from .addresses import check_loopback
from .cluster import LocalCluster
from .compiling import LocalJob
from .containers import Options, pod_launch, preflight
from .errors import EnvError
from .files import materialise
from .kubelet import LocalKubelet
from .processes import PodLaunch, kill_marked
from .ssh import SSH_KINDS, SshRun, secret_data
from .ssh import preflight as ssh_preflight
from .ssh import prepare as ssh_prepare
from .table import RuntimeLog, Screen, Seen, rows, title

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}
TICK_LIVE, TICK_PLAIN = 1.0, 30.0  # how often the table refreshes without any event


@dataclass(frozen=True)
class Settings:
    """run-local's own knobs (the job's behaviour comes from the job)."""

    timeout: float | None = None  # give up after this many seconds (exit 1)
    backoff_scale: float = 1.0  # multiply the runtime's restart back-off (1 = as in a cluster)
    options: Options = field(default_factory=Options)


class Runner:
    """Runs one compiled job on this machine."""

    def __init__(self, job: LocalJob, settings: Settings, screen: Screen, clock: Callable[[], float] = time.time):
        self.job = job
        self.settings = settings
        self.screen = screen
        self.clock = clock
        self.token = uuid.uuid4().hex[:12]  # marks every process of this run
        self.addresses = {p.name: p.address for p in job.plan.pods}
        self.training = job.training()
        self.folder = Path(tempfile.mkdtemp(prefix=f"flatjob-{job.name}-"))
        self.inbox: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        self.seen = Seen()
        self.status: dict[str, Any] = {}
        self.started = clock()
        self.signals = 0
        self.stopping = False  # in _stop: a signal kills every process at once
        self.last_signal: int = signal.SIGINT
        self.ssh: SshRun | None = None
        self.cluster: LocalCluster | None = None
        self.kubelet: LocalKubelet | None = None
        self.record_key = f"records/{keys.RECORD_PLURALS[job.kind]}"

    # --- the run ------------------------------------------------------------------------------
    def run(self) -> int:
        """Run the job to its outcome; the exit status of `flatjob run-local`."""
        previous = self._trap_signals()
        log = logging.getLogger("flatjob.runtime")
        handler, propagate = RuntimeLog(self.screen), log.propagate
        log.addHandler(handler)
        log.propagate = False
        try:
            self._preflight()
            materialise(self.job.files, self.folder / "config")
            if self.job.kind in SSH_KINDS:
                mount = self.job.plan.job.spec.ssh.auth_mount_path
                self.ssh = ssh_prepare(self.folder / "pods", self.job.files, mount, self.settings.options.base_env.get("PATH", ""))
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
        errors, warnings = preflight(list(self.job.pods), self.training, self.settings.options)
        if self.job.kind in SSH_KINDS:
            errors += ssh_preflight(self.job.kind, self.job.plan.job.spec.ssh.sshd_path, self.settings.options.base_env)
        for w in warnings:
            self.screen.note(f"warning: {w}")
        if errors:
            raise EnvError("cannot run this job here:\n  " + "\n  ".join(errors))

    def _start(self) -> None:
        """The API server with the job's objects, the kubelet, then the runtime."""
        job = self.job
        self.cluster = LocalCluster(job.objects, job.kind, job.name, job.namespace, self.settings.backoff_scale)
        self.cluster.listen(self._on_change)
        secret = job.plan.ssh_secret
        if secret and secret != f"{job.name}-ssh":  # the job names its own Secret, which only a cluster has
            from ..sshkeys import ssh_secret

            self.cluster.apply(ssh_secret(secret, job.namespace, job.record))
        self.kubelet = LocalKubelet(self.cluster.store, self.cluster.fake, job.namespace, self.addresses, self._launch, self.screen.log)
        self.kubelet.start()
        self.cluster.start_runtime()

    def _launch(self, pod: dict[str, Any]) -> PodLaunch:
        """What the kubelet runs for a stored pod (its own annotations and UID)."""
        meta = pod["metadata"]
        name, uid = meta["name"], meta["uid"]
        address = self.addresses[name]
        extra = None
        if self.ssh is not None and self.job.plan.ssh_secret:
            extra = self.ssh.pod(name, uid, pod, address, secret_data(self._stored("secrets", self.job.plan.ssh_secret)))
        return pod_launch(
            pod, uid, address, meta.get("annotations") or {}, self.training.get(name),
            self.settings.options, self.folder / "config", f"{self.token}/{name}/{uid}", self.job.files, extra,
        )

    def _stored(self, resource: str, name: str) -> dict[str, Any]:
        assert self.cluster is not None
        return self.cluster.get(resource, name)

    # --- what the API server says -------------------------------------------------------------
    def _on_change(self, change: Any) -> None:
        """A store listener (any thread, under the store's lock): queue what this run shows."""
        if change.namespace == self.job.namespace and (change.key in ("pods", "events") or change.key == self.record_key):
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
            if change.type == "ADDED":
                self.screen.note(f"{obj.get('reason')}: {obj.get('message')}")
        elif (obj.get("metadata") or {}).get("name") == self.job.name and change.type != "DELETED":
            self.status = obj.get("status") or {}

    def _watch(self) -> int:
        deadline = self.started + self.settings.timeout if self.settings.timeout else None
        while True:
            now = self.clock()
            wait = TICK_LIVE if self.screen.live else TICK_PLAIN
            self._take(min(wait, deadline - now) if deadline is not None else wait)
            if self.signals:
                return self._stop(f"stopping on {'Ctrl-C' if self.last_signal == signal.SIGINT else 'SIGTERM'}", EXIT_SIGNAL[self.last_signal])
            if self.status.get("phase") in ("Succeeded", "Failed"):
                return self._finish()
            if deadline is not None and self.clock() >= deadline:
                return self._stop(f"gave up after {self.settings.timeout:g}s (--timeout); the job had not finished", EXIT_FAILED)
            self._show()

    # --- the end ------------------------------------------------------------------------------
    def _show(self) -> None:
        if self.status:
            head = title(self.job.kind, self.job.name, self.status, self.clock() - self.started)
            self.screen.table(head, rows(self.status, self.seen, self.training, self.addresses))

    def _finish(self) -> int:
        ledger = Ledger.from_dict(self.status.get("runtime"))
        succeeded = self.status.get("phase") == "Succeeded"
        code = self._stop(None, EXIT_SUCCEEDED if succeeded else EXIT_FAILED)
        if code in EXIT_SIGNAL.values():
            return code
        elapsed = self.clock() - self.started
        if succeeded:
            self.screen.note(f"{self.job.kind} {self.job.name} Succeeded in {elapsed:.1f}s")
        else:
            self.screen.note(f"{self.job.kind} {self.job.name} Failed ({ledger.reason}) after {elapsed:.1f}s: {ledger.message}")
        return code

    def _stop(self, why: str | None, code: int) -> int:
        """Stop the runtime, then every pod still running, and wait for them (a second signal
        kills at once); print the final table."""
        assert self.cluster is not None and self.kubelet is not None
        busy = any(p in self.seen.present and (self.seen.pods[p].get("status") or {}).get("phase") == "Running" for p in self.seen.pods)
        if why or busy:
            self.screen.note((why or "stopping the pods still running") + ((" (Ctrl-C again to kill now)" if self.signals else " (Ctrl-C to kill now)") if busy else ""))
        signals = self.signals
        self.stopping = True  # from here a signal kills at once
        self.cluster.stop_runtime()
        self.kubelet.shutdown()
        while not self.kubelet.wait_idle(0.02):
            self._take(0)
        self._take(0)
        if self.status:
            head = title(self.job.kind, self.job.name, self.status, self.clock() - self.started)
            self.screen.final(head + (" (stopped)" if why else ""), rows(self.status, self.seen, self.training, self.addresses))
        if self.signals > signals and code == EXIT_SUCCEEDED:
            return EXIT_SIGNAL[self.last_signal]
        return code

    def _close(self) -> None:
        """Whatever happened, no process, thread or server of this run survives it."""
        if self.kubelet is not None:
            self.kubelet.close()
        if self.cluster is not None:
            self.cluster.close()
        if self.ssh is not None:
            self.ssh.close()
        kill_marked(f"{self.token}/", whole=False, titled=(f"{self.folder}/",))

    def _trap_signals(self) -> dict[int, Any]:
        """SIGINT and SIGTERM become inbox items; a helper thread queues them (no lock in a handler)."""
        def on_signal(signum: int, frame: Any) -> None:
            threading.Thread(target=self.inbox.put, args=(("signal", signum, None),), daemon=True).start()

        if threading.current_thread() is not threading.main_thread():
            return {}
        return {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
