"""Argo CD Config Management Plugin: print a repository's rendered manifests on stdout.

Argo CD runs the plugin's `generate` command in the Application's directory with the
Application's settings in the environment; stdout must hold only manifests, problems go to
stderr, and a non-zero exit fails the sync.  overlays/argocd/plugin.yaml runs
`flatjob-cmp` (a console script: `python -m` would import modules from the repository); every setting is an ARGOCD_ENV_* variable (set them in the
Application's `spec.source.plugin.env`, without the prefix):

    SOURCES        job files or folders, space-separated (default: .)
    OVERLAY        overlay folders, space- or comma-separated, applied in order
    NAMESPACE      namespace for jobs that set none (default: ARGOCD_APP_NAMESPACE)
    SCHEDULER      auto | t9k | kueue | default
    RUNTIME        namespace | job (default: namespace; job: each job's own runtime)
    KUEUE_QUEUE, RUNTIME_IMAGE, CLUSTER_DOMAIN   as the flatjob compile options
    ALLOW_EMPTY    true: generate even when the sources hold no job (else that is an error,
                   since Argo CD would prune every job of the Application)

Sources and overlays must lie inside the repository (the working directory, less the
Application's ARGOCD_APP_SOURCE_PATH): the repository's content is a pull request's, the
plugin must not read the repo-server's own files.  Nothing an input holds ever reaches
stderr as a traceback: every problem is a diagnostic (exit 1) or a usage error (exit 2).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from .interrupts import by_ctrl_c

PREFIX = "ARGOCD_ENV_"

# ARGOCD_ENV_<NAME> -> CompileOptions field
OPTION_ENV = {
    "NAMESPACE": "namespace",
    "SCHEDULER": "scheduler",
    "KUEUE_QUEUE": "kueue_queue",
    "RUNTIME_IMAGE": "runtime_image",
    "RUNTIME": "runtime",
    "CLUSTER_DOMAIN": "cluster_domain",
}


@dataclass(frozen=True)
class Request:
    """What to compile, read from Argo CD's environment."""

    sources: tuple[str, ...] = (".",)
    overlays: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


def _words(text: str) -> tuple[str, ...]:
    return tuple(w for w in re.split(r"[\s,]+", text) if w)


def request(env: Mapping[str, str]) -> Request:
    """The compile request an Application's environment describes."""
    options = {name: env[PREFIX + key] for key, name in OPTION_ENV.items() if env.get(PREFIX + key)}
    if "namespace" not in options and env.get("ARGOCD_APP_NAMESPACE"):
        options["namespace"] = env["ARGOCD_APP_NAMESPACE"]
    sources = _words(env.get(PREFIX + "SOURCES", "")) or (".",)
    return Request(sources, _words(env.get(PREFIX + "OVERLAY", "")), options)


def manifests(result: Any) -> str:
    """Every rendered manifest of a compile, as one YAML stream: each job's files, then each
    namespace's runtime (what `flatjob compile` writes, in its order; no kustomizations, no
    metadata).  Without the runtime an Application would sync jobs no process serves."""
    from . import keys
    from .pipeline import namespace_runtimes, runtime_files
    from .render.kustomization import KUSTOMIZATION

    files = {f"{job.folder}/{name}": text for job in result.jobs for name, text in job.files.items() if name != KUSTOMIZATION}
    files.update(runtime_files(namespace_runtimes(result.jobs)))
    return "---\n".join(f"# Source: {path}\n" + text.removeprefix(keys.GENERATED_HEADER) for path, text in files.items())


def repository_root(env: Mapping[str, str]) -> Path:
    """The repository's folder: the working directory less the Application's source path."""
    cwd = Path.cwd()
    app_path = Path(env.get("ARGOCD_APP_SOURCE_PATH") or ".")
    depth = len([p for p in app_path.parts if p not in (".", "")])
    if not app_path.is_absolute() and ".." not in app_path.parts and 0 < depth < len(cwd.parts) and cwd.parts[-depth:] == app_path.parts[-depth:]:
        return cwd.parents[depth - 1]
    return cwd


def _outside(path: str, root: str) -> bool:
    """Whether `path`, its links resolved, lies outside `root`.  Asked before whether it exists,
    and answered in the same words whether or not it does, so the answer never tells what the
    repo-server holds outside the repository (hx7, observation 2); a path written through a
    linked ancestor of the repository is inside (review of round 4: it was refused)."""
    return os.path.commonpath([os.path.realpath(path), root]) != root


def _hidden(path: str, root: str) -> bool:
    """Whether `path`, its links resolved, lies in a hidden folder of `root` (.git: the
    checkout's config and credentials), where no walk and no followed link ever reads (hx13:
    SOURCES=.git/config quoted its token line in FJ100)."""
    return any(part.startswith(".") and part not in (".", "..") for part in Path(os.path.relpath(os.path.realpath(path), root)).parts)


def usage_problem(req: Request, env: Mapping[str, str]) -> str | None:
    """Why the request cannot run (exit 2), or None."""
    from .display import visible
    from .options import CompileOptions, SchedulerTarget

    root = os.path.realpath(repository_root(env))
    for p in (*req.sources, *req.overlays):
        if _outside(p, root):  # before any look at whether it exists: that would tell what the repo-server holds
            return f"{visible(p)} is outside the repository ({visible(root)}); sources and overlays must be inside it"
        if _hidden(p, root):
            return f"{visible(p)} is in a hidden folder of the repository; sources and overlays must be outside hidden folders"
        if not os.path.exists(p):
            return f"not found (relative to {visible(os.getcwd())}): {visible(p)}"
    scheduler = req.options.get("scheduler", "auto")
    if scheduler not in get_args(SchedulerTarget):
        return f"{PREFIX}SCHEDULER={scheduler!r}; use one of {', '.join(get_args(SchedulerTarget))}"
    names = {v: k for k, v in OPTION_ENV.items()}
    for name, why in CompileOptions(**{k: v for k, v in req.options.items() if k != "scheduler"}).problems().items():
        return f"{PREFIX}{names[name]}={req.options[name]!r} {why}"
    return None


def generate(env: Mapping[str, str]) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of one generate run."""
    from .options import CompileOptions
    from .overlay import load_overlays
    from .pipeline import compile_paths, no_overlay
    from .report import format_text

    req = request(env)
    problem = usage_problem(req, env)
    if problem:
        return "", f"flatjob: {problem}\n", 2
    options = CompileOptions(**req.options)
    overlay = load_overlays(req.overlays) if req.overlays else no_overlay
    result = compile_paths(req.sources, options, overlay)
    report = format_text(result.diagnostics)
    if result.failed:
        errors = sum(d.is_error for d in result.diagnostics)
        return "", report + f"flatjob: {errors} error(s); no manifests generated\n", 1
    if not result.jobs and env.get(PREFIX + "ALLOW_EMPTY", "").lower() not in ("true", "1", "yes"):
        why = f"the sources ({' '.join(req.sources)}) hold no job: Argo CD would delete every job of this Application"
        return "", report + f"{' '.join(req.sources)}: error: {why} [FJ703]\nflatjob: no manifests generated; set {PREFIX}ALLOW_EMPTY=true (ALLOW_EMPTY in the Application's plugin env) if every job is meant to go\n", 1
    return manifests(result), report, 0


USAGE = "usage: flatjob-cmp   (no arguments: Argo CD runs it in the Application's folder, settings in ARGOCD_ENV_*)\n"


def main(argv: list[str] | None = None) -> None:
    """The `flatjob-cmp` script: no traceback ever reaches Argo CD's UI."""
    args = sys.argv[1:] if argv is None else argv
    if args:  # it takes none: `--help` (or a typo) must not generate the folder it runs in
        if args[0] in ("-h", "--help"):
            sys.stdout.write(USAGE + (__doc__ or ""))
            sys.exit(0)
        sys.stderr.write(f"flatjob-cmp: takes no arguments (got {' '.join(args)!r})\n{USAGE}")
        sys.exit(2)
    try:
        out, err, status = generate(os.environ)
    except Exception as exc:  # a bug in flatjob: one line, no traceback (FLATJOB_DEBUG=1 shows it)
        if by_ctrl_c(exc):  # an exception a Ctrl-C caused is a Ctrl-C (interrupts.py)
            raise KeyboardInterrupt from exc
        if os.environ.get("FLATJOB_DEBUG"):
            raise
        out, err, status = "", f"flatjob: internal error: {type(exc).__name__}; this is a bug in flatjob, please report it\n", 3
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.exit(status)


if __name__ == "__main__":
    main()
