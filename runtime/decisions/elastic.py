"""Elastic resizing: run the first `target` seats (target = expectedReplicas clamped to [min, max]).

expectedReplicas is changed through the record's scale subresource (`kubectl scale`); the
shipped Argo CD and Flux settings ignore that one field, so git does not fight it.  Growing
releases the next seats (their pods exist, gated); shrinking stops the highest seats and
records them as stopped, so a GitOps tool recreating them leaves them gated.  torchrun
re-forms its group either way; a group-scoped kind (DeepSpeed) restarts the attempt at the
new size instead, without counting a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import JobView, Ledger, PodState, ran


@dataclass(frozen=True)
class ScaleDecision:
    """The ledger after stopping seats beyond the target."""

    ledger: Ledger
    stopped: tuple[str, ...] = ()
    events: tuple[tuple[str, str, str], ...] = field(default=())


def decide_scale(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> ScaleDecision:
    """Stop released pods whose seat is at or beyond the target."""
    if job.target is None:
        return ScaleDecision(ledger)
    beyond = [p for p in job.pods if p.seat is not None and p.seat >= job.target and p.name in ledger.released]
    if job.scope == "group" and ledger.released and ledger.size is not None and ledger.size != job.target:
        names = sorted(ledger.released)
        drain = ran(pods, ledger)
        led = ledger.evolve(attempt=ledger.attempt + 1, draining=ledger.draining + drain, released={}, succeeded=(), failed=(), spec_hashes={}, size=None)
        return ScaleDecision(led, tuple(names), (("Normal", "Rescaling", f"restarting the job at {job.target} node(s) (was {ledger.size})"),))
    if not beyond:
        return ScaleDecision(ledger)
    stopped = {**ledger.stopped, **{p.name: ledger.released[p.name] for p in beyond}}
    released = {k: v for k, v in ledger.released.items() if k not in stopped}
    led = ledger.evolve(stopped=stopped, released=released)
    return ScaleDecision(led, tuple(p.name for p in beyond), (("Normal", "ScaledDown", f"stopped {', '.join(p.name for p in beyond)} (target {job.target})"),))


def forget_stopped(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> Ledger:
    """Seats back within the target may run again once their stopped incarnation is gone."""
    if not ledger.stopped:
        return ledger
    keep = {n: uid for n, uid in ledger.stopped.items() if (p := job.pod(n)) is not None and (job.target is None or p.seat is None or p.seat >= job.target or (n in pods and pods[n].uid == uid))}
    return ledger if keep == dict(ledger.stopped) else ledger.evolve(stopped=keep)
