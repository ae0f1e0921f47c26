"""Clean-up after the job finished (cleanUpPolicy; ColossalAI's cleanUpWorkers).

The runtime is the only creator of the job's pods and creates none after the outcome, so
what the policy deletes never comes back, and the choice is simply re-derived every cycle.
Pods that never ran (still gated) go whatever the policy says: they hold quota and no log.
Two failures stop pods whatever the policy says (docs/architecture.md, "Clean-up"):
- a deadline or restart-limit failure stops every unfinished pod: otherwise the deadline
  would not stop anything;
- a ColossalAIJob failed by one of its workers stops the other unfinished workers: they hold
  GPUs for a `colossalai run` that can no longer finish.  The launcher is kept for its log,
  as cleanUpWorkers keeps it; its run ends when its ssh sessions to the workers close.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..model import JobView, Ledger, PodState

_UNFINISHED = ("Pending", "Running", "Unknown")


@dataclass(frozen=True)
class CleanupDecision:
    """The ledger (clean-up decided), and the pods to delete."""

    ledger: Ledger
    delete: tuple[str, ...] = ()


LIMIT_REASONS = ("DeadlineExceeded", "BackoffLimitExceeded")


def _selected(job: JobView, pod: PodState, policy: str) -> bool:
    spec = job.pod(pod.name)
    worker = spec is not None and spec.type == "worker"
    return {
        "All": True,
        "Unfinished": pod.phase in _UNFINISHED,
        "None": False,
        "Workers": worker,
        "UnfinishedWorkers": worker and pod.phase in _UNFINISHED,
    }[policy]


def _worker_failed(job: JobView, ledger: Ledger) -> bool:
    return any((p := job.pod(n)) is not None and p.type == "worker" for n in ledger.failed)


def policy_after(job: JobView, ledger: Ledger) -> str:
    """The clean-up to apply: the job's policy, unless the way it failed demands more."""
    policy = job.cleanup
    if ledger.reason in LIMIT_REASONS and policy in ("None", "Workers"):
        return "Unfinished"
    if job.scope == "none" and ledger.outcome == "Failed" and policy == "None" and _worker_failed(job, ledger):
        return "UnfinishedWorkers"
    return policy


def decide_cleanup(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> CleanupDecision:
    """The finished job's pods that go: what the policy names, and every pod that never ran."""
    policy = policy_after(job, ledger)
    chosen = [p for p in pods.values() if p.ours and not p.deleting and (p.gated or _selected(job, p, policy))]
    led = ledger if ledger.cleaned_up else ledger.evolve(cleaned_up=True)
    return CleanupDecision(led, tuple(sorted(p.name for p in chosen)))
