"""Helpers for run-local's end-to-end tests: run `flatjob run-local` on a job text, find leftovers."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

SCRIPTS = Path(__file__).parent / "scripts"
BIN = str(Path(sys.executable).parent)  # torchrun and python of this environment


def free_port() -> int:
    """A TCP port nothing listens on now (the job's MASTER_PORT, so parallel runs do not collide)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@dataclass
class Run:
    """What `flatjob run-local` did."""

    code: int
    stdout: str
    stderr: str
    seconds: float

    def explain(self) -> str:
        return f"exit {self.code} after {self.seconds:.1f}s\n--- stdout\n{self.stdout[-4000:]}\n--- stderr\n{self.stderr[-4000:]}"


def command(job: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "flatjob.compiler.cli", "run-local", str(job), *args]


def environment(tag: str) -> dict[str, str]:
    """This environment with its bin folder first on PATH, quiet warnings and a tag every pod inherits."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONWARNINGS": "ignore", "E2E_TAG": tag}
    return env


def write_job(tmp: Path, text: str) -> Path:
    path = tmp / "job.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def write_jobs(tmp: Path, texts: dict[str, str]) -> Path:
    """A folder `jobs` holding one file per job (name -> its text)."""
    folder = tmp / "jobs"
    folder.mkdir()
    for name, text in texts.items():
        (folder / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


def run_local(tmp: Path, text: str, *args: str, tag: str, timeout: float = 90, env: dict[str, str] | None = None) -> Run:
    """Write the job and run it with `flatjob run-local` to its end."""
    return run_path(write_job(tmp, text), *args, tag=tag, timeout=timeout, env=env, cwd=tmp)


def run_path(path: Path, *args: str, tag: str, timeout: float = 90, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    """Run `flatjob run-local PATH` (a job file or a folder) to its end."""
    started = time.monotonic()
    done = subprocess.run(command(path, "--timeout", str(timeout), *args), env=env or environment(tag), cwd=cwd or path.parent, capture_output=True, text=True, timeout=timeout + 60)
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def tagged(tag: str) -> list[int]:
    """Pids of live processes that inherited E2E_TAG=<tag> (zombies excluded)."""
    needle = f"E2E_TAG={tag}".encode()
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(pid))
    return found


def kill_tagged(tag: str) -> None:
    """Clean up after a failed test, so one failure does not leak processes into the next."""
    for pid in tagged(tag):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
