"""Renderers: one pure function per manifest kind, and the table that orders them per job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..plan import JobPlan
from .configmap import render_configmap
from .pod import render_pod_templates
from .podgroup import render_podgroup
from .record import render_record
from .runtime import render_runtime
from .service import render_service
from .tensorboard import render_tensorboard

Renderer = Callable[[JobPlan], list[dict[str, Any]]]

# Output file -> renderer, in the order a reviewer reads them and kustomize lists them.
JOB_FILES: tuple[tuple[str, Renderer], ...] = (
    ("job.yaml", render_record),
    ("service.yaml", render_service),
    ("config.yaml", render_configmap),
    ("podgroup.yaml", render_podgroup),
    ("podtemplates.yaml", render_pod_templates),
    ("tensorboard.yaml", render_tensorboard),
    ("runtime.yaml", render_runtime),
)


def render_job(plan: JobPlan) -> dict[str, list[dict[str, Any]]]:
    """Manifests per output file for one planned job; files with nothing to hold are left out."""
    out: dict[str, list[dict[str, Any]]] = {}
    for filename, renderer in JOB_FILES:
        manifests = renderer(plan)
        if manifests:
            out[filename] = manifests
    return out


__all__ = ["JOB_FILES", "render_job"]
