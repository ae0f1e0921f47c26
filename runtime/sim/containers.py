"""What a container does in the scenario kubelet's virtual time: its program.

A `Program` says how long a container runs, how it ends by itself, and what it does on
SIGTERM (exit with a code after some seconds, or ignore it and be SIGKILLed when the grace
period ends: 137).  A container whose command is a POSIX shell (`sh -c ...`, as the scenario
tests' busybox pods are) is run for real by `ShellRunner` with the environment a kubelet
gives it (literal env, $(VAR) expansion, downward-API fields); `sleep N` inside it adds N
seconds of virtual run time instead of sleeping (`sleep inf`: until stopped).  Other
commands cannot run here: their containers run until stopped.  Tests give a pod a
behaviour instead (a function of the pod and its environment returning a Program, or the
older `(seconds, code)` pair).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INF = float("inf")
SIGTERM_EXIT, SIGKILL_EXIT = 143, 137  # 128 + the signal, as runc reports a signal death
_VAR = re.compile(r"\$\$|\$\(([^)]*)\)")
_FIELD = re.compile(r"metadata\.(annotations|labels)\['([^']+)'\]")
SHELLS = ("sh", "/bin/sh", "bash", "/bin/bash")

SLEEP_STUB = """#!/bin/sh
# flatjob fake kubelet: record how long the pod would sleep instead of sleeping.
printf '%s\\n' "$1" >> "$FLATJOB_FAKE_SLEEP"
"""


@dataclass(frozen=True)
class Program:
    """A container's behaviour on virtual time."""

    seconds: float = INF  # runs this long, then exits with `code`
    code: int | None = None  # None: runs until stopped
    on_term: int | None = SIGTERM_EXIT  # exit code on SIGTERM; None: ignores it (SIGKILL: 137)
    term_seconds: float = 0.0  # how long it takes to exit after SIGTERM

    def ends_at(self, started: float) -> float | None:
        """When it exits by itself (None: not before it is stopped)."""
        return None if self.code is None or self.seconds == INF else started + self.seconds


Behaviour = Callable[[dict[str, Any], dict[str, str]], "Program | tuple[float, int | None]"]


def as_program(result: Program | tuple[float, int | None]) -> Program:
    """A behaviour's answer as a Program (the older form is `(seconds, code)`)."""
    if isinstance(result, Program):
        return result
    seconds, code = result
    return Program(seconds, code)


def until_deleted(pod: dict[str, Any], env: dict[str, str]) -> Program:
    """A scenario behaviour: the container runs until its pod is deleted (sshd, a launcher)."""
    return Program()


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
    """Runs `sh -c` containers locally: their Program (virtual seconds to run, exit code)."""

    timeout: float = 20.0
    _dir: Path | None = None

    def _stubs(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="flatjob-kubelet-"))
            stub = self._dir / "sleep"
            stub.write_text(SLEEP_STUB)
            stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return self._dir

    def run(self, pod: dict[str, Any], container: dict[str, Any]) -> Program | tuple[float, int | None]:
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        if not argv or argv[0] not in SHELLS:
            return Program()  # not a shell: cannot run it here; it runs until stopped
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
            return Program()
        seconds = 0.0
        if log.exists():
            for line in log.read_text().split():
                seconds += INF if line in ("inf", "infinity") else float(line.rstrip("s") or 0)
            log.unlink()
        # As PID 1, a shell without a trap ignores SIGTERM (the kernel drops signals PID 1 has no
        # handler for): it ends by SIGKILL when the grace period is over (137).
        traps = any(re.search(r"\btrap\b", a) for a in argv[1:])
        return Program(seconds, done.returncode, on_term=SIGTERM_EXIT if traps else None)
