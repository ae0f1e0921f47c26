"""Pause and resume (docs/architecture.md, "Pause and resume").

Pausing is a git change: with runMode.pause.enabled the compiler renders no pods, so the
GitOps tool prunes them; the runtime deletes any that remain (pruning may be off) and
reports Paused once they are gone.  Resuming is the reverse change: the pods come back
from git, gated, and are released as a new attempt with the flatjob.dev/resuming
annotation, which selects the resumeSpecs command.  Neither counts as a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import JobView, Ledger, PodState


@dataclass(frozen=True)
class PauseDecision:
    """The ledger after a pause or resume transition, and the pods to delete."""

    ledger: Ledger
    delete: tuple[str, ...] = ()
    events: tuple[tuple[str, str, str], ...] = field(default=())


def decide_pause(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> PauseDecision:
    """Enter pause (drain every pod) or leave it (a fresh attempt that resumes)."""
    if job.run_mode == "pause":
        live = [p for p in pods.values() if p.uid not in ledger.draining]
        if ledger.paused and not live:
            return PauseDecision(ledger)
        led = ledger.evolve(
            paused=True,
            resuming=False,
            draining=ledger.draining + tuple(p.uid for p in live),
            released={},
            not_before={},
        )
        events = (("Normal", "Pausing", f"deleting {len(live)} pod(s)"),) if live else ()
        return PauseDecision(led, tuple(p.name for p in live), events)
    if ledger.paused:
        led = ledger.evolve(paused=False, resuming=True, attempt=ledger.attempt + 1, succeeded=(), failed=(), spec_hashes={})
        return PauseDecision(led, (), (("Normal", "Resuming", "the job resumes as a new attempt"),))
    return PauseDecision(ledger)
