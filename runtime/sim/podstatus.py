"""A pod's status as a kubelet writes it (pure): the one status builder of both kubelets.

The scenario kubelet (kubelet.py, virtual time) and run-local's (runtime/local/kubelet.py,
real processes) describe what they see of a pod as a `PodLook` (phase, each container's
state) and write `status(pod, look)`.  The shape follows the kubelet's generateAPIPodStatus
(pkg/kubelet/kubelet_pods.go) and the status manager (pkg/kubelet/status/status_manager.go):
- conditions PodReadyToStartContainers, Initialized, Ready, ContainersReady as
  pkg/kubelet/status/generate.go builds them from the container statuses: Initialized once
  every init container completed (a native sidecar: started) or any regular container
  started, so a sidecar restarting later leaves it True; ContainersReady when every native
  sidecar and regular container is ready, else ContainersNotReady "containers with unready
  status: [a b]"; Ready as ContainersReady, then the readiness gates; PodScheduled (the
  scheduler's) and DisruptionTarget (the API server's, the scheduler's or a controller's)
  are kept as stored, since the status manager merges only the conditions the kubelet owns;
- a terminal phase makes Ready and ContainersReady False with reason PodCompleted or
  PodFailed (generate.go, status_manager generate*ConditionForTerminalPhase);
- each container's state (waiting with its reason and message: ContainerCreating,
  PodInitializing, ErrImagePull, ImagePullBackOff, CrashLoopBackOff; running; terminated with
  exit code, reason Completed/Error/OOMKilled, message, start and finish), lastState (how the
  instance before it ended), restartCount, image, imageID, containerID (derived from the pod
  UID and the restart count, so an instance's IDs are stable), started, ready (the prober
  manager's: an init container once it exited 0, any other while it runs, no probes here),
  volumeMounts; init containers likewise; hostIP(s), podIP(s), startTime, qosClass as stored;
- a pod-level reason and message where the kubelet sets one (Evicted, DeadlineExceeded), and
  the status of a pod it refused at admission (`rejected`).
The runtime reads these exactly as it reads a cluster's (runtime/observe.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .apiserver.clock import stamp

HOST_IP = "127.0.0.1"
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")

Obj = dict[str, Any]


@dataclass(frozen=True)
class Exited:
    """How one container ended, as a container runtime reports it."""

    container: str
    code: int  # 128+N for a death by signal N; 128 for a command that could not start
    reason: str  # Completed | Error | StartError | OOMKilled | ContainerStatusUnknown
    message: str | None = None  # termination message (FallbackToLogsOnError: the log's tail)
    restarts: int = 0  # a native sidecar started again: instances started before this one
    last: Exited | None = None  # how the instance before this one ended


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


@dataclass(frozen=True)
class ContainerLook:
    """One container as the kubelet sees it now."""

    name: str
    state: str  # waiting | running | terminated
    reason: str | None = None  # waiting: ContainerCreating, PodInitializing, ImagePullBackOff...; terminated: Completed, Error...
    message: str | None = None
    code: int | None = None  # terminated only
    started: float | None = None  # running or terminated
    finished: float | None = None  # terminated only
    ready: bool = False
    restarts: int = 0  # restartCount: how many instances were started before this one
    last: ContainerLook | None = None  # lastState: how the instance before this one ended

    @classmethod
    def exited(cls, e: Exited, started: float, finished: float) -> ContainerLook:
        last = cls.exited(e.last, started, started) if e.last is not None else None
        return cls(e.container, "terminated", e.reason, e.message, e.code, started, finished, restarts=e.restarts, last=last)


@dataclass(frozen=True)
class PodLook:
    """What the kubelet knows of one pod: the input of its status."""

    phase: str  # Pending | Running | Succeeded | Failed
    ip: str
    started: float  # startTime: when the kubelet admitted the pod
    now: float
    host_ip: str = HOST_IP
    init: tuple[ContainerLook, ...] = ()
    containers: tuple[ContainerLook, ...] = ()
    reason: str | None = None  # pod-level: Evicted, DeadlineExceeded, StartError
    message: str | None = None
    conditions: tuple[Obj, ...] = ()  # extra conditions the kubelet adds (DisruptionTarget on eviction)
    initialized: bool | None = None  # None: as generate.go finds it from the container statuses


def _id(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def full_image(image: str) -> str:
    """The image reference a container runtime reports (`busybox` -> docker.io/library/busybox:latest)."""
    name, _, digest = image.partition("@")
    first = name.split("/", 1)[0]
    if "/" not in name or ("." not in first and ":" not in first and first != "localhost"):
        name = f"docker.io/{name if '/' in name else 'library/' + name}"
    if not digest and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return f"{name}@{digest}" if digest else name


def _specs(pod: Obj, field: str) -> dict[str, Obj]:
    return {c.get("name", ""): c for c in (pod.get("spec") or {}).get(field) or [] if isinstance(c, dict)}


def is_sidecar(container: Obj | None) -> bool:
    """A native sidecar: an init container with restartPolicy Always (KEP-753)."""
    return (container or {}).get("restartPolicy") == "Always"


def _state(c: ContainerLook) -> Obj:
    if c.state == "running":
        return {"running": {"startedAt": stamp(c.started or 0.0)}}
    if c.state == "terminated":
        term: Obj = {"exitCode": c.code, "reason": c.reason or ("Completed" if c.code == 0 else "Error")}
        if c.message:
            term["message"] = c.message
        term["startedAt"] = stamp(c.started or 0.0)
        term["finishedAt"] = stamp(c.finished or c.started or 0.0)
        return {"terminated": term}
    waiting: Obj = {"reason": c.reason or "ContainerCreating"}
    if c.message:
        waiting["message"] = c.message
    return {"waiting": waiting}


def _ready(c: ContainerLook, spec: Obj | None, init: bool) -> bool:
    """prober_manager.go UpdatePodStatus: an init container is ready once it exited 0; a native
    sidecar or a regular container while it runs and its kubelet finds it ready (no probes)."""
    if init and not is_sidecar(spec):
        return c.state == "terminated" and c.code == 0
    return c.ready and c.state == "running"


def _container(pod: Obj, spec: Obj | None, c: ContainerLook, init: bool = False) -> Obj:
    uid = (pod.get("metadata") or {}).get("uid", "")
    image = full_image(str((spec or {}).get("image", "")))
    out: Obj = {"name": c.name, "state": _state(c), "lastState": _state(c.last) if c.last else {}, "ready": _ready(c, spec, init),
                "restartCount": c.restarts, "image": image}
    if c.state != "waiting" or c.last is not None:  # a container that was created has an ID and a pulled image
        out["imageID"] = f"{image.split('@')[0].rsplit(':', 1)[0]}@sha256:{_id(image)}"
        out["containerID"] = f"containerd://{_id(uid, c.name, *([str(c.restarts)] if c.restarts else []))}"  # one per instance
    out["started"] = c.state == "running"
    mounts = [{"name": m["name"], "mountPath": m["mountPath"], **({"readOnly": True, "recursiveReadOnly": "Disabled"} if m.get("readOnly") else {})}
              for m in (spec or {}).get("volumeMounts") or [] if isinstance(m, dict) and "name" in m and "mountPath" in m]
    if mounts:
        out["volumeMounts"] = mounts
    return out


Condition = tuple[bool, str | None, str | None]  # status True?, reason, message


def _listed(*parts: tuple[str, list[str]]) -> str | None:
    """generate.go's message: "containers with <what> status: [a b]" (Go's %s of a []string),
    joined by ", "; None when every list is empty."""
    return ", ".join(f"containers with {what} status: [{' '.join(names)}]" for what, names in parts if names) or None


def _initialized(pod: Obj, look: PodLook, statuses: dict[str, Obj]) -> Condition:
    """generate.go GeneratePodInitializedCondition: True once every init container is
    initialized (isInitContainerInitialized: a native sidecar started, another ready) or any
    regular container started (HasAnyRegularContainerStarted: so a sidecar that restarts
    later leaves it True); PodCompleted when the pod succeeded."""
    if look.initialized is not None:  # run-local's: a pod it could not run at all
        return look.initialized, None if look.initialized else "ContainersNotInitialized", None
    inits = _specs(pod, "initContainers")
    unknown = [n for n in inits if n not in statuses]
    if look.phase == "Succeeded" and not unknown:
        return True, "PodCompleted", None
    if any(set(statuses[n]["state"]) & {"running", "terminated"} for n in _specs(pod, "containers") if n in statuses):
        return True, None, None
    incomplete = [n for n, spec in inits.items() if n in statuses and not statuses[n]["started" if is_sidecar(spec) else "ready"]]
    message = _listed(("unknown", unknown), ("incomplete", incomplete))
    return (False, "ContainersNotInitialized", message) if message else (True, None, None)


def _containers_ready(pod: Obj, phase: str, statuses: dict[str, Obj]) -> Condition:
    """generate.go GenerateContainersReadyCondition: every native sidecar and regular container
    ready; a terminal phase makes it False (PodCompleted, PodFailed)."""
    names = [n for n, spec in _specs(pod, "initContainers").items() if is_sidecar(spec)] + list(_specs(pod, "containers"))
    unknown = [n for n in names if n not in statuses]
    if phase == "Failed" or (phase == "Succeeded" and not unknown):
        return False, "PodCompleted" if phase == "Succeeded" else "PodFailed", None
    message = _listed(("unknown", unknown), ("unready", [n for n in names if n in statuses and not statuses[n]["ready"]]))
    return (False, "ContainersNotReady", message) if message else (True, None, None)


def _pod_ready(pod: Obj, before: dict[Any, Obj], containers: Condition) -> Condition:
    """generate.go GeneratePodReadyCondition: ContainersReady's status, reason and message while
    it is not True; then each readiness gate's condition must be True."""
    gates = _gates_unmet(pod, before) if containers[0] else None
    return (False, "ReadinessGatesNotReady", gates) if gates else containers


def _conditions(pod: Obj, look: PodLook, at: str, statuses: dict[str, Obj]) -> list[Obj]:
    """The kubelet's four conditions (kept unchanged when their status is), then the others'."""
    stored = [c for c in (pod.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    before = {c.get("type"): c for c in stored}
    terminal = look.phase in ("Succeeded", "Failed")
    created = any(c.state != "waiting" for c in (*look.init, *look.containers))
    containers = _containers_ready(pod, look.phase, statuses)
    own: dict[str, Condition] = {
        "PodReadyToStartContainers": (created and not terminal, None, None),
        "Initialized": _initialized(pod, look, statuses),
        "Ready": _pod_ready(pod, before, containers),
        "ContainersReady": containers,
    }
    out = []
    for ctype, (ok, reason, message) in own.items():
        status = "True" if ok else "False"
        old = before.get(ctype)
        when = old["lastTransitionTime"] if old and old.get("status") == status and old.get("lastTransitionTime") else at
        why = {} if reason is None else {"reason": reason, **({"message": message} if message else {})}
        out.append({"type": ctype, "status": status, **why, "lastProbeTime": None, "lastTransitionTime": when})
    others = [c for c in stored if c.get("type") not in KUBELET_CONDITIONS]
    for c in look.conditions:  # the kubelet's DisruptionTarget replaces a stored one (mergePodStatus ReplaceOrAppendPodCondition)
        others = update_condition(others, c)
    return [*out, *others]


def _gates_unmet(pod: Obj, conditions: dict[Any, Obj]) -> str | None:
    """Why the pod's readiness gates keep it from Ready although its containers are (generate.go
    GeneratePodReadyCondition: reason ReadinessGatesNotReady, ContainersReady stays True)."""
    unmet = []
    for gate in (pod.get("spec") or {}).get("readinessGates") or []:
        kind = gate.get("conditionType") if isinstance(gate, dict) else None
        c = conditions.get(kind)
        if c is None:
            unmet.append(f'corresponding condition of pod readiness gate "{kind}" does not exist.')
        elif c.get("status") != "True":
            unmet.append(f'the status of pod readiness gate "{kind}" is not "True", but {c.get("status")}')
    return ", ".join(unmet) or None


def status(pod: Obj, look: PodLook) -> Obj:
    """The whole status document the kubelet writes for `look`."""
    at = stamp(look.now)
    stored = pod.get("status") or {}
    inits, regular = _specs(pod, "initContainers"), _specs(pod, "containers")
    init_statuses = [_container(pod, inits.get(c.name), c, init=True) for c in look.init]
    statuses = [_container(pod, regular.get(c.name), c) for c in look.containers]
    out: Obj = {"phase": look.phase, "conditions": _conditions(pod, look, at, {s["name"]: s for s in (*init_statuses, *statuses)})}
    if look.reason:
        out["reason"] = look.reason
    if look.message:
        out["message"] = look.message
    out.update(hostIP=look.host_ip, hostIPs=[{"ip": look.host_ip}], podIP=look.ip, podIPs=[{"ip": look.ip}], startTime=stamp(look.started))
    if look.init:
        out["initContainerStatuses"] = init_statuses
    out["containerStatuses"] = statuses
    if "qosClass" in stored:
        out["qosClass"] = stored["qosClass"]
    return out


# --- what run-local's kubelet reports: its processes as looks ------------------------------------

def running(pod: Obj, ip: str, containers: Iterable[str], started: float, now: float,
            sidecars: Mapping[str, ContainerLook] | None = None, since: float | None = None) -> Obj:
    """Every regular container that could start is running (since `since`), the native sidecars
    beside them (as `sidecars` has them, once one has exited) and the other init containers
    completed: phase Running, Ready (no probes) unless a sidecar waits to start again."""
    names, sidecars, since = tuple(containers), sidecars or {}, now if since is None else since
    inits = tuple((sidecars.get(n) or ContainerLook(n, "running", started=since, ready=True)) if is_sidecar(spec) else ContainerLook(n, "terminated", "Completed", None, 0, started, since)
                  for n, spec in _specs(pod, "initContainers").items())
    look = PodLook("Running", ip, started, now, init=inits, containers=tuple(ContainerLook(n, "running", started=since, ready=True) for n in names))
    return status(pod, look)


def ended(pod: Obj, ip: str, how: Ended, started: float, now: float) -> Obj:
    """The final status: Succeeded or Failed, each container's exit code and message; a failed
    init container leaves the init containers after it and the regular ones waiting
    (PodInitializing), as the kubelet does."""
    order = list(_specs(pod, "initContainers"))  # the kubelet lists them in spec order, sidecars among them (SortInitContainerStatuses)
    inits = tuple(ContainerLook.exited(e, started, now) for e in sorted((*how.init, *how.sidecars), key=lambda e: order.index(e.container) if e.container in order else len(order)))
    if how.init_failed is not None:
        ran = {c.name: c for c in inits}
        inits = tuple(ran.get(n) or ContainerLook(n, "waiting", "PodInitializing") for n in order)
        containers = tuple(ContainerLook(n, "waiting", "PodInitializing") for n in _specs(pod, "containers"))
    else:
        containers = tuple(ContainerLook.exited(e, started, now) for e in how.containers)
    look = PodLook(how.phase, ip, started, now, init=inits, containers=containers, initialized=False if how.error is not None else None,
                   reason="StartError" if how.error is not None else None, message=how.error)
    return status(pod, look)


def rejected(pod: Obj, reason: str, message: str, now: float) -> Obj:
    """A pod the kubelet refused at admission (kubelet.go rejectPod): Failed with the admit
    handler's reason and "Pod was rejected: <message>", the qosClass kept; the status manager
    sets startTime and keeps the scheduler's PodScheduled (the kubelet's own conditions are new)."""
    stored = pod.get("status") or {}
    out: Obj = {"phase": "Failed", "reason": reason, "message": f"Pod was rejected: {message}", "startTime": stamp(now),
                "conditions": [c for c in stored.get("conditions") or [] if c.get("type") == "PodScheduled"]}
    if "qosClass" in stored:
        out["qosClass"] = stored["qosClass"]
    return out


def update_condition(conditions: list[Obj], condition: Obj) -> list[Obj]:
    """The conditions with `condition` in place of the one of its type, or appended: as every
    writer of DisruptionTarget does (apipod.UpdatePodCondition, pkg/api/v1/pod/util.go, for the
    Eviction API, the scheduler's preemption, taint eviction and PodGC; the kubelet's
    status_manager.go updateLastTransitionTime in mergePodStatus), the old one's
    lastTransitionTime stays when its status is the same: a second disruption of a pod still
    carrying the True condition an earlier one left (an eviction whose delete was refused, for
    up to 2 min) keeps that earlier time, with the new reason and message."""
    out, found = [], False
    for c in conditions:
        if c.get("type") != condition.get("type"):
            out.append(c)
            continue
        found = True
        same = c.get("status") == condition.get("status") and c.get("lastTransitionTime")
        out.append({**condition, "lastTransitionTime": c["lastTransitionTime"]} if same else condition)
    return out if found else [*out, condition]


def disruption(reason: str, message: str, now: float) -> Obj:
    """The DisruptionTarget condition (pkg/apis/core/types.go DisruptionTarget; reasons:
    EvictionByEvictionAPI, PreemptionByScheduler, DeletionByTaintManager, DeletionByPodGC,
    TerminationByKubelet)."""
    return {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message, "lastProbeTime": None, "lastTransitionTime": stamp(now)}


__all__ = ["ContainerLook", "Ended", "Exited", "PodLook", "disruption", "ended", "full_image", "is_sidecar", "rejected", "running", "status", "update_condition"]
