"""The job's one headless Service: stable DNS for every pod before it is ready."""

from __future__ import annotations

from typing import Any

from ..plan import JobPlan
from .meta import common_labels, metadata, selector


def render_service(plan: JobPlan) -> list[dict[str, Any]]:
    """A headless Service named after the job; publishNotReadyAddresses so peers resolve early."""
    spec: dict[str, Any] = {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": selector(plan),
    }
    if plan.service.ports:
        spec["ports"] = [dict(p) for p in plan.service.ports]
    return [{"apiVersion": "v1", "kind": "Service", "metadata": metadata(plan, plan.service.name, common_labels(plan, "service")), "spec": spec}]
