"""`flatjob compile` and `flatjob diff`: render job specs into an output folder, or show the change."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ..options import CompileOptions

_SCHEDULERS = ["auto", "t9k", "kueue", "default"]


def _options(f: Any) -> Any:
    """Options shared by compile and diff."""
    decorators = [
        click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True)),
        click.option("-o", "--out", "out", required=True, type=click.Path(file_okay=False), help="Output folder (one sub-folder per job)."),
        click.option("--overlay", "overlays", multiple=True, type=click.Path(exists=True, file_okay=False), help="Environment overlay folder; repeat to stack."),
        click.option("-n", "--namespace", default=None, help="Namespace for jobs that set none (also enables <job>-<type>-<rank> DNS names)."),
        click.option("--cluster-domain", default="cluster.local", show_default=True, help="The cluster's DNS domain."),
        click.option("--scheduler", type=click.Choice(_SCHEDULERS), default="auto", show_default=True, help="auto: T9k Scheduler when spec.scheduler.t9kScheduler is set; kueue: Kueue labels; default: kube-scheduler."),
        click.option("--kueue-queue", default=None, help="Kueue LocalQueue for --scheduler kueue (default: the T9k queue name)."),
        click.option("--runtime-image", default=None, help="Image of the per-job runtime (default ghcr.io/flatjob/flatjob:<version>)."),
        click.option("--no-flux-annotations", is_flag=True, help="Do not annotate pods with kustomize.toolkit.fluxcd.io/ssa: IfNotPresent."),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


def _build_options(namespace: str | None, cluster_domain: str, scheduler: str, kueue_queue: str | None, runtime_image: str | None, no_flux_annotations: bool) -> CompileOptions:
    kw: dict[str, Any] = {"namespace": namespace, "cluster_domain": cluster_domain, "scheduler": scheduler, "kueue_queue": kueue_queue, "flux": not no_flux_annotations}
    if runtime_image:
        kw["runtime_image"] = runtime_image
    return CompileOptions(**kw)


def _run(sources: tuple[str, ...], out: str, overlays: tuple[str, ...], options: CompileOptions) -> tuple[Any, Any, Path]:
    # flatjob uses no pydantic plugins; looking for them scans every installed package's
    # metadata (~20 ms of a ~250 ms cold start).  Set before the models are first built.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from ..output import plan_changes
    from ..pipeline import compile_paths
    from ..report import format_text, use_color

    overlay = _overlay(overlays)
    with _no_cyclic_gc():
        result = compile_paths(sources, options, overlay)
    if result.failed:
        sys.stderr.write(format_text(result.diagnostics, color=use_color(sys.stderr.isatty())))
        errors = sum(d.is_error for d in result.diagnostics)
        click.echo(f"flatjob: {errors} error(s); nothing was written", err=True)
        sys.exit(1)
    root = Path(out)
    from ..previous import check_previous

    result.diagnostics.extend(check_previous(root, result.jobs))  # T9k's immutable fields vs the record in OUT (FJ322)
    if result.diagnostics:
        sys.stderr.write(format_text(result.diagnostics, color=use_color(sys.stderr.isatty())))
    return result, plan_changes(root, result.tree(root)), root


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while compiling.

    A compile allocates millions of short-lived, acyclic dicts and keeps every job's output
    until the end; each full collection rescans all of it, which made 50 000 pods cost
    ~15% more than 10x 5000 (bench/compile.py).  Reference counting still frees everything.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _overlay(overlays: tuple[str, ...]) -> Any:
    from ..pipeline import no_overlay

    if not overlays:
        return no_overlay
    from ..overlay import load_overlays

    return load_overlays(overlays)


@click.command("compile")
@_options
@click.option("--check", is_flag=True, help="Write nothing; print a diff and exit 1 when the output folder is stale.")
@click.option("--force", is_flag=True, help="Overwrite files in the output folder that flatjob did not write.")
def compile_command(sources: tuple[str, ...], out: str, overlays: tuple[str, ...], check: bool, force: bool, **opts: Any) -> None:
    """Compile T9k job specs in SOURCES into plain Kubernetes manifests under OUT.

    Each job gets a folder OUT/<job>/ with its record, Service, ConfigMap, Pods and runtime,
    plus a kustomization.yaml at every level for kubectl apply -k, Argo CD and Flux.
    Nothing is written unless every job compiles; files of removed jobs are pruned.

    \b
    Exit status: 0 written (or up to date), 1 errors (or stale with --check), 2 usage error.
    """
    from ..output import apply_changes, unified_diff

    result, changes, root = _run(sources, out, overlays, _build_options(**opts))
    if check:
        if changes.empty:
            click.echo(f"{root}: up to date ({len(result.jobs)} jobs)", err=True)
            return
        sys.stdout.write(unified_diff(root, changes))
        click.echo(f"{root}: stale: {len(changes.write)} file(s) to write, {len(changes.delete)} to delete; run `flatjob compile` and commit", err=True)
        sys.exit(1)
    if changes.conflicts and not force:
        for rel in changes.conflicts:
            click.echo(f"{root / rel}: exists and was not written by flatjob [FJ701]", err=True)
        click.echo("flatjob: refusing to overwrite; move those files or pass --force. Nothing was written.", err=True)
        sys.exit(1)
    apply_changes(root, changes)
    click.echo(
        f"{root}: {len(result.jobs)} job(s), {len(changes.write)} file(s) written, {len(changes.delete)} deleted, {len(changes.unchanged)} unchanged",
        err=True,
    )


@click.command("diff")
@_options
@click.option("--exit-code", is_flag=True, help="Exit 1 when there are differences (like git diff --exit-code).")
def diff_command(sources: tuple[str, ...], out: str, overlays: tuple[str, ...], exit_code: bool, **opts: Any) -> None:
    """Show what `flatjob compile` would change in OUT, as a unified diff. Writes nothing."""
    from ..output import unified_diff

    _, changes, root = _run(sources, out, overlays, _build_options(**opts))
    sys.stdout.write(unified_diff(root, changes))
    if exit_code and not changes.empty:
        sys.exit(1)
