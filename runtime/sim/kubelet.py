"""A kubelet (and scheduler) stand-in for the fake cluster: it runs released pods' commands for real.

A pod with no scheduling gates is bound to the node `node` after `schedule_delay` seconds of
(virtual) time, through the binding subresource as the scheduler does, and its containers
start; the status it writes is shaped like a real kubelet's (conditions, hostIP, podIP,
startTime, containerStatuses with image, imageID, containerID, started, volumeMounts).  A container whose command is a POSIX shell (`sh -c ...`,
as the scenario tests' busybox pods are) is executed as a local process with the pod's
environment (literal env, $(VAR) expansion and downward-API fields, the way the kubelet
builds it); `sleep N` inside it does not block but adds N seconds of virtual run time
(`sleep inf` runs until the pod is deleted).  Commands of other programs cannot run here:
such containers run until deleted.  Readiness is reported as soon as a container runs.
A deleted pod is stopped (its running containers end with exit code 143, SIGTERM), its
terminal status written, and then removed with a grace period of 0 and its UID as
precondition, as the kubelet does.  A running pod past its spec.activeDeadlineSeconds (from
its start) is ended the same way and kept: Failed, reason DeadlineExceeded (pkg/kubelet/
active_deadline.go).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .apiserver.clock import stamp
from .cluster import FakeCluster

_VAR = re.compile(r"\$\$|\$\(([^)]*)\)")
_FIELD = re.compile(r"metadata\.(annotations|labels)\['([^']+)'\]")
SHELLS = ("sh", "/bin/sh", "bash", "/bin/bash")

# pkg/kubelet/active_deadline.go: the reason and message of a pod past spec.activeDeadlineSeconds
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Pod was active on the node longer than the specified deadline")

SLEEP_STUB = """#!/bin/sh
# flatjob fake kubelet: record how long the pod would sleep instead of sleeping.
printf '%s\\n' "$1" >> "$FLATJOB_FAKE_SLEEP"
"""


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: $$ is reduced to $ (so $$(X) stays literal), unknown
    variables and a $( that never closes stay as written (k8s third_party expansion)."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(sub, value)


def container_env(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """The environment a kubelet gives a container (literal, expanded and fieldRef values)."""
    meta = pod["metadata"]
    env: dict[str, str] = {}
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = expand(str(e["value"]), env)
            continue
        ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
        m = _FIELD.fullmatch(ref)
        if m:
            env[e["name"]] = str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
        elif ref == "metadata.name":
            env[e["name"]] = meta["name"]
        elif ref == "metadata.namespace":
            env[e["name"]] = meta.get("namespace", "")
        else:
            env[e["name"]] = ""
    env.setdefault("HOSTNAME", pod.get("spec", {}).get("hostname") or meta["name"])
    return env


@dataclass
class ShellRunner:
    """Runs `sh -c` containers locally: returns (virtual seconds to run, exit code)."""

    timeout: float = 20.0
    _dir: Path | None = None

    def _stubs(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="flatjob-kubelet-"))
            stub = self._dir / "sleep"
            stub.write_text(SLEEP_STUB)
            stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return self._dir

    def run(self, pod: dict[str, Any], container: dict[str, Any]) -> tuple[float, int | None]:
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        if not argv or argv[0] not in SHELLS:
            return float("inf"), None  # not a shell: cannot run it here; it runs until deleted
        env = container_env(pod, container)
        argv = [expand(a, env) for a in argv]
        stubs = self._stubs()
        log = stubs / f"sleep-{os.getpid()}-{id(container)}"
        log.unlink(missing_ok=True)
        run_env = {"PATH": f"{stubs}:{os.environ.get('PATH', '/usr/bin:/bin')}", **env, "FLATJOB_FAKE_SLEEP": str(log)}
        sh = shutil.which(argv[0].rsplit("/", 1)[-1]) or argv[0]
        try:
            done = subprocess.run([sh, *argv[1:]], env=run_env, capture_output=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            return float("inf"), None
        seconds = 0.0
        if log.exists():
            for line in log.read_text().split():
                seconds += float("inf") if line in ("inf", "infinity") else float(line.rstrip("s") or 0)
            log.unlink()
        return seconds, done.returncode


@dataclass
class _Running:
    started: float
    ends: float
    code: int | None


def full_image(image: str) -> str:
    """The image reference a container runtime reports (`busybox` -> docker.io/library/busybox:latest)."""
    name, _, digest = image.partition("@")
    first = name.split("/", 1)[0]
    if "/" not in name or ("." not in first and ":" not in first and first != "localhost"):
        name = f"docker.io/{name if '/' in name else 'library/' + name}"
    if not digest and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return f"{name}@{digest}" if digest else name


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()



def until_deleted(pod: dict[str, Any], env: dict[str, str]) -> tuple[float, int | None]:
    """A scenario behaviour: the container runs until its pod is deleted (sshd, a launcher)."""
    return float("inf"), None

@dataclass
class FakeKubelet:
    """Moves released pods through Pending -> Running -> Succeeded/Failed on virtual time."""

    cluster: FakeCluster
    namespace: str = "default"
    clock: Callable[[], float] = lambda: 0.0
    schedule_delay: float = 1.0
    runner: ShellRunner = field(default_factory=ShellRunner)
    node: str = "fake-node-1"
    host_ip: str = "10.0.0.1"
    # Scenario behaviour for pods whose real command cannot run here (sshd, deepspeed, torchrun):
    # pod name -> f(pod, env) -> (virtual seconds, exit code or None for "until deleted").
    behaviors: dict[str, Callable[[dict[str, Any], dict[str, str]], tuple[float, int | None]]] = field(default_factory=dict)
    seen: dict[str, float] = field(default_factory=dict)  # uid -> when the gates were gone
    running: dict[str, _Running] = field(default_factory=dict)  # uid -> run
    ips: dict[str, str] = field(default_factory=dict)  # uid -> pod IP
    started_at: dict[str, float] = field(default_factory=dict)  # uid -> start time

    def tick(self) -> bool:
        """Advance every pod as far as the clock allows; True when anything changed."""
        now = self.clock()
        changed = False
        for name, pod in sorted(self.cluster.pods(self.namespace).items()):
            uid = pod["metadata"]["uid"]
            phase = pod.get("status", {}).get("phase", "Pending")
            if pod["metadata"].get("deletionTimestamp") is not None:
                self._stop(name, pod, 143)
                changed = True
            elif phase == "Pending" and not pod["spec"].get("schedulingGates"):
                first = self.seen.setdefault(uid, now)
                if now - first >= self.schedule_delay:
                    self._start(name, pod, now)
                    changed = True
            elif phase == "Running" and uid in self.running and self._past_deadline(pod, uid, now):
                self.running.pop(uid)
                self._finish(name, pod, 143, DEADLINE_EXCEEDED)
                changed = True
            elif phase == "Running" and uid in self.running:
                run = self.running[uid]
                if now >= run.ends and run.code is not None:
                    self._finish(name, pod, run.code)
                    changed = True
        return changed

    def _ip(self, uid: str) -> str:
        if uid not in self.ips:
            n = len(self.ips) + 2
            self.ips[uid] = f"10.244.{n // 250}.{n % 250 + 2}"
        return self.ips[uid]

    def _container_status(self, pod: dict[str, Any], c: dict[str, Any], state: dict[str, Any], ready: bool) -> dict[str, Any]:
        uid = pod["metadata"]["uid"]
        image = full_image(c.get("image", ""))
        out = {
            "name": c["name"], "state": state, "lastState": {}, "ready": ready, "restartCount": 0,
            "image": image, "imageID": f"{image.split('@')[0].rsplit(':', 1)[0]}@sha256:{_digest(image)}",
            "containerID": f"containerd://{_digest(uid + c['name'])}", "started": "running" in state,
        }
        mounts = [{"name": m["name"], "mountPath": m["mountPath"], **({"readOnly": True, "recursiveReadOnly": "Disabled"} if m.get("readOnly") else {})} for m in c.get("volumeMounts") or []]
        if mounts:
            out["volumeMounts"] = mounts
        return out

    def _status(self, pod: dict[str, Any], phase: str, states: list[dict[str, Any]], ready: bool, reason: str = "") -> dict[str, Any]:
        """A pod status as a kubelet writes it."""
        uid, now = pod["metadata"]["uid"], stamp(self.clock())
        started = stamp(self.started_at.get(uid, self.clock()))
        flag = "True" if ready else "False"
        conditions = [
            {"type": "PodReadyToStartContainers", "status": "True" if phase == "Running" else "False"},
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": flag, **({} if ready else {"reason": reason or "ContainersNotReady"})},
            {"type": "ContainersReady", "status": flag, **({} if ready else {"reason": reason or "ContainersNotReady"})},
            {"type": "PodScheduled", "status": "True"},
        ]
        containers = pod["spec"]["containers"]
        ip = self._ip(uid)
        status = {
            "phase": phase,
            "conditions": [{**c, "lastProbeTime": None, "lastTransitionTime": now} for c in conditions],
            "hostIP": self.host_ip, "hostIPs": [{"ip": self.host_ip}],
            "podIP": ip, "podIPs": [{"ip": ip}],
            "startTime": started,
            "containerStatuses": [self._container_status(pod, c, s, ready) for c, s in zip(containers, states, strict=True)],
            "qosClass": pod.get("status", {}).get("qosClass", "BestEffort"),
        }
        inits = pod["spec"].get("initContainers") or []
        if inits:
            done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started}}
            status["initContainerStatuses"] = [self._container_status(pod, c, done, False) for c in inits]
        return status

    def _start(self, name: str, pod: dict[str, Any], now: float) -> None:
        if not pod["spec"].get("nodeName"):
            self.cluster.bind_pod(self.namespace, name, self.node)  # the scheduler's part
        containers = pod["spec"]["containers"]
        behave = self.behaviors.get(name)
        if behave is not None:
            results = [behave(pod, container_env(pod, containers[0]))]
        else:
            results = [self.runner.run(pod, c) for c in containers]
        seconds = max(s for s, _ in results)
        codes = [c for _, c in results]
        code = None if any(c is None for c in codes) else next((c for c in codes if c), 0)
        uid = pod["metadata"]["uid"]
        self.running[uid] = _Running(now, now + seconds, code)
        self.started_at[uid] = now
        states = [{"running": {"startedAt": stamp(now)}} for _ in containers]
        self.cluster.set_pod_status(self.namespace, name, self._status(pod, "Running", states, True))

    def _past_deadline(self, pod: dict[str, Any], uid: str, now: float) -> bool:
        """pkg/kubelet/active_deadline.go pastActiveDeadline: running at least
        spec.activeDeadlineSeconds since its start (a value an update may set, or lower)."""
        deadline = pod["spec"].get("activeDeadlineSeconds")
        return deadline is not None and now - self.started_at.get(uid, now) >= deadline

    def _finish(self, name: str, pod: dict[str, Any], code: int, why: tuple[str, str] | None = None) -> None:
        """The containers ended with `code`; `why`: the pod's own (reason, message), as the
        kubelet writes when it ends a pod itself (DeadlineExceeded)."""
        uid, now = pod["metadata"]["uid"], stamp(self.clock())
        started = stamp(self.started_at.get(uid, self.clock()))
        reason = "Completed" if code == 0 else "Error"
        states = [{"terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now,
                                  "containerID": f"containerd://{_digest(uid + c['name'])}"}} for c in pod["spec"]["containers"]]
        phase = "Succeeded" if code == 0 else "Failed"
        status = self._status(pod, phase, states, False, "PodCompleted" if code == 0 else "")
        if why is not None:
            status["reason"], status["message"] = why
        self.cluster.set_pod_status(self.namespace, name, status)

    def _stop(self, name: str, pod: dict[str, Any], code: int) -> None:
        """SIGTERM: a running pod's containers end with `code` (Failed), then the pod is removed."""
        run = self.running.pop(pod["metadata"]["uid"], None)
        if run is not None and pod.get("status", {}).get("phase") == "Running":
            self._finish(name, pod, code)
        self.cluster.set_pod_status(self.namespace, name, {}, remove=True)

    def evict(self, name: str) -> None:
        """Evict a pod (node pressure, preemption): Failed without an exit code."""
        pod = self.cluster.pods(self.namespace)[name]
        self.running.pop(pod["metadata"]["uid"], None)
        status = dict(pod.get("status") or {})
        status.update(phase="Failed", reason="Evicted", message="The node was low on resource: memory. ")
        status["conditions"] = [*status.get("conditions", []), {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet", "message": "The node was low on resource: memory. ", "lastProbeTime": None, "lastTransitionTime": stamp(self.clock())}]
        self.cluster.set_pod_status(self.namespace, name, status)

    def kill(self, name: str, code: int = 137) -> None:
        """Make a running pod's container exit now with `code` (e.g. OOM-killed: 137)."""
        pod = self.cluster.pods(self.namespace)[name]
        self.running.pop(pod["metadata"]["uid"], None)
        self._finish(name, pod, code)
