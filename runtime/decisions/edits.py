"""Spec edits in git while the job runs: pods are immutable, so an edit is a new attempt.

Detected by the spec-hash annotation: a released pod whose hash differs from what the
current record renders belongs to an older spec.  Every pod of the attempt is replaced
(the group must agree on one spec); this is not a failure and not counted as a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import JobView, Ledger, PodState


@dataclass(frozen=True)
class EditDecision:
    """The ledger after noticing an edit, and the pods being replaced."""

    ledger: Ledger
    replaced: tuple[str, ...] = ()
    events: tuple[tuple[str, str, str], ...] = field(default=())


def decide_edit(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> EditDecision:
    """Start a new attempt when a running pod no longer matches the record."""
    stale = []
    for name, uid in ledger.released.items():
        spec = job.pod(name)
        pod = pods.get(name)
        if pod is not None and pod.uid == uid and (spec is None or pod.spec_hash != spec.spec_hash):
            stale.append(name)
    if not stale:
        return EditDecision(ledger)
    names = sorted(ledger.released)
    drain = tuple(pods[n].uid for n in names if n in pods and pods[n].uid not in ledger.draining)
    led = ledger.evolve(attempt=ledger.attempt + 1, draining=ledger.draining + drain, released={}, succeeded=(), failed=(), spec_hashes={}, not_before={})
    return EditDecision(led, tuple(names), (("Normal", "SpecChanged", f"the job spec changed ({', '.join(stale[:3])} differ); starting a new attempt"),))
