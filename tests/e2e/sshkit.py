"""The real launchers for the SSH kinds' end-to-end tests: what they need, and what they leave.

`need(kind)` skips a test when this machine lacks root, sshd, ssh, pdsh, deepspeed or
colossalai (or torch), naming what is missing and how to install it; with
FLATJOB_E2E_REQUIRE=1 (set by .ci/run) a missing tool fails the test instead, so CI never
passes by skipping.  `environment(tag, tmp)` puts run-local's folder under the test's tmp
(TMPDIR); `sshd_left(tmp)` finds sshd processes of that run that outlived it: sshd rewrites
its environment area for its process title, so E2E_TAG cannot find them, but their command
line names run-local's folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from flatjob.runtime.local.ssh import TOOLS

from . import kit
from .kit import BIN, tagged

# An env value no launcher's double quotes can carry: it must reach every rank byte for byte.
HOSTILE = "say \"hi\" to $HOME and `whoami`; \\ back\\slash  two  spaces 'q'"
INSTALL = "install them as .ci/run does (docs/run-local.md, 'DeepSpeedJob and ColossalAIJob')"


def missing(kind: str) -> list[str]:
    """What this machine lacks to run `kind` under run-local (empty when nothing)."""
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    out = [t for t in TOOLS[kind] if shutil.which(t, path=path) is None]
    if not os.access("/usr/sbin/sshd", os.X_OK):
        out.append("/usr/sbin/sshd (openssh-server)")
    if importlib.util.find_spec("torch") is None:
        out.append("torch (pip install torch==2.13.0)")
    if os.geteuid() != 0:
        out.append("root (sshd binds port 22 on every pod's loopback address)")
    return out


def need(kind: str) -> None:
    """Skip (or, in CI, fail) unless every tool `kind` needs is here."""
    lack = missing(kind)
    if not sys.platform.startswith("linux"):
        pytest.skip("run-local needs Linux")
    if lack:
        why = f"{kind} end to end needs {', '.join(lack)}: {INSTALL}"
        if os.environ.get("FLATJOB_E2E_REQUIRE") == "1":
            pytest.fail(why + " (FLATJOB_E2E_REQUIRE=1: CI must not skip)")
        pytest.skip(why)


def environment(tag: str, tmp: Path) -> dict[str, str]:
    """kit.environment, with run-local's temp folder (and so every pod's folder) under tmp."""
    (tmp / "run").mkdir(exist_ok=True)
    return {**kit.environment(tag), "TMPDIR": str(tmp / "run")}


def sshd_left(tmp: Path) -> list[int]:
    """sshd processes of the run under tmp (see environment) still alive (zombies aside)."""
    needle = f"{tmp / 'run'}/".encode()
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":
            found.append(int(pid))
    return found


def find(tag: str, accept: Callable[[int, str, bytes], bool], timeout: float = 120) -> int:
    """Wait for a process of the test (E2E_TAG) that `accept(pid, comm, cmdline)` picks."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in tagged(tag):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if accept(pid, comm, cmdline):
                return pid
        time.sleep(0.1)
    raise AssertionError("the process never appeared")


def run_example(tmp: Path, tag: str, name: str, spec_patch: str, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run examples/local/<name>.yaml as it is, but on a free master port (`spec_patch`, with
    `{port}`, applied as an overlay): torch's store binds every address, so two runs on one
    machine (concurrent test suites) must not share 29500.  `args`: more of run-local's
    options.  Returns (the run, its story)."""
    folder = tmp / "overlay"
    folder.mkdir()
    kind = "DeepSpeedJob" if name.startswith("deepspeed") else "ColossalAIJob"
    patch = f"{{kind: {kind}, metadata: {{name: {name}}}, spec: {spec_patch.format(port=kit.free_port())}}}"
    (folder / "overlay.yaml").write_text(f"patches:\n  - patch: {patch}\n")
    started = time.monotonic()
    done = subprocess.run(
        kit.command(ROOT / "examples" / "local" / f"{name}.yaml", "--timeout", "240", "--overlay", str(folder), *args),
        env=environment(tag, tmp), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    return done, f"exit {done.returncode} after {time.monotonic() - started:.0f}s\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def spec_patch(value: dict[str, Any]) -> str:
    """`value` as a spec patch for run_example: flow YAML (JSON), where "{port}" is the only field."""
    return json.dumps(value).replace("{", "{{").replace("}", "}}").replace("{{port}}", "{port}")


def results(out: Path, pattern: str) -> list[dict[str, Any]]:
    """What tests/e2e/scripts/ranks.py recorded."""
    return [json.loads(p.read_text()) for p in sorted(out.glob(pattern))]


def addresses(stderr: str) -> dict[str, str]:
    """Pod -> loopback address, from run-local's final table."""
    return dict(re.findall(r"^(\S+)\s+(?:Succeeded|Failed|Running|Terminating|Deleted)\s+\d+\s+\S+\s+(127\.\d+\.\d+\.\d+)\s*$", stderr, re.MULTILINE))


RANK_LINE = re.compile(r"rank=(\d+) world=(\d+) allreduce=([0-9.e+-]+)")  # ranks print at once: lines may run together


def check_example(tmp: Path, tag: str, name: str, spec_patch: str, *args: str) -> None:
    """examples/local/<name>.yaml succeeds, every one of its 4 ranks printing the sum 10, and
    leaves no sshd behind."""
    done, why = run_example(tmp, tag, name, spec_patch, *args)
    assert done.returncode == 0, why
    assert sorted(RANK_LINE.findall(done.stdout)) == [(str(r), "4", "10") for r in range(4)], why
    assert not sshd_left(tmp)


def pod_env(out: Path, indent: int) -> str:
    """YAML env entries of a training container: E2E_OUT and the pod's name and IP (downward
    API), indented by `indent` spaces."""
    pad = " " * indent
    return (
        f"\n{pad}- name: E2E_OUT\n{pad}  value: {out}"
        f"\n{pad}- name: POD_NAME\n{pad}  valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}"
        f"\n{pad}- name: POD_IP\n{pad}  valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}"
    )
