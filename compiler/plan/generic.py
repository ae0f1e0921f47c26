"""Plan a GenericJob: pods per replica spec, with $(...) variables substituted per pod."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..jobtypes import GenericJob
from ..options import CompileOptions
from ..substitution import Context, substitute
from . import ContainerPatch, JobPlan, PodPlan, ServicePlan
from .common import base_pods, layout, mode_patch, pod_name, release_counts, run_mode_name


def context(job: GenericJob, addresses: dict[tuple[str, int], str] | None = None) -> Context:
    """What $(...) variables resolve against for this job.

    $(service.<type>[<rank>].host) is T9k's documented replica name `<job>-<type>-<rank>`,
    which the replica's own Service makes resolvable from any pod in the namespace
    (render/service.py); `addresses` overrides it (run-local's loopback addresses).
    """
    ports = None
    if job.spec.service is not None:
        ports = {p["name"]: p["port"] for p in job.spec.service.ports if "name" in p}
    known = addresses or {}
    return Context(
        job.metadata.name,
        {r.type: r.replicas for r in job.spec.replica_specs},
        ports,
        lambda t, r: known.get((t, r)) or pod_name(job.metadata.name, t, r),
    )


def _sub_container(c: dict[str, Any], ctx: Context, rtype: str, rank: int) -> dict[str, Any]:
    out = dict(c)
    for field in ("command", "args"):
        if isinstance(c.get(field), list):
            out[field] = [substitute(v, ctx, rtype, rank) if isinstance(v, str) else v for v in c[field]]
    if isinstance(c.get("env"), list):
        out["env"] = [
            {**e, "value": substitute(e["value"], ctx, rtype, rank)} if isinstance(e, dict) and isinstance(e.get("value"), str) else e
            for e in c["env"]
        ]
    return out


def substituted_template(template: dict[str, Any], ctx: Context, rtype: str, rank: int) -> dict[str, Any]:
    """A copy of the template with variables resolved for one pod (other parts stay shared)."""
    spec = dict(template.get("spec") or {})
    for field in ("containers", "initContainers"):
        if isinstance(spec.get(field), list):
            spec[field] = [_sub_container(c, ctx, rtype, rank) for c in spec[field]]
    return {**template, "spec": spec}


def plan_generic(job: GenericJob, options: CompileOptions) -> JobPlan:
    """Plan the pods of a GenericJob."""
    service = job.metadata.name
    lay = layout(job, [(r.type, r.replicas, r.template) for r in job.spec.replica_specs])
    planned = base_pods(job, lay, service, local=options.local_addresses, block=options.local_block)
    ctx = context(job, {(p.type, p.index): p.address for p in planned} if options.local_addresses else None)
    pods: list[PodPlan] = []
    for pod in planned:
        patch, drop, skip = mode_patch(job.spec.run_mode, pod.type, ("sleep", "inf"), ContainerPatch())
        template = substituted_template(pod.template, ctx, pod.type, pod.index)
        pods.append(replace(pod, template=template, patch=patch, drop_init_containers=drop, skip_init_on_resume=skip))
    ports = tuple(dict(p) for p in job.spec.service.ports) if job.spec.service is not None else ()
    _, gang = release_counts(job, len(pods))
    per_replica = job.spec.service is not None  # T9k: every replica at <job>-<type>-<rank>; without it, no Service at all
    return JobPlan(job, options, ServicePlan(service, ports, per_replica, headless=per_replica), tuple(pods), min_member=gang, run_mode=run_mode_name(job.spec.run_mode))
