"""Argo CD Config Management Plugin: print a repository's rendered manifests on stdout.

Argo CD runs the plugin's `generate` command in the Application's directory with the
Application's settings in the environment; stdout must hold only manifests, problems go to
stderr, and a non-zero exit fails the sync.  overlays/argocd/plugin.yaml runs
`python -m flatjob.compiler.cmp`; every setting is an ARGOCD_ENV_* variable (set them in the
Application's `spec.source.plugin.env`, without the prefix):

    SOURCES        job files or folders, space-separated (default: .)
    OVERLAY        overlay folders, space- or comma-separated, applied in order
    NAMESPACE      namespace for jobs that set none (default: ARGOCD_APP_NAMESPACE)
    SCHEDULER      auto | t9k | kueue | default
    KUEUE_QUEUE, RUNTIME_IMAGE, CLUSTER_DOMAIN   as the flatjob compile options
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

PREFIX = "ARGOCD_ENV_"

# ARGOCD_ENV_<NAME> -> CompileOptions field
OPTION_ENV = {
    "NAMESPACE": "namespace",
    "SCHEDULER": "scheduler",
    "KUEUE_QUEUE": "kueue_queue",
    "RUNTIME_IMAGE": "runtime_image",
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
    """Every rendered manifest of a compile, as one YAML stream (no kustomizations, no metadata)."""
    from . import keys
    from .render.kustomization import KUSTOMIZATION

    parts = []
    for job in result.jobs:
        for name, text in job.files.items():
            if name != KUSTOMIZATION:
                parts.append(f"# Source: {job.folder}/{name}\n" + text.removeprefix(keys.GENERATED_HEADER))
    return "---\n".join(parts)


def generate(env: Mapping[str, str]) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of one generate run."""
    from .options import CompileOptions, SchedulerTarget
    from .overlay import load_overlays
    from .pipeline import compile_paths, no_overlay
    from .report import format_text

    req = request(env)
    missing = [p for p in (*req.sources, *req.overlays) if not os.path.exists(p)]
    if missing:
        return "", f"flatjob: not found (relative to {os.getcwd()}): {', '.join(missing)}\n", 2
    scheduler = req.options.get("scheduler", "auto")
    if scheduler not in get_args(SchedulerTarget):
        return "", f"flatjob: {PREFIX}SCHEDULER={scheduler!r}; use one of {', '.join(get_args(SchedulerTarget))}\n", 2
    options = CompileOptions(**req.options)
    overlay = load_overlays(req.overlays) if req.overlays else no_overlay
    result = compile_paths(req.sources, options, overlay)
    report = format_text(result.diagnostics)
    if result.failed:
        errors = sum(d.is_error for d in result.diagnostics)
        return "", report + f"flatjob: {errors} error(s); no manifests generated\n", 1
    return manifests(result), report, 0


def main() -> None:
    """Entry point for `python -m flatjob.compiler.cmp`."""
    out, err, status = generate(os.environ)
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.exit(status)


if __name__ == "__main__":
    main()
