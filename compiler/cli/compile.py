"""`flatjob compile` and `flatjob diff`: render job specs into an output folder, or show the change."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ..display import visible
from ..errors import Diagnostic, Severity
from ..heap import no_cyclic_gc
from ..options import RUNTIME_MODES, CompileOptions
from ..outdir import LinkFound, NotAFile
from .paths import ExistingPath

if TYPE_CHECKING:
    from ..journal import Session
    from ..output import TreeChanges

_SCHEDULERS = ["auto", "t9k", "kueue", "default"]


def _options(f: Any) -> Any:
    """Options shared by compile and diff."""
    decorators = [
        click.argument("sources", nargs=-1, required=True, type=ExistingPath()),
        click.option("-o", "--out", "out", required=True, type=click.Path(file_okay=False), help="Output folder: OUT/[<namespace>/]<job>/ per job, the runtime beside them."),
        click.option("--overlay", "overlays", multiple=True, type=ExistingPath(file_okay=False), help="Environment overlay folder; repeat to stack (default: none)."),
        click.option("-n", "--namespace", default=None, help="Namespace for jobs that set none (also enables <job>-<type>-<rank> DNS names; default: none: their manifests then name no namespace)."),
        click.option("--cluster-domain", default="cluster.local", show_default=True, help="The cluster's DNS domain."),
        click.option("--scheduler", type=click.Choice(_SCHEDULERS), default="auto", show_default=True, help="auto: T9k Scheduler when spec.scheduler.t9kScheduler is set; kueue: Kueue labels; default: kube-scheduler."),
        click.option("--kueue-queue", default=None, help="Kueue LocalQueue for --scheduler kueue (default: the T9k queue name)."),
        click.option("--runtime", "runtime", type=click.Choice(RUNTIME_MODES), default="namespace", show_default=True,
                     help="namespace: one runtime serves every job of a namespace (rendered once per namespace folder); job: one runtime per job, in its folder."),
        click.option("--runtime-image", default=None, help="Image of the runtime (default ghcr.io/flatjob/flatjob:<version>)."),
        # Accepted and ignored since pods left git (PodTemplates need no Flux annotation), so scripts keep working.
        click.option("--no-flux-annotations", is_flag=True, hidden=True),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


_OPTION_FLAGS = {"namespace": "--namespace", "cluster_domain": "--cluster-domain", "kueue_queue": "--kueue-queue", "runtime_image": "--runtime-image", "runtime": "--runtime"}


def _build_options(namespace: str | None, cluster_domain: str, scheduler: str, kueue_queue: str | None, runtime: str, runtime_image: str | None, no_flux_annotations: bool) -> CompileOptions:
    kw: dict[str, Any] = {"namespace": namespace, "cluster_domain": cluster_domain, "scheduler": scheduler, "kueue_queue": kueue_queue, "runtime": runtime}
    if runtime_image:
        kw["runtime_image"] = runtime_image
    options = CompileOptions(**kw)
    for name, why in options.problems().items():
        raise click.BadParameter(f"{getattr(options, name)!r} {why}", param_hint=_OPTION_FLAGS[name])
    return options


def _compile(sources: tuple[str, ...], overlays: tuple[str, ...], options: CompileOptions) -> Any:
    """Run the pipeline; on errors print them and exit 1 (nothing is written)."""
    # flatjob uses no pydantic plugins; looking for them scans every installed package's
    # metadata (~20 ms of a ~250 ms cold start).  Set before the models are first built.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from ..pipeline import compile_paths

    overlay = _overlay(overlays)
    with no_cyclic_gc():  # compiler/heap.py: the run's objects, kept to the end
        result = compile_paths(sources, options, overlay)
    if result.failed:
        errors = sum(d.is_error for d in result.diagnostics)
        _stop(result.diagnostics, f"flatjob: {errors} error(s); nothing was written")
    if result.diagnostics:
        _print(result.diagnostics)
    return result


def _print(diags: list[Diagnostic]) -> None:
    from ..report import format_text, use_color

    sys.stderr.write(format_text(diags, color=use_color(sys.stderr.isatty())))


def _stop(diags: list[Diagnostic], summary: str) -> NoReturn:
    _print(diags)
    click.echo(summary, err=True)
    sys.exit(1)


def _at(root: Path, rel: str, code: str, message: str, warning: bool = False) -> Diagnostic:
    path = str(root / rel) if rel else str(root)
    return Diagnostic(code, message, path, severity=Severity.WARNING if warning else Severity.ERROR)


def _foreign(root: Path) -> Diagnostic:
    from ..journal import JOURNAL

    return _at(root, JOURNAL, "FJ700", "is a journal no compile wrote in this folder on this machine (committed to git?); the next `flatjob compile` removes it and the staged files it names, and puts none of them in place")


_LINK = "is a symbolic link; flatjob never reads, writes or deletes through one in the output folder"
_BLOCKED = "is a folder where flatjob writes a file, or a file where it needs a folder"


def _link(root: Path, rel: str) -> Diagnostic:
    return _at(root, rel, "FJ702", _LINK)


def _blocked(root: Path, rel: str) -> Diagnostic:
    return _at(root, rel, "FJ702", _BLOCKED)


def _link_at(path: str) -> Diagnostic:
    return Diagnostic("FJ702", _LINK, path)


def _blocked_at(path: str) -> Diagnostic:
    return Diagnostic("FJ702", _BLOCKED, path)


@contextmanager
def _output(root: Path, write: bool) -> Iterator[Session]:
    """The locked output folder; links, a lock that never comes and I/O errors end the run (exit 1)."""
    from ..journal import LOCK_WAIT, Busy, session

    def waiting() -> None:
        click.echo(f"{visible(str(root))}: another flatjob compile is writing this folder; waiting for it (up to {LOCK_WAIT:.0f} s)", err=True)

    try:
        with session(root, write, on_wait=waiting) as s:
            if s.notes:
                _print([_at(root, "", "FJ705", note, warning=True) for note in s.notes])
            yield s
    except LinkFound as exc:
        _stop([_link_at(exc.where(root))], "flatjob: nothing was written.")
    except NotAFile as exc:
        _stop([_blocked_at(exc.where(root))], "flatjob: nothing was written.")
    except Busy:
        _stop([_at(root, "", "FJ704", f"another flatjob compile kept this folder locked for {LOCK_WAIT:.0f} s")], "flatjob: nothing was written.")
    except OSError as exc:
        click.echo(f"flatjob: cannot write {visible(str(exc.filename or root))}: {visible(str(exc.strerror or exc))}", err=True)
        sys.exit(1)


def _plan(s: Session, result: Any, root: Path) -> TreeChanges:
    """The changes a compile makes; links where it reads or writes end the run (FJ702).

    First, T9k's immutable fields against the records in OUT (FJ322, warnings).
    """
    from ..previous import check_previous

    previous = check_previous(s.dir, root, result.jobs)
    if previous:
        _print(previous)
    changes = s.plan(result.tree(root))
    if changes.links or changes.blocked:
        _stop([*(_link(root, rel) for rel in changes.links), *(_blocked(root, rel) for rel in changes.blocked)], "flatjob: nothing was written.")
    if changes.rivals:
        _stop([_rival(root, rel) for rel in changes.rivals], "flatjob: nothing was written; remove those files.")
    return changes


def _rival(root: Path, rel: str) -> Diagnostic:
    from ..output import RIVAL_MESSAGE

    return _at(root, rel, "FJ701", RIVAL_MESSAGE)


def _overlay(overlays: tuple[str, ...]) -> Any:
    from ..pipeline import no_overlay

    if not overlays:
        return no_overlay
    from ..overlay import load_overlays

    return load_overlays(overlays)


# compile's options as `--check` names them in the command that brings OUT up to date, with
# the value each has when not given.
_FIX_OPTIONS = (
    ("namespace", "-n", None),
    ("cluster_domain", "--cluster-domain", "cluster.local"),
    ("scheduler", "--scheduler", "auto"),
    ("kueue_queue", "--kueue-queue", None),
    ("runtime", "--runtime", "namespace"),
    ("runtime_image", "--runtime-image", None),
)


def fix_command(sources: tuple[str, ...], overlays: tuple[str, ...], out: str, opts: dict[str, Any]) -> str:
    """The compile that brings OUT up to date, as the user typed it less --check: a newcomer told
    to "run `flatjob compile`" runs it bare and gets a usage error (issue 25)."""
    import shlex

    words = ["flatjob", "compile", *sources]
    for overlay in overlays:
        words += ["--overlay", overlay]
    words += ["-o", out]
    for name, flag, default in _FIX_OPTIONS:
        if opts.get(name, default) != default:
            words += [flag, str(opts[name])]
    return shlex.join(words)


@click.command("compile")
@_options
@click.option("--check", is_flag=True, help="Write nothing; print a diff and exit 1 when the output folder is stale.")
@click.option("--force", is_flag=True, help="Overwrite files in the output folder that flatjob did not write.")
@click.option("--allow-empty", is_flag=True, help="Compile even when the sources hold no job (every rendered job is deleted).")
def compile_command(sources: tuple[str, ...], out: str, overlays: tuple[str, ...], check: bool, force: bool, allow_empty: bool, **opts: Any) -> None:
    """Compile T9k job specs in SOURCES into plain Kubernetes manifests under OUT.

    Each job gets a folder OUT/<job>/, or OUT/<namespace>/<job>/ for a job whose spec sets
    its namespace (-n only fills in the ones that set none: they stay at OUT/<job>/), with its record, Service, ConfigMap and PodTemplates (one
    per pod; the runtime creates the pods from them). The runtime that serves a namespace's
    jobs is runtime.yaml beside them (--runtime job: one in each job's folder). A
    kustomization.yaml at every level serves kubectl apply -k, Argo CD and Flux.
    Nothing is written unless every job compiles; OUT then changes as a whole (a compile
    that is killed is finished or undone by the next one) and files of removed jobs are
    pruned. One compile at a time writes a folder; another one waits for it.

    \b
    Exit status: 0 written (or up to date), 1 errors (or stale with --check), 2 usage error.
    """
    from ..display import log_line
    from ..output import DIFF_LINES, unified_diff

    result = _compile(sources, overlays, _build_options(**opts))
    root = Path(out)
    with _output(root, write=not check) as s:
        changes = _plan(s, result, root)
        if check:
            if s.interrupted:
                _print([_at(root, "", "FJ700", "a flatjob compile was killed while writing this folder; run `flatjob compile` to finish it")])
            elif s.foreign:
                _print([_foreign(root)])
            elif changes.empty:
                click.echo(f"{visible(str(root))}: up to date ({len(result.jobs)} job(s))", err=True)
                return
            sys.stdout.write(unified_diff(changes, DIFF_LINES))
            fix = log_line(fix_command(sources, overlays, out, opts))
            click.echo(f"{visible(str(root))}: stale: {len(changes.write)} file(s) to write, {len(changes.delete)} to delete; run and commit: {fix}", err=True)
            sys.exit(1)
        if changes.conflicts and not force:
            _stop([_at(root, rel, "FJ701", "exists and was not written by flatjob") for rel in changes.conflicts], "flatjob: refusing to overwrite; move those files or pass --force. Nothing was written.")
        if not result.jobs and changes.delete and not allow_empty:
            why = f"the sources hold no job: compiling would delete the {len(changes.delete)} rendered file(s) of every job here, and a GitOps tool that prunes would then delete the jobs from the cluster"
            _stop([_at(root, "", "FJ703", why)], "flatjob: nothing was written; pass --allow-empty if every job is meant to go.")
        s.apply(changes)
    click.echo(
        f"{visible(str(root))}: {len(result.jobs)} job(s), {len(changes.write)} file(s) written, {len(changes.delete)} deleted, {len(changes.unchanged)} unchanged",
        err=True,
    )


@click.command("diff")
@_options
@click.option("--exit-code", is_flag=True, help="Exit 1 when there are differences (like git diff --exit-code).")
def diff_command(sources: tuple[str, ...], out: str, overlays: tuple[str, ...], exit_code: bool, **opts: Any) -> None:
    """Show what `flatjob compile` would change in OUT, as a unified diff. Writes nothing.

    Past 20 000 lines the diff is cut, and each file cut short is named with the lines left out.

    \b
    Exit status: 0 (differences or not, unless --exit-code), 1 errors (or differences with
    --exit-code), 2 usage error.
    """
    from ..output import DIFF_LINES, unified_diff

    result = _compile(sources, overlays, _build_options(**opts))
    root = Path(out)
    with _output(root, write=False) as s:
        changes = _plan(s, result, root)
        if s.foreign:
            _print([replace(_foreign(root), severity=Severity.WARNING)])
    sys.stdout.write(unified_diff(changes, DIFF_LINES))
    if exit_code and not changes.empty:
        sys.exit(1)
