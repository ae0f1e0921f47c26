"""One reconcile cycle as a pure function of (job, observed pods, ledger, deps, now).

The steps run in a fixed order, each a decision in its own module:
    edits -> pause -> outcomes -> success -> restart -> failure -> scale -> release
    (after the finish: clean-up), then status.
The cycle returns the new ledger and status (written once, before anything acts) and the
actions; actions are re-derived from the ledger every cycle, so a runtime killed between
writing status and acting simply does the same actions again on restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flatjob.compiler import keys

from ..model import JobView, Ledger, PodState
from .cleanup import decide_cleanup
from .edits import decide_edit
from .elastic import decide_scale, forget_stopped
from .finish import FinishDecision, decide_failure, decide_success
from .outcomes import observe
from .pause import decide_pause
from .release import Deps, decide_release
from .restart import decide_restart, restart_completed
from .status import all_running, build_status

ATTEMPT, RESTART_COUNT, RESUMING, RUNTIME_ANNOTATIONS = keys.ATTEMPT, keys.RESTART_COUNT, keys.RESUMING, keys.RUNTIME_ANNOTATIONS


@dataclass(frozen=True)
class Action:
    """One change to make in the cluster; every action is idempotent."""

    kind: str  # release | create | delete | create-secret
    name: str
    uid: str | None = None  # precondition for delete/release: only this incarnation
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Cycle:
    """The outcome of one reconcile cycle."""

    ledger: Ledger
    status: dict[str, Any]
    actions: tuple[Action, ...] = ()
    events: tuple[tuple[str, str, str], ...] = ()
    wake_at: float | None = None  # when to reconcile again even if nothing changes
    wait: str | None = None


@dataclass(frozen=True)
class World:
    """What the cycle knows besides pods."""

    secret_exists: bool = True
    secret_is_ours: bool = True  # False when the user named an existing Secret
    podgroup_exists: bool = True
    tensorboard_ready: bool | None = None  # the TensorBoard Deployment's readiness, once observed


def _housekeep(job: JobView, pods: Mapping[str, PodState], led: Ledger) -> Ledger:
    """Forget UIDs that no longer matter: drained pods that are gone, counted ones long gone."""
    observed = {p.uid for p in pods.values()}
    live = set(led.released.values())
    led = led.evolve(
        draining=tuple(u for u in led.draining if u in observed),
        counted=tuple(u for u in led.counted if u in observed or u in live),
        cleaned=tuple(u for u in led.cleaned if u in observed),
    )
    return forget_stopped(job, pods, led)


def _finish(led: Ledger, fd: FinishDecision, now: float) -> tuple[Ledger, tuple[tuple[str, str, str], ...]]:
    if fd.outcome is None:
        return led, ()
    kind = "Normal" if fd.outcome == "Succeeded" else "Warning"
    return led.evolve(outcome=fd.outcome, reason=fd.reason, message=fd.message, finished_at=now), ((kind, fd.reason or fd.outcome, fd.message or ""),)


def _run(job: JobView, pods: Mapping[str, PodState], led: Ledger, world: World, now: float) -> tuple[Ledger, list[Any], list[str], list[str], str | None, float | None]:
    """The steps while the job has no outcome yet; returns ledger, events, creates, stale, wait, wake."""
    events: list[Any] = []
    if job.run_mode != "pause" and not led.paused:
        ed = decide_edit(job, pods, led)
        led, events = ed.ledger, [*events, *ed.events]
    pd = decide_pause(job, pods, led)
    led, events = pd.ledger, [*events, *pd.events]
    if led.paused:
        return led, events, [], [], "paused", None
    out = observe(job, pods, led)
    if out.succeeded:
        led = led.evolve(succeeded=led.succeeded + out.succeeded, released={k: v for k, v in led.released.items() if k not in out.succeeded})
    led, ev = _finish(led, decide_success(job, led), now)
    events.extend(ev)
    if led.outcome:
        return led, events, [], [], None, None
    rd = decide_restart(job, pods, led, out.failures, now)
    led, events = rd.ledger, [*events, *rd.events]
    if rd.fatal is None and out.succeeded:
        rc = restart_completed(job, pods, led, out.succeeded, now)
        led, events = rc.ledger, [*events, *rc.events]
    led, ev = _finish(led, decide_failure(job, led, rd.fatal, rd.exhausted, now), now)
    events.extend(ev)
    if led.outcome:
        return led, events, [], [], None, None
    sc = decide_scale(job, pods, led)
    led, events = sc.ledger, [*events, *sc.events]
    rel = decide_release(job, pods, led, Deps(world.secret_exists, world.podgroup_exists), now)
    led, events = rel.ledger, [*events, *rel.events]
    if led.resuming and all_running(job, pods, led):
        led = led.evolve(resuming=False)
    wake = rel.wake_at
    if job.deadline is not None and led.start_time is not None:
        end = led.start_time + job.deadline
        wake = end if wake is None else min(wake, end)
    return led, events, list(rel.create), list(rel.stale), rel.wait, wake


def _carry(pods: Mapping[str, PodState], led: Ledger) -> Ledger:
    """Remember the metadata of pods being replaced, so their successors keep GitOps tracking.

    Kept in the ledger (written before the delete) until a new incarnation exists.
    """
    replaced = set(led.draining) | set(led.stopped.values())
    carry = dict(led.carry)
    for pod in pods.values():
        if pod.uid in replaced:
            if pod.name not in carry:
                notes = {k: v for k, v in pod.annotations.items() if k not in RUNTIME_ANNOTATIONS}
                carry[pod.name] = {"labels": dict(pod.labels), "annotations": notes}
        elif pod.name in carry:
            del carry[pod.name]  # the successor exists
    return led if carry == dict(led.carry) else led.evolve(carry=carry)


def _ensure(job: JobView, pods: Mapping[str, PodState], led: Ledger, creates: list[str], stale: list[str], world: World) -> list[Action]:
    """Actions that bring the cluster in line with the ledger (re-derived every cycle)."""
    actions: list[Action] = []
    if job.ssh_secret and not world.secret_exists and world.secret_is_ours and led.outcome is None:
        actions.append(Action("create-secret", job.ssh_secret))
    doomed = set(led.draining) | set(led.cleaned) | set(led.stopped.values())
    for pod in sorted(pods.values(), key=lambda p: p.name):
        if (pod.uid in doomed and not pod.deleting) or (pod.name in stale and not pod.deleting):
            actions.append(Action("delete", pod.name, pod.uid))
    notes = {ATTEMPT: str(led.attempt), RESTART_COUNT: str(led.backoff_count), RESUMING: "true" if led.resuming else "false"}
    for name, uid in sorted(led.released.items()) if led.outcome is None else ():
        pod = pods.get(name)
        if pod is not None and pod.uid == uid and pod.gated and not pod.deleting:
            actions.append(Action("release", name, uid, notes))
    actions.extend(Action("create", name) for name in creates if name not in pods)
    return actions


def reconcile(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, world: World, previous_status: Mapping[str, Any] | None, now: float) -> Cycle:
    """Decide one cycle: new ledger, status, actions, events and the next wake-up."""
    led = _housekeep(job, pods, ledger)
    events: list[Any] = []
    creates: list[str] = []
    stale: list[str] = []
    wait: str | None = None
    wake: float | None = None
    if led.outcome is None:
        led, events, creates, stale, wait, wake = _run(job, pods, led, world, now)
    if led.outcome is not None:
        cd = decide_cleanup(job, pods, led)
        led = cd.ledger
    led = _carry(pods, led).evolve(observed_generation=job.generation)
    status = build_status(job, pods, led, previous_status, now, wait, world.tensorboard_ready)
    before = (previous_status or {}).get("phase")
    if before != status["phase"]:
        kind = "Warning" if status["phase"] == "Failed" else "Normal"
        events.append((kind, f"Phase{status['phase']}", f"phase {before or 'none'} -> {status['phase']}"))
    return Cycle(led, status, tuple(_ensure(job, pods, led, creates, stale, world)), tuple(events), wake, wait)


__all__ = ["Action", "Cycle", "World", "keys", "reconcile"]
