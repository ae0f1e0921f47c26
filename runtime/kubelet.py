"""A kubelet stand-in for the fake cluster: it runs released pods' commands for real.

A pod with no scheduling gates is scheduled after `schedule_delay` seconds of (virtual)
time and its containers start.  A container whose command is a POSIX shell (`sh -c ...`,
as the scenario tests' busybox pods are) is executed as a local process with the pod's
environment (literal env, $(VAR) expansion and downward-API fields, the way the kubelet
builds it); `sleep N` inside it does not block but adds N seconds of virtual run time
(`sleep inf` runs until the pod is deleted).  Commands of other programs cannot run here:
such containers run until deleted.  Readiness is reported as soon as a container runs.
A deleted running pod is stopped with exit code 143 (SIGTERM) and then removed.
"""

from __future__ import annotations

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

from .fake import FakeCluster

_VAR = re.compile(r"\$\$|\$\(([^)]*)\)")
_FIELD = re.compile(r"metadata\.(annotations|labels)\['([^']+)'\]")
SHELLS = ("sh", "/bin/sh", "bash", "/bin/bash")

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


@dataclass
class FakeKubelet:
    """Moves released pods through Pending -> Running -> Succeeded/Failed on virtual time."""

    cluster: FakeCluster
    namespace: str = "default"
    clock: Callable[[], float] = lambda: 0.0
    schedule_delay: float = 1.0
    runner: ShellRunner = field(default_factory=ShellRunner)
    # Scenario behaviour for pods whose real command cannot run here (sshd, deepspeed, torchrun):
    # pod name -> f(pod, env) -> (virtual seconds, exit code or None for "until deleted").
    behaviors: dict[str, Callable[[dict[str, Any], dict[str, str]], tuple[float, int | None]]] = field(default_factory=dict)
    seen: dict[str, float] = field(default_factory=dict)  # uid -> when the gates were gone
    running: dict[str, _Running] = field(default_factory=dict)  # uid -> run

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
            elif phase == "Running" and uid in self.running:
                run = self.running[uid]
                if now >= run.ends and run.code is not None:
                    self._finish(name, pod, run.code)
                    changed = True
        return changed

    def _start(self, name: str, pod: dict[str, Any], now: float) -> None:
        containers = pod["spec"]["containers"]
        behave = self.behaviors.get(name)
        if behave is not None:
            results = [behave(pod, container_env(pod, containers[0]))]
        else:
            results = [self.runner.run(pod, c) for c in containers]
        seconds = max(s for s, _ in results)
        codes = [c for _, c in results]
        code = None if any(c is None for c in codes) else next((c for c in codes if c), 0)
        self.running[pod["metadata"]["uid"]] = _Running(now, now + seconds, code)
        statuses = [{"name": c["name"], "ready": True, "state": {"running": {"startedAt": now}}} for c in containers]
        self.cluster.set_pod_status(self.namespace, name, {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], "containerStatuses": statuses})

    def _finish(self, name: str, pod: dict[str, Any], code: int) -> None:
        statuses = [
            {"name": c["name"], "ready": False, "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}}
            for c in pod["spec"]["containers"]
        ]
        phase = "Succeeded" if code == 0 else "Failed"
        self.cluster.set_pod_status(self.namespace, name, {"phase": phase, "conditions": [{"type": "Ready", "status": "False"}], "containerStatuses": statuses})

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
        self.cluster.set_pod_status(self.namespace, name, {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."})

    def kill(self, name: str, code: int = 137) -> None:
        """Make a running pod's container exit now with `code` (e.g. OOM-killed: 137)."""
        pod = self.cluster.pods(self.namespace)[name]
        self.running.pop(pod["metadata"]["uid"], None)
        self._finish(name, pod, code)
