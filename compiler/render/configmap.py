"""The job's ConfigMap <job>-config: hostfiles, env-file builders and launch scripts."""

from __future__ import annotations

from typing import Any

from ..plan import JobPlan
from .meta import common_labels, metadata


def configmap_name(job: str) -> str:
    """Name of the job's ConfigMap."""
    return f"{job}-config"


def render_configmap(plan: JobPlan) -> list[dict[str, Any]]:
    """One ConfigMap holding every generated file of the job, or nothing when there are none."""
    if not plan.files:
        return []
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(plan, configmap_name(plan.name), common_labels(plan, "config")), "data": dict(plan.files)}]
