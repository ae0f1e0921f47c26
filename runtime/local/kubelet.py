"""The kubelet of run-local: runs the pods the runtime releases as local processes.

Modelled on the test bed's kubelet stand-in (runtime/sim/kubelet.py), but it runs the real
commands (containers.py, processes.py).  It watches the API server's store in-process (a
listener wakes its thread after every pod write) and, for the pods of its namespace:
- binds a pod once its scheduling gates are gone (the scheduler's part: this machine is
  the only node), then starts its containers with the pod as stored: the runtime's
  annotations (attempt, restart count, resuming) reach FLATJOB_* through the downward API;
- writes Running (and Ready) once the regular containers have started, then Succeeded or
  Failed with every container's exit code, reason and termination message (podstatus.py);
- starts an exited native sidecar again after the kubelet's back-off (sim/timings.py), its
  exit, restart count and lastState in the status meanwhile, and stops the sidecars after the
  regular containers, last first (processes.py);
- on a deletion (deletionTimestamp) stops the processes, SIGTERM then SIGKILL after the
  deletion's grace period, writes their final status and removes the pod (grace 0, its UID
  as precondition), as the kubelet does;
- on shutdown (the job finished, Ctrl-C, --timeout) stops every pod the same way, like a node
  shutting down, and starts nothing more.
Status writes check the pod's UID first: a pod of the same name may be a new incarnation.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..api import ApiError
from ..sim import podstatus
from .processes import Ended, PodLaunch, PodRun, SidecarNews, Sink

Obj = dict[str, Any]
Launcher = Callable[[Obj], PodLaunch]  # a stored pod -> what to run for it (raises on a problem)
SAFETY_WAKE = 5.0  # seconds: the thread looks at the pods at least this often


@dataclass
class _Running:
    name: str
    run: PodRun
    started: float
    containers: tuple[str, ...] = ()  # the regular containers that started
    since: float | None = None  # when they started
    sidecars: dict[str, podstatus.ContainerLook] = field(default_factory=dict)  # native sidecars that exited once


def _sidecar_look(news: SidecarNews, before: podstatus.ContainerLook | None, since: float, now: float) -> podstatus.ContainerLook:
    """A sidecar in the pod's status, after `before` (its last look; the regular containers ran
    from `since`): its exit as its state while it waits out its back-off (restartPolicy Never,
    every pod flatjob renders: kubelet_pods.go convertToAPIContainerStatuses shows no
    CrashLoopBackOff), or running again since `now` with that exit as lastState; its restart
    count either way.  An exit is always reported before the start that follows it; an exit
    after an exit is a restart that could not start (StartError), the exit before it its
    lastState."""
    if news.exited is not None:
        if before is None:  # its first exit: it ran since the regular containers started
            started, last = since, None
        elif before.state == "running":
            started, last = before.started or since, before.last
        else:  # an exit after an exit: a restart that could not start
            started, last = now, replace(before, last=None)
        return replace(podstatus.ContainerLook.exited(news.exited, started, now), restarts=news.restarts, last=last)
    last = replace(before, last=None) if before is not None else None
    return podstatus.ContainerLook(news.container, "running", started=now, ready=True, restarts=news.restarts, last=last)


class LocalKubelet:
    """Binds, runs, reports and stops the job's pods on this machine."""

    def __init__(self, store: Any, fake: Any, namespace: str, addresses: Mapping[str, str], launch: Launcher, sink: Sink, clock: Callable[[], float] = time.time):
        self.store = store  # runtime.sim.apiserver.store.Store: the API server's storage
        self.fake = fake  # runtime.sim.cluster.FakeCluster over that store (bind, status, delete)
        self.namespace = namespace
        self.addresses = addresses
        self.launch = launch
        self.sink = sink
        self.clock = clock
        self.node = socket.gethostname()
        self.runs: dict[str, _Running] = {}  # pod uid -> its processes
        self._reports: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._shutdown = False
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="local kubelet", daemon=True)
        store.listeners.append(self._on_change)

    # --- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def shutdown(self) -> None:
        """Stop every pod (SIGTERM, SIGKILL after its grace period) and start no more."""
        self._shutdown = True
        self._wake.set()

    def kill(self) -> None:
        """SIGKILL every process of every pod, now (a second Ctrl-C)."""
        for r in list(self.runs.values()):
            r.run.kill()

    def wait_idle(self, timeout: float) -> bool:
        """After shutdown: whether every pod has ended and its status is written."""
        return self._idle.wait(timeout)

    def close(self) -> None:
        """Kill what still runs and end the thread."""
        self.kill()
        self._closed = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._on_change in self.store.listeners:
            self.store.listeners.remove(self._on_change)

    # --- the loop -----------------------------------------------------------------------------
    def _on_change(self, change: Any) -> None:
        if change.key == "pods" and change.namespace == self.namespace:
            self._wake.set()

    def _report(self, event: str, uid: str, payload: Any) -> None:
        """From a pod's thread: "running", "sidecar" or "ended"."""
        self._reports.put((event, uid, payload))
        self._wake.set()

    def _loop(self) -> None:
        while not self._closed:
            self._wake.wait(SAFETY_WAKE)
            self._wake.clear()
            try:
                self._step()
            except Exception as exc:  # a bug must not stop the kubelet: say it, look again soon
                self.sink("flatjob", f"run-local's kubelet: {type(exc).__name__}: {exc}")
                self._wake.set()
                time.sleep(1.0)

    def _step(self) -> None:
        while True:
            try:
                event, uid, payload = self._reports.get_nowait()
            except queue.Empty:
                break
            self._on_report(event, uid, payload)
        self._sync()
        if self._shutdown and not self.runs:
            self._idle.set()

    def _sync(self) -> None:
        """Act on every pod of the namespace as it is stored now."""
        with self.store.lock:
            pods = list(self.fake.pods(self.namespace).items())
        stored = {pod["metadata"]["uid"] for _, pod in pods}
        for uid in self.runs.keys() - stored:
            self.runs[uid].run.kill()  # removed at once (grace 0): a kubelet kills what is no longer its
        for name, pod in pods:
            meta = pod["metadata"]
            uid = meta["uid"]
            running = self.runs.get(uid)
            if self._shutdown and running is not None:
                running.run.stop()
            elif meta.get("deletionTimestamp") is not None:
                if running is None:
                    self._remove(name, uid)  # bound, never started or already ended
                else:
                    running.run.stop(float(meta.get("deletionGracePeriodSeconds") or 0))
            elif running is None and not self._shutdown and self._startable(pod):
                self._start(name, pod)

    @staticmethod
    def _startable(pod: Obj) -> bool:
        return (pod.get("status") or {}).get("phase", "Pending") == "Pending" and not pod["spec"].get("schedulingGates")

    # --- pods ---------------------------------------------------------------------------------
    def _start(self, name: str, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        if not pod["spec"].get("nodeName"):
            with self.store.lock:  # bind this incarnation only: the name may hold a new one now
                current = self.fake.pods(self.namespace).get(name)
                if current is None or current["metadata"]["uid"] != uid:
                    return  # deleted or replaced meanwhile: the next look decides
                try:
                    self.fake.bind_pod(self.namespace, name, self.node)  # the scheduler's part
                except ApiError:
                    return
        now = self.clock()
        try:
            launch = self.launch(pod)
        except Exception as exc:  # a pod that cannot run here ends Failed, it never hangs
            how = Ended((), error=f"flatjob run-local: {exc}")
            self._write(name, uid, lambda p: podstatus.ended(p, self._ip(name), how, now, now))
            return
        run = PodRun(launch, self.sink, self._report)
        self.runs[uid] = _Running(name, run, now)
        run.start()

    def _on_report(self, event: str, uid: str, payload: Any) -> None:
        running = self.runs.get(uid)
        if running is None:
            return
        name, now = running.name, self.clock()
        if event in ("running", "sidecar"):
            if event == "running":
                running.containers, running.since = tuple(payload), now
            else:
                since = now if running.since is None else running.since
                running.sidecars[payload.container] = _sidecar_look(payload, running.sidecars.get(payload.container), since, now)
            self._write(name, uid, lambda p: podstatus.running(p, self._ip(name), running.containers, running.started, now, running.sidecars, running.since))
            return
        del self.runs[uid]
        pod = self._write(name, uid, lambda p: podstatus.ended(p, self._ip(name), payload, running.started, now))
        if pod is not None and pod["metadata"].get("deletionTimestamp") is not None:
            self._remove(name, uid)

    def _ip(self, name: str) -> str:
        return self.addresses.get(name, "127.0.0.1")

    def _write(self, name: str, uid: str, status: Callable[[Obj], Obj]) -> Obj | None:
        """Write the status of this incarnation (none when the name holds another one now)."""
        with self.store.lock:
            pod = self.fake.pods(self.namespace).get(name)
            if pod is None or pod["metadata"]["uid"] != uid:
                return None
            try:
                self.fake.set_pod_status(self.namespace, name, status(pod))
            except ApiError as exc:
                self.sink(name, f"flatjob run-local: the pod's status could not be written: {exc}")
            return self.fake.pods(self.namespace).get(name)

    def _remove(self, name: str, uid: str) -> None:
        """Finish a deletion: grace 0, only this incarnation."""
        with contextlib.suppress(ApiError):  # gone already, or another incarnation holds the name
            self.fake.delete_pod(self.namespace, name, uid, grace_period_seconds=0)
