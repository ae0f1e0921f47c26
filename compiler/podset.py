"""Which pods (and Services) a job renders, counted and named from its typed spec alone.

The planner names its pods with these, lint and compile check names and sizes with them
before anything is planned, and the runtime reads which PodTemplates are its job's: so this
module (and what it imports) stays outside the planner and the renderers, which the runtime
never loads (tests/test_layering.py).  tests/test_validate_across.py checks object_names
against what is rendered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .groups import PathT, groups
from .jobtypes import ColossalAIJob, ElasticConfig, GenericJob, PyTorchTrainingJob
from .seats import allocation


def pod_name(job: str, rtype: str, index: int) -> str:
    """T9k's pod name: <job>-<type>-<index>."""
    return f"{job}-{rtype}-{index}"


def elastic_of(job: Any) -> ElasticConfig | None:
    """The job's elastic config when it is in effect, else None.

    A PyTorchTrainingJob's elastic config is "effective only in torchrun mode" (T9k API
    reference): without torchrun it is ignored, and lint warns (FJ302).
    """
    e = getattr(job.spec, "elastic", None)
    if e is None or not e.enabled:
        return None
    if isinstance(job, PyTorchTrainingJob) and not (job.spec.torchrun_config is not None and job.spec.torchrun_config.enabled):
        return None
    return e


def tensorboard_name(job: str) -> str:
    """Name of the TensorBoard Deployment and Service."""
    return f"{job}-tensorboard"


def pod_total(job: Any) -> int:
    """How many pods the job renders, without making a seat: elastic maxReplicas, else the
    replicas summed (what a record is refused past, before anything is expanded)."""
    elastic = elastic_of(job)
    if elastic is not None and elastic.max_replicas:
        return elastic.max_replicas
    return sum(g.replicas for g in groups(job))


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


def template_runs(job: Any) -> tuple[dict[str, int], list[str]]:
    """The PodTemplates the job renders as runs ({"<job>-<type>-": count}) and single names (a
    ColossalAI launcher): object_names' PodTemplates, without a string per pod (the runtime
    keeps these for every record in its namespace)."""
    name = job.metadata.name
    counts = pod_counts(job)
    runs: dict[str, int] = {}
    singles: list[str] = []
    for g in groups(job):
        if isinstance(job, ColossalAIJob) and g.type == "launcher":
            singles.append(f"{name}-launcher")
        elif counts.get(g.type, 0) > 0:
            runs[pod_name(name, g.type, 0)[:-1]] = counts[g.type]
    return runs, singles


def object_names(job: Any) -> Iterator[tuple[str, str, PathT]]:
    """(kind, name, field that makes it) of every PodTemplate (the pod is named as it) and Service
    the job renders (paused: would render)."""
    name = job.metadata.name
    per_replica = isinstance(job, GenericJob) and job.spec.service is not None  # a Service named as each pod
    if per_replica or not isinstance(job, GenericJob):  # a GenericJob without spec.service has none (T9k)
        yield "Service", name, ("metadata", "name")
    if getattr(job.spec, "tensorboard_spec", None) is not None:
        yield "Service", tensorboard_name(name), ("spec", "tensorboardSpec")
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
