"""Elastic resizing: run the first `target` seats (target = expectedReplicas clamped to [min, max]).

expectedReplicas is changed through the record's scale subresource (`kubectl scale`); the
shipped Argo CD and Flux settings ignore that one field, so git does not fight it.  Only the
current seats have pods: growing creates the next seats' pods (runtime.decisions.release),
shrinking stops the highest seats (their pods leave `released` and are deleted).  torchrun
re-forms its group when nodes join without spending a restart, but a member that leaves breaks
the others' collectives, and each remaining agent spends one of `--max_restarts` or, with none
left (the default 0), exits 1: so the stopped seats are recorded as disrupted, and a remaining
pod that fails within the disruption window is replaced, not counted, and joins the group at
its new size (review 20, round 10).  A group-scoped kind (DeepSpeed) restarts the attempt at
the new size instead, without counting a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import JobView, Ledger, PodState


@dataclass(frozen=True)
class ScaleDecision:
    """The ledger after stopping seats beyond the target."""

    ledger: Ledger
    stopped: tuple[str, ...] = ()
    events: tuple[tuple[str, str, str], ...] = field(default=())


def decide_scale(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, now: float) -> ScaleDecision:
    """Stop released pods whose seat is at or beyond the target."""
    if job.target is None:
        return ScaleDecision(ledger)
    if job.scope == "group" and ledger.released and ledger.size is not None and ledger.size != job.target:
        names = tuple(sorted(ledger.released))
        led = ledger.evolve(attempt=ledger.attempt + 1, released=(), succeeded=(), failed=(), not_before={}, gang_not_before=None, size=None)
        return ScaleDecision(led, names, (("Normal", "Rescaling", f"restarting the job at {job.target} node(s) (was {ledger.size})"),))
    wanted = {p.name for p in job.wanted()}
    beyond = [n for n in ledger.released if n not in wanted]
    if not beyond:
        return ScaleDecision(ledger)
    # Its peers' failures in the next DISRUPTION_WINDOW are the scale-down's doing (outcomes._troubled).
    led = ledger.evolve(released=ledger.without("released", beyond), disrupted={**ledger.disrupted, **dict.fromkeys(beyond, now)},
                        disrupted_end={**ledger.disrupted_end, **dict.fromkeys(beyond, now)})
    return ScaleDecision(led, tuple(beyond), (("Normal", "ScaledDown", f"stopped {', '.join(beyond)} (target {job.target})"),))
