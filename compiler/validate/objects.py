"""What a job renders, counted and named from its typed spec alone (no planning, no rendering).

Lint and compile use it to check names and sizes before anything is rendered: pods per replica
type, and the kind and name of every PodTemplate (so pod) and Service.
tests/test_validate_across.py checks object_names against what is rendered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..jobtypes import ColossalAIJob, GenericJob, PyTorchTrainingJob
from ..loader import PathT
from ..plan.common import elastic_of, pod_name
from ..plan.elastic import allocation
from ..render.tensorboard import tensorboard_name
from .groups import groups


def pod_counts(job: Any) -> dict[str, int]:
    """Pods rendered per replica type: replicas, or the elastic share of maxReplicas."""
    elastic = elastic_of(job)
    gs = groups(job)
    if elastic is not None and elastic.max_replicas:
        return allocation(elastic_weights(job), elastic.max_replicas)
    return {g.type: g.replicas for g in gs}


def elastic_weights(job: Any) -> list[tuple[str, int]]:
    """(type, weight) per replica type: scalingWeight, or its replicas when unset."""
    if isinstance(job, PyTorchTrainingJob):
        return [(r.type, r.scaling_weight if r.scaling_weight is not None else r.replicas) for r in job.spec.replica_specs]
    return [(g.type, 1) for g in groups(job)]


def object_names(job: Any) -> Iterator[tuple[str, str, PathT]]:
    """(kind, name, field that makes it) of every PodTemplate (the pod is named as it) and Service
    the job renders (paused: would render)."""
    name = job.metadata.name
    yield "Service", name, ("metadata", "name")
    if getattr(job.spec, "tensorboard_spec", None) is not None:
        yield "Service", tensorboard_name(name), ("spec", "tensorboardSpec")
    per_replica = isinstance(job, GenericJob) and job.spec.service is not None  # a Service named as each pod
    counts = pod_counts(job)
    for g in groups(job):
        if isinstance(job, ColossalAIJob) and g.type == "launcher":
            yield "PodTemplate", f"{name}-launcher", g.path
            continue
        where = (*g.path, "type") if g.template is not None else g.path
        for index in range(counts.get(g.type, 0)):
            yield "PodTemplate", pod_name(name, g.type, index), where
            if per_replica:
                yield "Service", pod_name(name, g.type, index), where
