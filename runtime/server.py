"""/healthz, /readyz and /metrics on one small HTTP server thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .metrics import Metrics

STALE_AFTER = 90.0  # seconds without a loop iteration before /healthz fails


class Health:
    """What the probes report: the loop's heartbeat, its watches, whether the caches are synced."""

    def __init__(self, watches_alive: Callable[[], bool] = lambda: True) -> None:
        self.beat = time.monotonic()
        self.ready = False
        self.watches_alive = watches_alive  # False when a watch has been silent past its deadline

    def alive(self) -> bool:
        return time.monotonic() - self.beat < STALE_AFTER and self.watches_alive()


def serve(port: int, health: Health, metrics: Metrics) -> ThreadingHTTPServer:
    """Start the probe and metrics server on a daemon thread."""
    routes: dict[str, Callable[[], tuple[int, str]]] = {
        "/healthz": lambda: (200, "ok\n") if health.alive() else (500, "loop stalled or a watch silent past its deadline\n"),
        "/readyz": lambda: (200, "ok\n") if health.ready else (503, "not synced\n"),
        "/metrics": lambda: (200, metrics.render()),
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            code, body = route() if route else (404, "not found\n")
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; version=0.0.4" if self.path.startswith("/metrics") else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
