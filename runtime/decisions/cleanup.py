"""Clean-up after the job finished (cleanUpPolicy; ColossalAI's cleanUpWorkers).

Each pod present at the time is deleted once (its UID is recorded): a GitOps tool that
recreates a deleted pod gets a gated pod that is never released and holds no node.  A job
that fails by deadline or restart limit stops its unfinished pods whatever the policy:
otherwise the deadline would not stop anything.
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


def _selected(job: JobView, pod: PodState, policy: str) -> bool:
    spec = job.pod(pod.name)
    return {
        "All": True,
        "Unfinished": pod.phase in _UNFINISHED,
        "None": False,
        "Workers": spec is not None and spec.type == "worker",
    }[policy]


def decide_cleanup(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> CleanupDecision:
    """Delete, once, what the policy says; pods recreated afterwards stay gated."""
    if ledger.cleaned_up:
        return CleanupDecision(ledger)
    policy = job.cleanup
    if ledger.reason in ("DeadlineExceeded", "BackoffLimitExceeded") and policy in ("None", "Workers"):
        policy = "Unfinished"
    known = set(ledger.cleaned) | set(ledger.draining)
    chosen = [p for p in pods.values() if p.uid not in known and not p.deleting and _selected(job, p, policy)]
    led = ledger.evolve(cleaned=ledger.cleaned + tuple(p.uid for p in chosen), cleaned_up=True)
    return CleanupDecision(led, tuple(p.name for p in chosen))
