"""Loopback addresses: each pod gets its own 127.0.x.y, so pods may share a port as in a cluster.

The addresses themselves are chosen by the compiler (CompileOptions.local_addresses), so
MASTER_ADDR, the rendezvous endpoint and GenericJob's $(service...) values all carry them;
this module picks each job's block of them (127.0.<block>.x, a block per job of the run, so
no two jobs share an address), checks that the machine answers on them before anything
starts, and finds the fixed ports several jobs would bind on every address at once.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from flatjob.compiler.digits import port

from .errors import Unsupported

MAX_BLOCK = 254  # 127.0.1.x to 127.0.254.x
PER_BLOCK = 254  # pods per block (the compiler's local_address: 127.0.B.1 to 127.0.B.254)


def unbindable(addresses: Iterable[str]) -> list[str]:
    """The addresses this machine cannot bind a socket to (all of 127/8 works on Linux)."""
    bad = []
    for ip in addresses:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((ip, 0))
        except OSError:
            bad.append(ip)
    return bad


def check_loopback(addresses: Iterable[str]) -> None:
    """Refuse to start when a pod's loopback address is not usable here."""
    bad = unbindable(addresses)
    if bad:
        raise Unsupported(
            f"cannot bind to {', '.join(bad)}: run-local gives every pod its own loopback address, "
            "which Linux provides for all of 127.0.0.0/8; elsewhere add them first "
            f"(macOS: sudo ifconfig lo0 alias {bad[0]} up)"
        )


# --- a block per job ------------------------------------------------------------------------

Claim = Callable[[int, Collection[int]], tuple[int, Any]]  # (pods, blocks to skip) -> (block, lock)


def span(pods: int) -> range:
    """How many blocks a job of `pods` pods takes, as offsets from its first block."""
    return range(max(1, -(-pods // PER_BLOCK)))


def free_block(used: Collection[int], pods: int) -> int:
    """The first block where a job of `pods` pods shares no block with `used`."""
    for block in range(1, MAX_BLOCK + 1):
        taken = [block + i for i in span(pods)]
        if taken[-1] <= MAX_BLOCK and not any(b in used for b in taken):
            return block
    raise Unsupported(f"no block of loopback addresses is left for {pods} more pods (127.0.1.x to 127.0.{MAX_BLOCK}.x)")


def place(jobs: Sequence[tuple[int, bool]], claim: Claim) -> list[tuple[int, Any]]:
    """(block, lock) of each job of the run, given (pods, needs port 22) for each, in order.

    No two jobs of the run share a block.  A job whose pods run sshd claims its block
    (runtime/local/ssh.py claim_block: a lock concurrent runs respect, port 22 free on every
    address); the others take the first block left, 127.0.1.x for the first job.
    """
    used: set[int] = set()
    out: list[tuple[int, Any]] = []
    try:
        for pods, ssh in jobs:
            block, lock = claim(pods, frozenset(used)) if ssh else (free_block(used, pods), None)
            used.update(block + i for i in span(pods))
            out.append((block, lock))
    except Exception:
        for _, lock in out:
            if lock is not None:
                lock.close()
        raise
    return out


# --- ports bound on every address -------------------------------------------------------------

# torch's TCPStore listens on every address of the machine (0.0.0.0 / ::), whichever address it
# is given: on one machine two jobs with the same store port collide, where pods of a cluster
# each have a network of their own.  The port is in the rendered command lines, scripts or env.
STORE_PORT = re.compile(r"--(?:master[_-]port|rdzv[_-]endpoint[= ][^\s:]*:)[= ]?([0-9]+)")


def store_ports(pods: Iterable[Mapping[str, Any]], files: Mapping[str, str]) -> set[int]:
    """Ports a job's pods would host torch's store on: --master_port, the --rdzv_endpoint's
    port, a literal MASTER_PORT, in its containers and its ConfigMap's scripts; a value that
    is no port (1..65535 in ASCII digits) binds nothing, so it shares nothing either."""
    texts = list(files.values())
    found: list[int | None] = []
    for pod in pods:
        spec = pod.get("spec") or {}
        for c in (*(spec.get("initContainers") or []), *(spec.get("containers") or [])):
            texts.append(" ".join(map(str, (*(c.get("command") or []), *(c.get("args") or [])))))
            found += [port(e.get("value")) for e in c.get("env") or [] if e.get("name") == "MASTER_PORT"]
    for text in texts:
        found += map(port, STORE_PORT.findall(text))
    return {p for p in found if p is not None}


def shared_ports(jobs: Mapping[str, set[int]]) -> list[str]:
    """A warning for each port more than one job (name -> its store ports) would bind."""
    users: dict[int, list[str]] = {}
    for name, ports in jobs.items():
        for number in ports:
            users.setdefault(number, []).append(name)
    return [
        f"{', '.join(names[:-1])} and {names[-1]} {'both' if len(names) == 2 else 'all'} host torch's store on port {port}, "
        "which torch binds on every address of this machine: while one of them holds it, the others fail to start theirs "
        "here (in a cluster each pod has a network of its own); give each job a port of its own (MASTER_PORT, "
        "--master_port; examples/local/together shows it as an overlay)"
        for port, names in sorted(users.items()) if len(names) > 1
    ]
