"""Clean-up after the job finished (cleanUpPolicy; ColossalAI's cleanUpWorkers).

Each pod present at the time is deleted once (its UID is recorded): a GitOps tool that
recreates a deleted pod gets a gated pod that is never released and holds no node.  Two
failures stop pods whatever the policy says (docs/architecture.md, "Clean-up"):
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
    """The ledger with the cleaned UIDs, and the pods to delete."""

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
    """Delete, once, what the policy says; pods recreated afterwards stay gated."""
    if ledger.cleaned_up:
        return CleanupDecision(ledger)
    policy = policy_after(job, ledger)
    known = set(ledger.cleaned) | set(ledger.draining)
    chosen = [p for p in pods.values() if p.uid not in known and not p.deleting and _selected(job, p, policy)]
    led = ledger.evolve(cleaned=ledger.cleaned + tuple(p.uid for p in chosen), cleaned_up=True)
    return CleanupDecision(led, tuple(p.name for p in chosen))
