"""Pause and resume (docs/architecture.md, "Pause and resume").

Pausing is a git change: runMode.pause.enabled on the record.  The runtime then deletes
every pod of the job (gracefully) and reports Paused; the PodTemplates stay in git.  Resuming
is the reverse change: a fresh attempt whose pods the runtime creates with the
flatjob.dev/resuming annotation, which selects the resumeSpecs command.  Neither counts as a
restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import JobView, Ledger, PodState


@dataclass(frozen=True)
class PauseDecision:
    """The ledger after a pause or resume transition."""

    ledger: Ledger
    events: tuple[tuple[str, str, str], ...] = field(default=())


def decide_pause(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> PauseDecision:
    """Enter pause (every pod goes) or leave it (a fresh attempt that resumes)."""
    if job.run_mode == "pause":
        if ledger.paused:
            return PauseDecision(ledger)
        led = ledger.evolve(paused=True, resuming=False, released=(), not_before={}, gang_not_before=None, refused=None, refusals=0)
        live = [p for p in pods.values() if p.ours and not p.deleting]
        return PauseDecision(led, (("Normal", "Pausing", f"deleting {len(live)} pod(s)"),))
    if ledger.paused:
        # start_time goes: the deadline counts from the resumed pods' release, as a Kubernetes Job's
        # startTime is reset when it is unsuspended (time paused is no active time; review 20, round 10)
        led = ledger.evolve(paused=False, resuming=True, attempt=ledger.attempt + 1, succeeded=(), failed=(), start_time=None)
        return PauseDecision(led, (("Normal", "Resuming", "the job resumes as a new attempt"),))
    return PauseDecision(ledger)
