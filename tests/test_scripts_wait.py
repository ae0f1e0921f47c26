"""Waiting for peers: the real wait_for_peers.py (from a job's ConfigMap) against TCP
listeners on loopback addresses, and launch.sh's call of it.

Covers:
- exit 0 once every hostfile host accepts connections (DeepSpeed and ColossalAI hostfiles),
  also when a host comes up late;
- exit 1 within the timeout when hosts never appear, naming exactly those hosts;
- elastic mode (--min/--settle/--out): the run hostfile holds the lines of the hosts that
  answered; too few hosts fail; enough hosts by the deadline are enough;
- launch.sh passes --hostfile/--port 22/--timeout $FLATJOB_PEER_TIMEOUT (and --min/--out when
  elastic) and launches only after the wait succeeds, end to end with the real waiter.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from scriptkit import (
    Scripts,
    colossalai_job,
    compile_job,
    container,
    deepspeed_job,
    listeners,
    loopback_hostfile,
    stub_bin,
)

TIMEOUT = 0.4  # seconds; refused connections fail at once, so this is plenty on loopback
INTERVAL = 10.0  # seconds between rounds where a test checks the deadline is kept: far past TIMEOUT
# Seconds: a deadline a test's waiter must return before, on its hosts' answers or its settle;
# what it tells apart takes 0.3 s or less, so the rest is a loaded machine's (3 s was not always
# enough), and it stays under the run's own 20 s limit.
DEADLINE = 15


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stub_bin(tmp_path_factory.mktemp("bin"))


@pytest.fixture(scope="module")
def waiter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """wait_for_peers.py exactly as a compiled job's ConfigMap carries it."""
    data = compile_job(deepspeed_job({"run": {"python": ["t.py"]}}, sshd="/usr/sbin/sshd")).data
    path = tmp_path_factory.mktemp("waiter") / "wait_for_peers.py"
    path.write_text(data["wait_for_peers.py"])
    return path


def wait(waiter: Path, hostfile: Path, port: int, *args: str | float) -> tuple[int, str, float]:
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            str(waiter),
            "--hostfile",
            str(hostfile),
            "--port",
            str(port),
            "--interval",
            "0.1",
            *map(str, args),
        ],
        capture_output=True,
        text=True,
        timeout=20,
    )
    return proc.returncode, proc.stderr, time.monotonic() - started


def missing_named(stderr: str) -> list[str]:
    """The hosts the give-up message names (after its last ': ')."""
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("flatjob: gave up after"), last
    return last.rsplit(": ", 1)[1].split(", ")


FORMATS = {"deepspeed": " slots=2", "colossalai": ""}


@pytest.mark.parametrize("fmt", FORMATS)
def test_returns_when_every_host_accepts(tmp_path: Path, waiter: Path, fmt: str) -> None:
    with listeners(3) as (hosts, port):
        hostfile = tmp_path / "hostfile"
        hostfile.write_text("".join(f"{h}{FORMATS[fmt]}\n" for h in hosts))
        code, err, seconds = wait(waiter, hostfile, port, "--timeout", 10)
    # Exit 0 is the proof it returned on the hosts' answers (at its 10 s deadline it exits 1);
    # the seconds, an interpreter's start included, are the machine's: only under the deadline.
    assert (code, seconds < 10) == (0, True), err
    assert "3 of 3 peers accept ssh connections" in err


# (id, hostfile format, hosts, indexes listening, the hosts the message must name)
MISSING = [
    ("last", "deepspeed", 3, {0, 1}, ["127.0.0.3"]),
    ("first-and-last", "deepspeed", 4, {1, 2}, ["127.0.0.1", "127.0.0.4"]),
    ("none", "colossalai", 2, set(), ["127.0.0.1", "127.0.0.2"]),
]


@pytest.mark.parametrize(
    ("fmt", "count", "up", "named"), [m[1:] for m in MISSING], ids=[m[0] for m in MISSING]
)
def test_gives_up_in_time_naming_the_missing_hosts(
    tmp_path: Path, waiter: Path, fmt: str, count: int, up: set[int], named: list[str]
) -> None:
    with listeners(count, up=up) as (hosts, port):
        hostfile = tmp_path / "hostfile"
        hostfile.write_text("".join(f"{h}{FORMATS[fmt]}\n" for h in hosts))
        code, err, seconds = wait(waiter, hostfile, port, "--timeout", TIMEOUT, "--interval", INTERVAL)
    assert code == 1, err
    # Not before its deadline; and not an interval past it (a sleep or a connect time-out that
    # overran the deadline costs a whole INTERVAL): the rest of INTERVAL is a busy machine's.
    assert TIMEOUT <= seconds < INTERVAL
    assert missing_named(err) == named
    assert f"{len(named)} of {count} hosts never accepted connections on port {port}" in err


def test_waits_for_a_host_that_comes_up_late(tmp_path: Path, waiter: Path) -> None:
    with listeners(2, up={0}) as (hosts, port):
        hostfile = tmp_path / "hostfile"
        hostfile.write_text("".join(f"{h}\n" for h in hosts))
        late = socket.socket()
        late.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

        def come_up() -> None:
            time.sleep(0.4)
            late.bind((hosts[1], port))
            late.listen(4)

        t = threading.Thread(target=come_up)
        t.start()
        try:
            code, err, seconds = wait(waiter, hostfile, port, "--timeout", 10)
        finally:
            t.join()
            late.close()
    assert code == 0, err
    assert 0.4 <= seconds < 10  # exit 0 before its 10 s deadline: it saw the late host; how soon is the machine's


# --- elastic ------------------------------------------------------------------------------


def elastic_hostfile(tmp_path: Path, hosts: list[str]) -> Path:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{h} slots=2\n" for h in hosts))
    return hostfile


def test_elastic_writes_the_hosts_that_answered(tmp_path: Path, waiter: Path) -> None:
    out = tmp_path / "run-hostfile"
    with listeners(3, up={0, 2}) as (hosts, port):
        code, err, seconds = wait(
            waiter,
            elastic_hostfile(tmp_path, hosts),
            port,
            "--timeout",
            DEADLINE,
            "--min",
            2,
            "--settle",
            0.3,
            "--out",
            out,
        )
    assert code == 0, err
    assert out.read_text() == "127.0.0.1 slots=2\n127.0.0.3 slots=2\n"  # hostfile order, lines kept
    assert 0.3 <= seconds < DEADLINE  # settled, not ended by the deadline (also exit 0): how soon is the machine's


def test_elastic_with_every_host_up_does_not_settle(tmp_path: Path, waiter: Path) -> None:
    out = tmp_path / "run-hostfile"
    with listeners(2) as (hosts, port):
        code, err, seconds = wait(
            waiter,
            elastic_hostfile(tmp_path, hosts),
            port,
            "--timeout",
            DEADLINE,
            "--min",
            1,
            "--settle",
            30,
            "--out",
            out,
        )
    assert (code, seconds < DEADLINE) == (0, True), err  # settling would have lasted to the deadline
    assert out.read_text() == "127.0.0.1 slots=2\n127.0.0.2 slots=2\n"


def test_elastic_enough_hosts_by_the_deadline_is_enough(tmp_path: Path, waiter: Path) -> None:
    out = tmp_path / "run-hostfile"
    with listeners(3, up={1}) as (hosts, port):
        code, err, seconds = wait(
            waiter,
            elastic_hostfile(tmp_path, hosts),
            port,
            "--timeout",
            TIMEOUT,
            "--min",
            1,
            "--settle",
            30,
            "--out",
            out,
        )
    assert code == 0, err
    assert out.read_text() == "127.0.0.2 slots=2\n"
    assert seconds < DEADLINE  # ended by its deadline (TIMEOUT), never by the settle (30 s; the run's limit is 20 s)


def test_elastic_too_few_hosts_fail(tmp_path: Path, waiter: Path) -> None:
    out = tmp_path / "run-hostfile"
    with listeners(3, up={1}) as (hosts, port):
        code, err, _ = wait(
            waiter,
            elastic_hostfile(tmp_path, hosts),
            port,
            "--timeout",
            TIMEOUT,
            "--min",
            2,
            "--out",
            out,
        )
    assert code == 1, err
    assert missing_named(err) == ["127.0.0.1", "127.0.0.3"]
    assert not out.exists()


# --- launch.sh's call ----------------------------------------------------------------------

PY = {"run": {"python": ["t.py"]}}


def colossalai(bin_dir: Path) -> dict[str, str]:
    spec = {
        "torchConfig": {"script": ["t.py"]},
        "replicaSpecs": [
            {"type": "worker", "replicas": 2, "template": {"spec": {"containers": [container()]}}}
        ],
    }
    return compile_job(colossalai_job(spec, sshd=str(bin_dir / "sshd"))).data


def deepspeed(bin_dir: Path, **spec: object) -> dict[str, str]:
    return compile_job(deepspeed_job(PY, sshd=str(bin_dir / "sshd"), **spec)).data


ELASTIC = {"elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3}}
# (id, kind, elastic, FLATJOB_PEER_TIMEOUT, the waiter's --timeout)
CALLS = [
    ("deepspeed-default-timeout", "deepspeed", False, None, "600"),
    ("deepspeed-timeout-env", "deepspeed", False, "7", "7"),
    ("deepspeed-elastic", "deepspeed", True, None, "600"),
    ("colossalai", "colossalai", False, "9", "9"),
]


@pytest.mark.parametrize(
    ("kind", "elastic", "env_timeout", "timeout"), [c[1:] for c in CALLS], ids=[c[0] for c in CALLS]
)
def test_launch_calls_the_waiter(
    tmp_path: Path, bin_dir: Path, kind: str, elastic: bool, env_timeout: str | None, timeout: str
) -> None:
    data = (
        deepspeed(bin_dir, **(ELASTIC if elastic else {}))
        if kind == "deepspeed"
        else colossalai(bin_dir)
    )
    s = Scripts(tmp_path, data, bin_dir)
    up = tmp_path / "sshd.running"  # deepspeed: the background sshd's call is logged before the launcher runs
    run = s.run(env={**({"FLATJOB_PEER_TIMEOUT": env_timeout} if env_timeout else {}),
                     **({"STUB_BLOCK_SSHD": str(up), "STUB_AWAIT_DEEPSPEED": str(up)} if kind == "deepspeed" else {})})
    assert run.code == 0, run.stderr
    expected = [
        f"{s.dir}/wait_for_peers.py",
        "--hostfile",
        str(s.hostfile),
        "--port",
        "22",
        "--timeout",
        timeout,
    ]
    if kind == "deepspeed":  # worker-0's own sshd runs in the background: the wait watches it
        (bg,) = [c for c in run.of("sshd") if "-t" not in c.argv]
        expected += ["--sshd-pid", str(bg.pid)]
    if elastic:
        expected += ["--min", "1", "--out", str(s.run_hostfile)]
    assert run.waiter() == expected
    assert run.of(kind), "the launcher runs after a successful wait"


def real_waiter(s: Scripts, hosts: list[str], port: int, **env: str) -> dict[str, str]:
    """Environment for launch.sh: the python3 stub runs the real waiter on the test port."""
    hostfile = s.root / "loopback-hostfile"
    hostfile.write_text(loopback_hostfile(s.hostfile.read_text(), hosts))
    return {
        "FLATJOB_HOSTFILE": str(hostfile),
        "STUB_BLOCK_SSHD": str(s.root / "sshd.running"),  # DeepSpeed's worker-0: its sshd keeps running
        "STUB_EXEC_PYTHON3": json.dumps([sys.executable]),
        "STUB_APPEND_PYTHON3": json.dumps(
            ["--port", str(port), "--interval", "0.1", "--settle", "0.2"]
        ),
        **env,
    }


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_launch_end_to_end_waits_then_launches(tmp_path: Path, bin_dir: Path, kind: str) -> None:
    s = Scripts(
        tmp_path, deepspeed(bin_dir) if kind == "deepspeed" else colossalai(bin_dir), bin_dir
    )
    with listeners(2) as (hosts, port):
        run = s.run(env=real_waiter(s, hosts, port))
    assert run.code == 0, run.stderr
    assert "2 of 2 peers accept ssh connections" in run.stderr
    assert run.of(kind)


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_launch_end_to_end_fails_naming_the_missing_host(
    tmp_path: Path, bin_dir: Path, kind: str
) -> None:
    s = Scripts(
        tmp_path, deepspeed(bin_dir) if kind == "deepspeed" else colossalai(bin_dir), bin_dir
    )
    with listeners(2, up={0}) as (hosts, port):
        run = s.run(env=real_waiter(s, hosts, port, FLATJOB_PEER_TIMEOUT=str(TIMEOUT)))
    assert run.code == 1
    assert missing_named(run.stderr) == ["127.0.0.2"]
    assert not run.of(kind)


def test_launch_fails_at_once_when_its_own_sshd_exits(tmp_path: Path, bin_dir: Path) -> None:
    # DeepSpeed's worker-0 runs sshd in the background; one that cannot bind exits at once.
    s = Scripts(tmp_path, deepspeed(bin_dir), bin_dir)
    fake = tmp_path / "sshd-that-cannot-bind"
    fake.write_text('#!/bin/sh\ncase " $* " in *" -t "*) exit 0 ;; esac\necho "Bind to port 22 failed" >&2\nexit 255\n')
    fake.chmod(0o755)
    with listeners(2, up={0}) as (hosts, port):
        env = real_waiter(s, hosts, port, FLATJOB_PEER_TIMEOUT="30", STUB_EXEC_SSHD=json.dumps([str(fake)]))
        del env["STUB_BLOCK_SSHD"]
        run = s.run(env=env)
    assert run.code == 1
    assert "this pod's sshd (pid" in run.stderr and "has exited" in run.stderr
    assert run.seconds < 10 and not run.of("deepspeed")


def test_launch_end_to_end_elastic_runs_on_the_hosts_that_answered(
    tmp_path: Path, bin_dir: Path
) -> None:
    s = Scripts(tmp_path, deepspeed(bin_dir, **ELASTIC), bin_dir)
    with listeners(3, up={0, 1}) as (hosts, port):
        run = s.run(env=real_waiter(s, hosts, port, FLATJOB_PEER_TIMEOUT="10"))
    assert run.code == 0, run.stderr
    assert run.argv("deepspeed")[:2] == [
        f"--hostfile={s.run_hostfile}",
        "--master_addr=job-worker-0.job",
    ]
    assert s.run_hostfile.read_text() == "127.0.0.1 slots=1\n127.0.0.2 slots=1\n"
