"""T9k Scheduler's PodGroup: the gang the scheduler admits as a whole."""

from __future__ import annotations

from typing import Any

from .. import keys
from ..plan import JobPlan
from ..plan.elastic import allocation
from .meta import common_labels, metadata


def t9k_scheduler(plan: JobPlan) -> Any:
    """The job's T9kScheduler settings when the T9k target is in use, else None."""
    from .scheduling import target

    sched = getattr(plan.job.spec, "scheduler", None)
    t9k = sched.t9k_scheduler if sched is not None else None
    return t9k if t9k is not None and target(plan) == "t9k" else None


def render_podgroup(plan: JobPlan) -> list[dict[str, Any]]:
    """A PodGroup named after the job, as a T9k job makes it (UM use-podgroup.md, "T9k Job 自动创建
    PodGroup"): minMember (every pod; minReplicas when elastic), the job's priority and queue,
    and no roles: any minMember of the job's pods make the gang, as under T9k."""
    t9k = t9k_scheduler(plan)
    if t9k is None or plan.run_mode == "pause":
        return []
    spec = {"minMember": plan.min_member, "priority": t9k.priority, "queue": t9k.queue}
    return [{"apiVersion": keys.PODGROUP_API_VERSION, "kind": "PodGroup", "metadata": metadata(plan, plan.name, common_labels(plan, "podgroup")), "spec": spec}]


__all__ = ["allocation", "render_podgroup", "t9k_scheduler"]
