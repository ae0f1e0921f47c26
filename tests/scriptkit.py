"""Run the generated launch scripts for real, against stub programs that record their calls.

- `compile_job(job)`: a job dict through the real pipeline (YAML text in, emitted files out);
  `Compiled.data` is the job's ConfigMap read back from the emitted config.yaml;
- `stub_bin(folder)`: stub deepspeed, colossalai, sshd, ssh-keygen, mkdir, python3
  (tests/stubs/stub.py) in a folder put first on PATH; sshd is reached through
  spec.ssh.sshdPath, so `deepspeed_job`/`colossalai_job` take the stub's path (`sshd=`);
- `Scripts`: the ConfigMap materialised in a temp folder; `run()`/`start()` execute
  `/bin/sh <script>` (dash on Debian: a strict POSIX shell) with FLATJOB_DIR, FLATJOB_HOSTFILE,
  FLATJOB_RUN_HOSTFILE, FLATJOB_SSH_DIR, FLATJOB_SSHD_CONFIG, FLATJOB_POD_ENV and TMPDIR
  pointing into it; `Run` holds what the stubs saw;
- `listeners(...)`: TCP listeners on loopback addresses, standing in for peers' sshd.

Used by tests/test_scripts_*.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from manifestkit import pods_of

from flatjob.compiler.loader import Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents
from flatjob.compiler.pipeline import compile_job as render_unchecked
from flatjob.compiler.validate import Validated, validate_document
from flatjob.compiler.validate.typed import validate_model

API = "batch.tensorstack.dev/v1beta1"
STUB = Path(__file__).resolve().parent / "stubs" / "stub.py"
PROGRAMS = ("deepspeed", "colossalai", "sshd", "ssh-keygen", "mkdir", "python3")
SH = "/bin/sh"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
# Arguments a shell would mangle if any step of the way forgot to quote.
HOSTILE = [
    "two words",
    "it's",
    'say "hi"',
    "$HOME",
    "${PATH}",
    "$(touch pwned)",
    "`touch pwned`",
    "a;touch pwned",
    "x && touch pwned",
    "|| touch pwned",
    "> pwned",
    "*",
    "?",
    "[a-z]*",
    "~",
    "line1\nline2",
    "\n",
    "trailing\n",
    "--leading-dashes",
    "-x",
    "-",
    "",
    " ",
    "tab\there",
    "ünïcødé ✓ 日本語",
    "back\\slash",
    "'",
    '"',
    "\\",
    "#not-a-comment",
    "!bang",
    "%s %d",
    "a=b",
    "yes",
    "0x1F",
    "null",
    "{a: b}",
    "- item",
]


# --- compiling --------------------------------------------------------------------------


@dataclass
class Compiled:
    """One compiled job: its emitted files and its ConfigMap's data."""

    files: dict[str, str]
    objects: list[dict[str, Any]]

    @property
    def data(self) -> dict[str, str]:
        (cm,) = [o for o in self.objects if o["kind"] == "ConfigMap"]
        return cm["data"]

    def pod(self, name: str) -> dict[str, Any]:
        return next(p for p in pods_of(self.objects) if p["metadata"]["name"] == name)


def compile_job(job: dict[str, Any], refused: frozenset[str] = frozenset()) -> Compiled:
    """Compile one job dict as a user's YAML file; fail on any error but the `refused` codes,
    which lint reports and compile would refuse: the scripts are rendered anyway, so a test
    can show that they stay safe behind lint too (defence in depth)."""
    text = yaml.dump(job, Dumper=DUMPER, sort_keys=False, allow_unicode=True)
    docs, problems = parse(text, "job.yaml")
    assert not problems, problems
    if refused:
        v = validate_document(docs[0])
        assert {d.code for d in v.diagnostics if d.is_error} <= refused, [d.message for d in v.diagnostics]
        typed, _ = validate_model(docs[0])
        files = render_unchecked(Validated(docs[0], typed), CompileOptions()).files
    else:
        result = compile_documents(Loaded(jobs=docs), CompileOptions())
        assert not result.failed, [d.message for d in result.diagnostics]
        files = result.jobs[0].files
    objects = [
        o
        for rel, body in sorted(files.items())
        if rel != "kustomization.yaml"
        for o in yaml.load_all(body, LOADER)
        if o
    ]
    return Compiled(files, objects)


def container(name: str = "worker", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "img:1", **fields}


def deepspeed_job(
    config: dict[str, Any],
    *,
    replicas: int = 2,
    sshd: str,
    name: str = "job",
    env: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A DeepSpeedJob whose sshd is the stub at `sshd`."""
    c = container(env=env) if env is not None else container()
    return {
        "apiVersion": API,
        "kind": "DeepSpeedJob",
        "metadata": {"name": name},
        "spec": {
            "config": config,
            "ssh": {"sshdPath": sshd},
            **spec,
            "worker": {"replicas": replicas, "template": {"spec": {"containers": [c]}}},
        },
    }


def colossalai_job(spec: dict[str, Any], *, sshd: str, name: str = "cai") -> dict[str, Any]:
    """A ColossalAIJob (either shape) whose sshd is the stub at `sshd`."""
    return {
        "apiVersion": API,
        "kind": "ColossalAIJob",
        "metadata": {"name": name},
        "spec": {"ssh": {"sshdPath": sshd}, **spec},
    }


# --- stubs and runs ---------------------------------------------------------------------


def stub_bin(folder: Path) -> Path:
    """Install the stub under every program's name; returns the folder (for PATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    code = STUB.read_text(encoding="utf-8")
    for prog in PROGRAMS:
        path = folder / prog
        path.write_text(f"#!{sys.executable} -SE\n{code}", encoding="utf-8")
        path.chmod(0o755)
    return folder


@dataclass
class Call:
    """One stub call as recorded."""

    prog: str
    event: str
    pid: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    signal: int | None = None


@dataclass
class Run:
    """A finished script run: exit code, output and the stubs' records in order."""

    code: int
    stdout: str
    stderr: str
    calls: list[Call]
    seconds: float

    def of(self, prog: str) -> list[Call]:
        return [c for c in self.calls if c.prog == prog and c.event == "call"]

    def argv(self, prog: str) -> list[str]:
        """The argv of the one call of `prog`."""
        (call,) = self.of(prog)
        return call.argv

    def waiter(self) -> list[str]:
        """The argv of the one python3 call that runs wait_for_peers.py (others list env names)."""
        (call,) = [c for c in self.of("python3") if any(a.endswith("wait_for_peers.py") for a in c.argv)]
        return call.argv

    def signals(self, prog: str) -> list[int]:
        return [c.signal for c in self.calls if c.prog == prog and c.event == "signal" and c.signal]


class Scripts:
    """A job's ConfigMap files in `root/flatjob`, run with stubs first on PATH."""

    def __init__(self, root: Path, data: dict[str, str], bin_dir: Path) -> None:
        self.root = root
        self.dir = root / "flatjob"
        self.dir.mkdir(parents=True, exist_ok=True)
        for name, text in data.items():
            (self.dir / name).write_text(text, encoding="utf-8")
            (self.dir / name).chmod(0o755)  # the ConfigMap volume's defaultMode
        self.bin = bin_dir
        self.log = root / "stub.log"
        self.cwd = root / "cwd"
        self.cwd.mkdir(exist_ok=True)
        self.hostfile = self.dir / "hostfile"
        self.run_hostfile = root / "run-hostfile"
        self.pod_env = root / "pod-env"
        self.ssh_dir = root / "ssh"
        self.passwd_home = root / "passwd-home"  # OpenSSH's home (the scripts link keys there)
        self.sshd_config = root / "sshd_config"
        self.tmp = root / "tmp"
        self.tmp.mkdir(exist_ok=True)

    def environ(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(self.root),
            "LC_ALL": "C.UTF-8",
            "FLATJOB_DIR": str(self.dir),
            "FLATJOB_HOSTFILE": str(self.hostfile),
            "FLATJOB_RUN_HOSTFILE": str(self.run_hostfile),
            "FLATJOB_SSH_DIR": str(self.ssh_dir),
            "FLATJOB_SSH_HOME": str(self.passwd_home),  # never this machine's /root/.ssh
            "FLATJOB_SSHD_CONFIG": str(self.sshd_config),
            "FLATJOB_POD_ENV": str(self.pod_env),
            "TMPDIR": str(self.tmp),
            "STUB_LOG": str(self.log),
        }
        env.update(extra or {})
        return {k: v for k, v in env.items() if v is not None}

    def start(
        self, script: str = "launch.sh", env: dict[str, str] | None = None, shell: str = SH
    ) -> subprocess.Popen[str]:
        self.log.write_text("", encoding="utf-8")
        return subprocess.Popen(
            [shell, str(self.dir / script)],
            cwd=self.cwd,
            env=self.environ(env),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, which finish() ends whole, as a pod's end would
        )

    def finish(self, proc: subprocess.Popen[str], started: float | None = None) -> Run:
        """Wait for a started script (20 s at most) and collect what the stubs saw; stubs left
        running (a blocking background sshd) are killed, as a pod's end would."""
        started = time.monotonic() if started is None else started
        hung = None
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # say what was still running, then end it all
            hung = _states([proc.pid, *(c.pid for c in self.calls())])
            proc.kill()
        finally:
            calls = self.calls()
            # What is left of the script's processes holds its output pipes open: end the whole
            # group, since a stub the script started just before it ended (a background sshd under
            # load) may not have logged its call yet, and killing by the log alone missed it.
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            for c in calls:
                with contextlib.suppress(OSError):
                    os.kill(c.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=20)
        assert hung is None, f"the script did not end in 20 s; processes: {hung}; stub calls: {[(c.prog, c.event, c.pid) for c in calls]}; stderr: {err[-2000:]}"
        return Run(proc.returncode, out, err, calls, time.monotonic() - started)

    def run(self, script: str = "launch.sh", env: dict[str, str] | None = None, shell: str = SH) -> Run:
        """Run a script to its end (`shell`: /bin/sh, dash here, or another a pod's image may have)."""
        started = time.monotonic()
        return self.finish(self.start(script, env, shell), started)

    def calls(self) -> list[Call]:
        lines = self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []
        return [Call(**{"argv": [], "env": {}, "cwd": "", **json.loads(ln)}) for ln in lines]

    def signal_while(self, prog: str, signum: int, env: dict[str, str] | None = None) -> Run:
        """Run the launch with `prog` blocking, send `signum` to the script once it runs."""
        marker = self.root / f"{prog}.running"
        key = prog.upper().replace("-", "_")
        started = time.monotonic()
        proc = self.start(env={f"STUB_BLOCK_{key}": str(marker), **(env or {})})
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - started < 10, f"{prog} never started"
            time.sleep(0.01)
        os.kill(proc.pid, signum)
        return self.finish(proc, started)


def _states(pids: list[int]) -> dict[int, str]:
    """Each pid's command and state line from /proc (what a hung script's test reports)."""
    out = {}
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines()
            out[pid] = " ".join(ln for ln in status if ln.startswith(("Name:", "State:", "SigCgt:", "SigPnd:", "ShdPnd:")))
        except OSError:
            out[pid] = "gone"
    return out


SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT}


# --- peers --------------------------------------------------------------------------------


@contextmanager
def listeners(count: int, *, up: set[int] | None = None) -> Iterator[tuple[list[str], int]]:
    """`count` loopback hosts 127.0.0.1.. on one free port; only those indexed in `up` (all by
    default) accept connections.  Yields (hosts, port)."""
    hosts = [f"127.0.0.{i + 1}" for i in range(count)]
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    socks = []
    try:
        for i, host in enumerate(hosts):
            if up is None or i in up:
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
                s.listen(16)
                socks.append(s)
        yield hosts, port
    finally:
        for s in socks:
            s.close()


def loopback_hostfile(hostfile: str, hosts: list[str]) -> str:
    """The same hostfile with its hosts replaced, in order, by `hosts` (slots kept)."""
    lines = [ln for ln in hostfile.splitlines() if ln.strip()]
    assert len(lines) == len(hosts)
    return "".join(f"{h}{ln[len(ln.split()[0]) :]}\n" for h, ln in zip(hosts, lines, strict=True))
