"""A pod's status as a kubelet writes it, from what its local processes did (pure).

The local kubelet writes these documents into the API server's store: Running (and Ready:
probes are not run, a pod is Ready once its containers run) when the regular containers
have started, then Succeeded or Failed with every container's exit code, reason and
termination message when they have ended.  The runtime reads them exactly as it reads a
cluster's (runtime/observe.py): the training container's exit code, torchrun's failure
summary in its termination message, a failed init container.  Containers that run-local
does not run (`--only-training`) are left out of containerStatuses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .apiserver.clock import stamp

HOST_IP = "127.0.0.1"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Exited:
    """How one container ended, as a container runtime reports it."""

    container: str
    code: int  # 128+N for a death by signal N; 128 for a command that could not start
    reason: str  # Completed | Error | StartError
    message: str | None = None  # termination message (FallbackToLogsOnError: the log's tail)


@dataclass(frozen=True)
class Ended:
    """How a pod's containers ended: what the kubelet turns into the pod's final status."""

    containers: tuple[Exited, ...]  # the regular containers that ran, in spec order
    init: tuple[Exited, ...] = ()  # init containers run to completion; a failed one is the last
    sidecars: tuple[Exited, ...] = ()  # native sidecars, stopped after the regular containers
    error: str | None = None  # run-local could not run the pod at all (a bug: it still ends)

    @property
    def init_failed(self) -> Exited | None:
        return next((c for c in self.init if c.code != 0), None)

    @property
    def phase(self) -> str:
        """Succeeded when every regular container exited 0 (sidecars' codes do not count)."""
        ok = self.error is None and self.init_failed is None and bool(self.containers) and all(c.code == 0 for c in self.containers)
        return "Succeeded" if ok else "Failed"


def _conditions(pod: Obj, ready: bool, initialized: bool, running: bool, now: str) -> list[Obj]:
    """The kubelet's pod conditions; PodScheduled stays as the binding wrote it."""
    def cond(ctype: str, ok: bool, reason: str) -> Obj:
        return {"type": ctype, "status": "True" if ok else "False", **({} if ok else {"reason": reason}), "lastProbeTime": None, "lastTransitionTime": now}

    scheduled = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
    return [
        cond("PodReadyToStartContainers", running, "PodCompleted"),
        cond("Initialized", initialized, "ContainersNotInitialized"),
        cond("Ready", ready, "PodCompleted" if initialized else "ContainersNotInitialized"),
        cond("ContainersReady", ready, "PodCompleted" if initialized else "ContainersNotInitialized"),
        *scheduled,
    ]


def _image(pod: Obj, name: str) -> str:
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if c.get("name") == name:
            return str(c.get("image", ""))
    return ""


def _container(pod: Obj, name: str, state: Obj, ready: bool) -> Obj:
    return {"name": name, "state": state, "lastState": {}, "ready": ready, "restartCount": 0, "image": _image(pod, name), "imageID": "", "started": "running" in state}


def _terminated(e: Exited, started: str, finished: str) -> Obj:
    term: Obj = {"exitCode": e.code, "reason": e.reason, "startedAt": started, "finishedAt": finished}
    if e.message:
        term["message"] = e.message
    return {"terminated": term}


def _base(pod: Obj, phase: str, ip: str, started: float, conditions: list[Obj]) -> Obj:
    return {
        "phase": phase,
        "conditions": conditions,
        "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}],
        "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": stamp(started),
    }


def running(pod: Obj, ip: str, containers: Iterable[str], started: float, now: float) -> Obj:
    """Every regular container that could start is running: phase Running, Ready."""
    at = stamp(now)
    status = _base(pod, "Running", ip, started, _conditions(pod, True, True, True, at))
    status["containerStatuses"] = [_container(pod, name, {"running": {"startedAt": at}}, True) for name in containers]
    return status


def ended(pod: Obj, ip: str, how: Ended, started: float, now: float) -> Obj:
    """The final status: Succeeded or Failed, each container's exit code and message."""
    begun, at = stamp(started), stamp(now)
    failed_init = how.init_failed
    status = _base(pod, how.phase, ip, started, _conditions(pod, False, failed_init is None and how.error is None, False, at))
    inits = [*how.init, *how.sidecars]
    if inits:
        status["initContainerStatuses"] = [_container(pod, e.container, _terminated(e, begun, at), False) for e in inits]
    if failed_init is not None:  # the regular containers never started
        names = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
        status["containerStatuses"] = [_container(pod, n, {"waiting": {"reason": "PodInitializing"}}, False) for n in names]
    else:
        status["containerStatuses"] = [_container(pod, e.container, _terminated(e, begun, at), False) for e in how.containers]
    if how.error is not None:
        status["reason"], status["message"] = "StartError", how.error
    return status
