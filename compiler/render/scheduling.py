"""Scheduler wiring for pods: T9k Scheduler, Kueue, or nothing (kube-scheduler).

The target is chosen per job: the job's flatjob.dev/scheduler annotation, else the compile
option --scheduler; `auto` means T9k Scheduler when spec.scheduler.t9kScheduler is set.
- t9k:   a PodGroup (render.podgroup), pod labels group-name/queue/role, schedulerName t9k-scheduler;
- kueue: Kueue's plain-pod group: the queue-name and pod-group-name labels and the
         pod-group-total-count annotation on every pod (an elastic job's pods: the queue-name
         label only, each pod admitted alone, since a group is admitted only once all of its
         pods exist); Kueue's admission gate, added by its webhook, stacks with flatjob's
         release gate;
- default: nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import keys
from ..plan import JobPlan, PodPlan

T9K_SCHEDULER_NAME = "t9k-scheduler"
TARGETS = ("t9k", "kueue", "default")


@dataclass(frozen=True)
class PodScheduling:
    """What a scheduler target adds to a pod."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)  # top-level PodSpec fields to set


def target(plan: JobPlan) -> str:
    """t9k, kueue or default, for this job."""
    chosen = plan.job.metadata.annotations.get(keys.SCHEDULER_TARGET) or plan.options.scheduler
    if chosen in TARGETS:
        return chosen
    sched = getattr(plan.job.spec, "scheduler", None)
    return "t9k" if sched is not None and sched.t9k_scheduler is not None else "default"


def kueue_queue(plan: JobPlan) -> str | None:
    """The Kueue LocalQueue: the job's annotation, the compile option, else the T9k queue name."""
    sched = getattr(plan.job.spec, "scheduler", None)
    t9k = sched.t9k_scheduler.queue if sched is not None and sched.t9k_scheduler is not None else None
    return plan.job.metadata.annotations.get(keys.KUEUE_QUEUE_ANNOTATION) or plan.options.kueue_queue or t9k


def _t9k(plan: JobPlan, pod: PodPlan) -> PodScheduling:
    sched = plan.job.spec.scheduler
    if sched is None or sched.t9k_scheduler is None:
        return PodScheduling()
    labels = {keys.T9K_GROUP_NAME: plan.name, keys.T9K_QUEUE: sched.t9k_scheduler.queue}  # a T9k job's pods' (UM use-podgroup.md)
    return PodScheduling(labels=labels, spec={"schedulerName": T9K_SCHEDULER_NAME})


def _kueue(plan: JobPlan, pod: PodPlan) -> PodScheduling:
    """A pod group of every pod; an elastic job's pods each alone, since Kueue admits a group
    only once its pod-group-total-count pods all exist, and an elastic job runs fewer."""
    queue = kueue_queue(plan)
    labels = {keys.KUEUE_QUEUE_NAME: queue} if queue else {}
    if pod.seat is not None:
        return PodScheduling(labels=labels)
    return PodScheduling(labels={keys.KUEUE_POD_GROUP_NAME: plan.name, **labels}, annotations={keys.KUEUE_POD_GROUP_TOTAL_COUNT: str(len(plan.pods))})


_BY_TARGET = {"t9k": _t9k, "kueue": _kueue, "default": lambda plan, pod: PodScheduling()}


def pod_scheduling(plan: JobPlan, pod: PodPlan) -> PodScheduling:
    """Scheduling additions for one pod of the plan."""
    return _BY_TARGET[target(plan)](plan, pod)
