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


def pods_per_role_at(plan: JobPlan, total: int) -> dict[str, int]:
    """Pods of each type among the first `total` pods the runtime runs."""
    seated = [p for p in plan.pods if p.seat is not None]
    if seated:
        counts = {p.type: 0 for p in plan.pods}
        for p in seated:
            if p.seat < total:
                counts[p.type] += 1
        return counts
    counts = {p.type: 0 for p in plan.pods}
    for p in plan.pods[:total]:
        counts[p.type] += 1
    return counts


def render_podgroup(plan: JobPlan) -> list[dict[str, Any]]:
    """A PodGroup named after the job: minMember pods (minReplicas when elastic), per-role minimums."""
    t9k = t9k_scheduler(plan)
    if t9k is None or plan.run_mode == "pause":
        return []
    roles = [{"name": t, "minMember": n} for t, n in pods_per_role_at(plan, plan.min_member).items() if n]
    spec = {"minMember": plan.min_member, "priority": t9k.priority, "queue": t9k.queue, "roles": roles}
    return [{"apiVersion": keys.PODGROUP_API_VERSION, "kind": "PodGroup", "metadata": metadata(plan, plan.name, common_labels(plan, "podgroup")), "spec": spec}]


__all__ = ["allocation", "render_podgroup", "t9k_scheduler"]
