"""A uniform view of a typed job's replica groups, with where each sits in the document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .jobtypes import ColossalAIJob, DeepSpeedJob, GenericJob, PyTorchTrainingJob

PathT = tuple[str | int, ...]  # a path into a document (as loader.PathT)


@dataclass(frozen=True)
class Group:
    """One replica type as written: its name, count, pod template and document path."""

    type: str
    replicas: int
    template: dict[str, Any] | None  # None for a launcher flatjob supplies itself
    path: PathT  # path of the replica spec in the document
    template_path: PathT


def _indexed(job: Any) -> list[Group]:
    return [
        Group(r.type, r.replicas, r.template, ("spec", "replicaSpecs", i), ("spec", "replicaSpecs", i, "template"))
        for i, r in enumerate(job.spec.replica_specs)
    ]


def _deepspeed(job: DeepSpeedJob) -> list[Group]:
    w = job.spec.worker
    return [Group("worker", w.replicas, w.template, ("spec", "worker"), ("spec", "worker", "template"))]


def _colossalai(job: ColossalAIJob) -> list[Group]:
    spec = job.spec
    if spec.replica_specs is not None:
        found = _indexed(job)
        if not any(g.type == "launcher" for g in found):  # T9k supplies a default launcher
            found.insert(0, Group("launcher", 1, None, ("spec", "replicaSpecs"), ("spec", "replicaSpecs")))
        return found
    out = []
    if spec.launcher is not None or spec.worker is not None:
        out.append(Group("launcher", 1, None, ("spec", "launcher"), ("spec", "launcher")))
    if spec.worker is not None:
        out.append(Group("worker", spec.worker.replicas, spec.worker.template, ("spec", "worker"), ("spec", "worker", "template")))
    return out


GROUPS: dict[type, Callable[[Any], list[Group]]] = {
    GenericJob: _indexed,
    PyTorchTrainingJob: _indexed,
    DeepSpeedJob: _deepspeed,
    ColossalAIJob: _colossalai,
}


def groups(job: Any) -> list[Group]:
    """Return the replica groups of any job kind, in the order ranks are assigned."""
    return GROUPS[type(job)](job)
