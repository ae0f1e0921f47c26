"""Loopback addresses: each pod gets its own 127.0.x.y, so pods may share a port as in a cluster.

The addresses themselves are chosen by the compiler (CompileOptions.local_addresses), so
MASTER_ADDR, the rendezvous endpoint and GenericJob's $(service...) values all carry them;
this module only checks that the machine answers on them before anything starts.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from .errors import Unsupported


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
