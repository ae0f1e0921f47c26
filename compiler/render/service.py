"""The job's headless Services: stable DNS for every pod before it is ready.

One Service `<job>` gives every pod `<pod>.<job>` (hostname + subdomain); a GenericJob without
spec.service gets none, as T9k creates none.  A GenericJob with
spec.service also gets one headless Service per replica, named as the pod, so T9k's documented
address `<job>-<type>-<rank>` resolves from any pod in the namespace (as Kubeflow's
per-replica Services do); `$(service.<type>[<rank>].host)` expands to that name.
"""

from __future__ import annotations

from typing import Any

from .. import keys
from ..plan import JobPlan, PodPlan
from .meta import common_labels, metadata, selector


def _headless(plan: JobPlan, name: str, select: dict[str, str], component: str) -> dict[str, Any]:
    """A headless Service that publishes not-ready pods, so peers resolve before they are Ready."""
    spec: dict[str, Any] = {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": select}
    if plan.service.ports:
        spec["ports"] = [dict(p) for p in plan.service.ports]
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata(plan, name, common_labels(plan, component)), "spec": spec}


def replica_selector(plan: JobPlan, pod: PodPlan) -> dict[str, str]:
    """Selects exactly one pod of the job, by its replica type and index."""
    return {**selector(plan), keys.REPLICA_TYPE: pod.type, keys.REPLICA_INDEX: str(pod.index)}


def render_service(plan: JobPlan) -> list[dict[str, Any]]:
    """The job's Service named after the job, then (GenericJob spec.service) one per replica;
    none for a GenericJob without spec.service ("Defaults to empty and no service will be
    created", T9k's API reference)."""
    if not plan.service.headless:
        return []
    out = [_headless(plan, plan.service.name, selector(plan), "service")]
    if plan.service.per_replica:
        out.extend(_headless(plan, pod.name, replica_selector(plan, pod), "replica-service") for pod in plan.pods)
    return out
