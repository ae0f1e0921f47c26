"""Scheduler wiring for pods: T9k Scheduler or Kueue labels and fields; nothing by default.

The PodGroup object itself is rendered by render.podgroup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import keys
from ..plan import JobPlan, PodPlan


@dataclass(frozen=True)
class PodScheduling:
    """What a scheduler target adds to a pod."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)  # top-level PodSpec fields to set


T9K_SCHEDULER_NAME = "t9k-scheduler"


def _t9k(plan: JobPlan, pod: PodPlan) -> PodScheduling:
    from .podgroup import t9k_scheduler

    t9k = t9k_scheduler(plan)
    if t9k is None:
        return PodScheduling()
    labels = {keys.T9K_GROUP_NAME: plan.name, keys.T9K_QUEUE: t9k.queue, keys.T9K_ROLE: pod.type}
    return PodScheduling(labels=labels, spec={"schedulerName": T9K_SCHEDULER_NAME})


def pod_scheduling(plan: JobPlan, pod: PodPlan) -> PodScheduling:
    """Scheduling additions for one pod of the plan (none for kube-scheduler)."""
    return _t9k(plan, pod)
