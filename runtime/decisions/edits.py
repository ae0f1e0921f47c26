"""Spec edits in git while the job runs: a changed PodTemplate means a new attempt.

Detected by comparing the spec-hash the compiler wrote on each PodTemplate with the one the
pod was created with (the runtime copies it verbatim), never by hashing a live object: the
API server stores `cpu: 1.0` as "1", so a hash of the live pod would never match.  A
released pod whose template changed makes every pod of the attempt go (the group must agree
on one spec); the new attempt starts at once from the new templates, and is not a restart.
Pods not released yet are simply replaced (runtime.decisions.release).
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
    """Start a new attempt when a running pod no longer matches its PodTemplate."""
    stale = []
    for name in ledger.released:
        spec = job.pod(name)
        pod = pods.get(name)
        if pod is not None and pod.ours and pod.attempt == ledger.attempt and (spec is None or pod.spec_hash != spec.spec_hash):
            stale.append(name)
    if not stale:
        return EditDecision(ledger)
    names = tuple(sorted(ledger.released))
    led = ledger.evolve(attempt=ledger.attempt + 1, released=(), succeeded=(), failed=(), not_before={}, gang_not_before=None)
    return EditDecision(led, names, (("Normal", "SpecChanged", f"the job's PodTemplates changed ({', '.join(stale[:3])} differ); starting a new attempt"),))
