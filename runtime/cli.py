"""Commands the runtime package contributes to `flatjob` (entry-point group flatjob.commands).

`flatjob runtime` is the entry point of the runtime image: it runs the controller of every
job of its namespace (or of one job, --kind and --name) until SIGTERM.  Importing this module is cheap; the kubernetes client is imported only
when the command runs.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

import click

from flatjob.compiler.cli.paths import ExistingPath
from flatjob.compiler.errors import RUNTIME_INSTALL

from .turns import CONCURRENCY

IDLE_WAKE = 30.0  # the loop checks for shutdown at least this often; no API call is made
MIN_WAIT = 0.01  # seconds the loop waits at least, whatever its wake time says
log = logging.getLogger("flatjob.runtime")
RUNTIME_EXTRA = ("kubernetes", "cryptography")  # what `pip install 'flatjob[runtime]'` adds


def missing_runtime_extra() -> str | None:
    """What to install when the runtime's own dependencies are absent (a plain `pip install
    flatjob` has only the compiler's), checked before any work so the answer comes first."""
    missing = [m for m in RUNTIME_EXTRA if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return f"flatjob's runtime needs {' and '.join(missing)} (the runtime extra): {RUNTIME_INSTALL}"


def run_loop(controller: Any, stop: threading.Event, notify: threading.Event, health: Any, wall: Any = lambda seconds: seconds) -> None:
    """Wait for watch events or the next timer, reconcile, repeat until `stop` is set.

    Nothing a cycle raises ends the loop (the controller contains its own failures; this is
    the last line of defence): the process ends only on SIGTERM/SIGINT.  `wall` turns
    seconds of the controller's clock into seconds to wait (tests run faster clocks).
    """
    controller.start()
    while not stop.is_set():
        health.beat = time.monotonic()
        health.ready = controller.synced()
        notify.clear()  # an event arriving from here on ends the wait below at once
        try:
            controller.step(0.0)
        except Exception:
            log.exception("runtime step failed")
            controller.metrics.inc("flatjob_loop_errors_total", op="step", status="exception")
        wake = controller.wake_at
        # A wake time already past waits MIN_WAIT: a timer nothing clears must cost a turn per
        # 10 ms, never a spinning core (review 24, round 3).
        timeout = IDLE_WAKE if wake is None else max(MIN_WAIT, min(IDLE_WAKE, wall(wake - controller.clock())))
        notify.wait(timeout)


def _cluster(identity: str) -> Any:
    """The API server to serve, from the pod's service account or else the kubeconfig. Neither
    (the command started outside a cluster, KUBECONFIG naming nothing) is the user's to fix,
    so it is said as such, not as an internal error of flatjob."""
    from .kube import KubeCluster, NoClusterConfig

    try:
        return KubeCluster(identity=identity)
    except NoClusterConfig as exc:
        raise click.ClickException(
            f"no cluster to serve: not in a pod (no service account) and no usable kubeconfig ({exc}); the runtime runs in the"
            " Deployment `flatjob compile` renders (runtime.yaml), or by hand with KUBECONFIG naming a cluster"
        ) from None


@click.command("runtime")
@click.option("--kind", default=None, type=click.Choice(["GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"]), help="Kind of the one job to serve (with --name); without both, every job of the namespace.")
@click.option("--name", default=None, help="Name of the one job to serve (with --kind).")
@click.option("--namespace", envvar="POD_NAMESPACE", default="default", show_default=True, help="Namespace of the jobs (POD_NAMESPACE).")
@click.option("--identity", envvar="POD_NAME", default=None, help="Lease holder identity (POD_NAME; default: the host name).")
@click.option("--http-port", default=8080, show_default=True, help="Port of /healthz, /readyz and /metrics.")
@click.option("--log-level", default="INFO", show_default=True, type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]), help="Least severe level logged (JSON lines on stderr).")
@click.option("--concurrency", type=click.IntRange(1, 64), default=CONCURRENCY, show_default=True,
              help="Jobs whose cycles run at once (namespace mode); a cycle waiting on a request for more than 0.5 s frees its place (up to 8x this many threads), so jobs whose requests hang never hold the others.")
def runtime_command(kind: str | None, name: str | None, namespace: str, identity: str | None, http_port: int, log_level: str, concurrency: int) -> None:
    """Run the in-cluster runtime (the entry point of the runtime image): of every flatjob job
    of the namespace (compiled with --runtime namespace, the default), or of one job (--kind
    and --name; compiled with --runtime job).

    It creates the jobs' pods from their PodTemplates, releases each gang, restarts them by
    policy, resizes elastic jobs, creates the SSH key Secrets and writes the records' status.
    It never changes what git renders.
    """
    if (kind is None) != (name is None):
        raise click.UsageError("--kind and --name go together (one job); leave both out to serve the namespace")
    missing = missing_runtime_extra()
    if missing is not None:  # `pip install flatjob` without the runtime extra
        raise click.UsageError(missing)
    from . import logs
    from .controller import Controller
    from .server import Health, serve

    logs.setup(log_level)
    identity = identity or os.uname().nodename
    cluster = _cluster(identity)  # the pod's name in the API server's audit log
    controller = Controller(cluster, namespace, kind, name, identity=identity, concurrency=concurrency, notify=cluster.notify, mono=time.monotonic)
    deadline = 2 * cluster.timeouts.watch_read  # one missed bookmark and a reconnect, then /healthz fails
    health = Health(lambda: controller.healthy(deadline))
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
        controller.close()
    sys.exit(0)


@click.command("run-local")
@click.argument("path", type=ExistingPath())
@click.option("--job", "job_name", default=None, help="Run only this job of PATH (NAME, or NAMESPACE/NAME; default: every job of PATH).")
@click.option("--overlay", "overlays", multiple=True, type=ExistingPath(file_okay=False), help="Environment overlay folder, as for compile; repeat to stack (default: none).")
@click.option("--replicas-scale", "replicas", multiple=True, metavar="TYPE=N", help="Run N replicas of TYPE instead of the job's count (repeatable), e.g. worker=1.")
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE", help="Set NAME in every container; also supplies values that come from Secrets or ConfigMaps.")
@click.option("--skip-env-from", is_flag=True, help="Ignore envFrom Secrets/ConfigMaps (pass what they hold with --env).")
@click.option("--only-training", is_flag=True, help="Run only each pod's training container (no init containers, no sidecars).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS", help="Stop everything and exit 1 if a job has not finished by then (default: no limit).")
@click.option("--backoff-scale", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True, metavar="FACTOR", help="Multiply the restart back-off (10 s doubling to 5 min); e.g. 0.05 for a quick smoke test.")
def run_local_command(path: str, job_name: str | None, overlays: tuple[str, ...], replicas: tuple[str, ...], env: tuple[str, ...], skip_env_from: bool, only_training: bool, timeout: float | None, backoff_scale: float) -> None:
    """Run a job, or every job of a folder at once, on this machine: every pod's containers as
    local processes (Linux).

    PATH is a job file or a folder, as for `flatjob compile`; its jobs must share a namespace.
    They are compiled exactly as `flatjob compile` does, except that every pod's address is
    its own loopback IP (127.0.1.1, 127.0.1.2, ...; each job in a block of its own: 127.0.2.x,
    ...); env, commands and launcher flags are the rendered ones. The namespace's runtime
    releases, restarts and finishes the jobs, so restart policies, backoffLimit,
    success/failure rules and deadlines behave as in a cluster. Logs go to stdout as
    `[pod] line`; a status table (a section per job) goes to stderr.
    DeepSpeedJob and ColossalAIJob run with a real sshd per pod on port 22 of its address
    (as root; with openssh-server, pdsh, deepspeed or colossalai installed).

    \b
    Out of reach here, by design:
      - images: commands run with this machine's PATH and Python (activate the
        environment that has your framework installed); a container needs a command
      - GPUs: everything runs on CPU (use gloo; lower procPerNode / --replicas-scale)
      - volumes: not mounted; paths in the job refer to this machine's filesystem
      - a program that binds 0.0.0.0 on a fixed port in several pods collides here;
        torch's store does: jobs run together need store ports of their own
    Needs the runtime's dependencies: pip install -e '.[runtime]' in your clone.
    Docs: docs/run-local.md.

    \b
    Exit status: 0 every job Succeeded, 1 one Failed (or --timeout), 2 they cannot run
    here, 130/143 stopped by Ctrl-C/SIGTERM (every process is stopped first).
    """
    from .local.compiling import CompileFailed, compile_local, parse_replicas
    from .local.containers import Options
    from .local.errors import LocalError
    from .local.processes import become_subreaper, kill_descendants
    from .local.runner import EXIT_SIGNAL, EXIT_USAGE, Runner, Settings
    from .local.table import Screen

    missing = missing_runtime_extra()
    if missing is not None:
        click.echo(f"flatjob run-local: {missing}", err=True)
        sys.exit(EXIT_USAGE)
    screen = Screen()
    try:
        overrides = dict(_pair(e, "--env") for e in env)
        jobs = compile_local(path, overlays, parse_replicas(replicas), job_name)
        settings = Settings(timeout, backoff_scale, Options(overrides, skip_env_from, only_training, os.getcwd()))
        own = sys.argv[1:2] == ["run-local"]  # this process is `flatjob run-local`'s alone (not a caller's, in-process)
        if own:
            become_subreaper()  # a process that left its container's mark and session is still ours at the end
        try:
            code = Runner(jobs, settings, screen).run()
        finally:
            if own:
                kill_descendants()  # nothing below run-local outlives the run
    except CompileFailed as exc:  # the diagnostics as lint prints them, each line `path:line:col: error: ...`
        click.echo(str(exc), err=True)
        sys.exit(EXIT_USAGE)
    except LocalError as exc:
        click.echo(f"flatjob run-local: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:  # Ctrl-C before the run started (it traps signals once it runs)
        sys.exit(EXIT_SIGNAL[signal.SIGINT])
    sys.exit(code)


def _pair(item: str, flag: str) -> tuple[str, str]:
    """NAME=VALUE from a repeatable option."""
    from .local.errors import LocalError

    name, eq, value = item.partition("=")
    if not eq or not name:
        raise LocalError(f"{flag} {item!r}: expected NAME=VALUE")
    return name, value
