"""Commands the runtime package contributes to `flatjob` (entry-point group flatjob.commands).

`flatjob runtime` is the entry point of the runtime image: it runs one job's controller
until SIGTERM.  Importing this module is cheap; the kubernetes client is imported only
when the command runs.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

import click

IDLE_WAKE = 30.0  # the loop checks for shutdown at least this often; no API call is made


def run_loop(controller: Any, stop: threading.Event, notify: threading.Event | None, health: Any) -> None:
    """Wait for watch events or the next timer, reconcile, repeat until `stop` is set."""
    controller.start()
    health.ready = True
    controller.step(0.0)
    while not stop.is_set():
        health.beat = time.monotonic()
        wake = controller.wake_at
        timeout = IDLE_WAKE if wake is None else max(0.0, min(IDLE_WAKE, wake - controller.clock()))
        if notify is not None:
            notify.wait(timeout)
            notify.clear()
            controller.step(0.0)
        else:
            controller.step(timeout)


@click.command("runtime")
@click.option("--kind", required=True, type=click.Choice(["GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"]), help="Kind of the job record.")
@click.option("--name", required=True, help="Name of the job record.")
@click.option("--namespace", envvar="POD_NAMESPACE", default="default", show_default=True, help="Namespace of the job (POD_NAMESPACE).")
@click.option("--identity", envvar="POD_NAME", default=None, help="Lease holder identity (POD_NAME; default: the host name).")
@click.option("--http-port", default=8080, show_default=True, help="Port of /healthz, /readyz and /metrics.")
@click.option("--log-level", default="INFO", show_default=True, type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))
def runtime_command(kind: str, name: str, namespace: str, identity: str | None, http_port: int, log_level: str) -> None:
    """Run the in-cluster runtime of one job (the entry point of the runtime image).

    It releases the job's gated pods, restarts them by policy, resizes elastic jobs, creates
    the SSH key Secret and writes the record's status. It never changes what git renders.
    """
    from . import logs
    from .controller import Controller
    from .kube import KubeCluster
    from .server import Health, serve

    logs.setup(log_level)
    cluster = KubeCluster()
    controller = Controller(cluster, namespace, kind, name, identity=identity or os.uname().nodename)
    health = Health()
    serve(http_port, health, controller.metrics)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
        cluster.notify.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        run_loop(controller, stop, cluster.notify, health)
    finally:
        controller.release_lease()
        controller.pods.close()
        controller.records.close()
    sys.exit(0)
