"""One reconcile cycle as a pure function of (job, observed pods, ledger, world, now).

The steps run in a fixed order, each a decision in its own module:
    edits -> pause -> outcomes -> success -> restart -> failure -> scale -> release
    (after the finish: clean-up, which deletes pods or stops them and keeps them), then status.
The cycle returns the new ledger and status (written once, before anything acts) and the
actions; actions are re-derived from the ledger and the pods every cycle, so a runtime
killed between writing status and acting simply does the same actions again on restart.
The runtime acts only on pods its record owns (ownerReference, controller: true).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from flatjob.compiler import keys

from ..model import JobView, Ledger, PodState
from .cleanup import decide_cleanup
from .edits import decide_edit
from .elastic import decide_scale
from .finish import FinishDecision, decide_failure, decide_success
from .outcomes import disruption_end, observe
from .pause import decide_pause
from .release import Deps, decide_release, given_back
from .restart import SETTLE, decide_restart, explained, restart_completed
from .status import CREATING_OVERDUE, DELETION_OVERDUE, all_running, build_status

ATTEMPT, RESTART_COUNT, RESUMING = keys.ATTEMPT, keys.RESTART_COUNT, keys.RESUMING


@dataclass(frozen=True)
class Action:
    """One change to make in the cluster; every action is idempotent."""

    kind: str  # release | create | delete | stop | unhold | create-secret
    name: str
    uid: str | None = None  # precondition for delete/release/stop: only this incarnation
    annotations: Mapping[str, str] = field(default_factory=dict)  # create: the runtime's own annotations


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
    secret_known: bool = True  # False while the Secret could not be read: wait, never make one blind
    secret_refused: str | None = None  # why the job's `<job>-ssh` is not its runtime's (sshkeys): no pod created or released
    name_taken: bool = False  # a namesake's pods (or PodGroup) hold the job's names (namesakes.py): its unreleased gang's pods are deleted
    secret_is_ours: bool = True  # False when the user named an existing Secret
    podgroup_exists: bool = True
    tensorboard_ready: bool | None = None  # the TensorBoard Deployment's readiness, once observed
    refused: tuple[str, str] | None = None  # (pod, message): the API server refused to create it last cycle
    secret_uid: str | None = None  # the uid of the job's own `<job>-ssh` Secret, once trusted (kept in the ledger)
    ended: Mapping[str, PodState] = field(default_factory=dict)  # pods deleted lately, as their DELETED event left them

    @property
    def secret_ready(self) -> bool:
        """A pod may be released: the job's SSH Secret exists and is trusted (or none is needed)."""
        return self.secret_exists and self.secret_refused is None


def _finish(led: Ledger, fd: FinishDecision, now: float) -> tuple[Ledger, tuple[tuple[str, str, str], ...]]:
    if fd.outcome is None:
        return led, ()
    kind = "Normal" if fd.outcome == "Succeeded" else "Warning"
    text = f"{fd.message}; {fd.note}" if fd.note else fd.message or ""
    return led.evolve(outcome=fd.outcome, reason=fd.reason, message=fd.message, finished_at=now), ((kind, fd.reason or fd.outcome, text),)


NEVER_STARTED = "ContainerStatusUnknown"  # a container's state when its pod ended before it started (status_manager.go TerminatePod)


def _seen_started(led: Ledger, pods: Mapping[str, PodState]) -> Ledger:
    """The ledger with `started` once a released pod shows that a program of it ran: running,
    succeeded, or failed with an exit code of its own (not refused by its kubelet, nor stopped
    before any container started: ContainerStatusUnknown); the job is never Pending again."""
    if led.started:
        return led
    ran = any(p.phase in ("Running", "Succeeded") or (p.phase == "Failed" and p.rejected is None and p.exit_code is not None and p.reason != NEVER_STARTED)
              for n in led.released if (p := pods.get(n)) is not None)
    return led.evolve(started=True) if ran else led


def _run(job: JobView, pods: Mapping[str, PodState], led: Ledger, world: World, now: float, settle: float) -> tuple[Ledger, list[Any], tuple[str, ...], tuple[str, ...], str | None, float | None]:
    """The steps while the job has no outcome yet; returns ledger, events, creates, deletes, wait, wake."""
    events: list[Any] = []
    if job.run_mode != "pause" and not led.paused and not job.problem:
        ed = decide_edit(job, pods, led)
        led, events = ed.ledger, [*events, *ed.events]
    pd = decide_pause(job, pods, led)
    led, events = pd.ledger, [*events, *pd.events]
    if led.paused:
        return led, events, (), (), "paused", None
    if job.problem:  # a partial view of the pods: judge nothing (outcomes, edits, scale) until it is whole
        return led, events, (), (), job.problem, None
    # A failure settles only while its pod is this attempt's: an edit, a pause or a restart that
    # started another attempt leaves nothing to decide (a stale entry would hold success back).
    if led.settling:
        led = led.evolve(settling={k: v for k, v in led.settling.items() if k in led.released_set})
        pods = {**settling_ended(world.ended, led), **pods}
    led = _seen_started(led, pods)
    out = observe(job, pods, led, now, world.ended)
    if out.succeeded:
        led = led.evolve(succeeded=led.succeeded + out.succeeded, released=led.without("released", out.succeeded))
    if not led.settling:  # a failure for good seen earlier decides first, once settled (restart.SETTLE)
        led, ev = _finish(led, decide_success(job, led), now)
        events.extend(ev)
    if led.outcome:
        return led, events, (), (), None, None
    rd = decide_restart(job, pods, led, out.failures, now, out.disruptions, settle)
    led, events = rd.ledger, [*events, *rd.events]
    led, ev = explained(job, pods, led, now)  # a restart counted before the disruption that caused it showed
    events.extend(ev)
    led = disruption_end(job, pods, led, now)
    if rd.fatal is None and out.succeeded:
        rc = restart_completed(job, pods, led, out.succeeded, now)
        led, events = rc.ledger, [*events, *rc.events]
    led, ev = _finish(led, decide_failure(job, led, rd.fatal, rd.exhausted, now), now)
    events.extend(ev)
    if led.outcome:
        return led, events, (), (), None, None
    sc = decide_scale(job, pods, led, now)
    led, events = sc.ledger, [*events, *sc.events]
    rel = decide_release(job, pods, led, Deps(world.secret_ready, world.podgroup_exists, world.refused, world.secret_refused), now)
    led, events = rel.ledger, [*events, *rel.events]
    if led.resuming and all_running(job, pods, led):
        led = led.evolve(resuming=False)
    wake = min((t for t in (rel.wake_at, rd.wake_at) if t is not None), default=None)
    if job.deadline is not None and led.start_time is not None:
        end = led.start_time + job.deadline
        wake = end if wake is None else min(wake, end)
    return led, events, rel.create, rel.delete, rel.wait, wake


def settling_ended(ended: Mapping[str, PodState], led: Ledger) -> dict[str, PodState]:
    """Pods whose failure for good is settling (restart.SETTLE) but which were deleted meanwhile
    (a deleted node's PodGC, a human), as their DELETED event left them: still the failure's
    evidence, and their name still taken, so the settle decides by the failure and nothing
    replaces the pod first (review hx14: its node deleted 5 s after a master's exit 1, the
    job ran on as if the master had been disrupted)."""
    return {n: replace(p, deleting=True) for n, p in ended.items()
            if n in led.settling and p.ours and p.attempt == led.attempt and p.phase == "Failed"}


def _doomed(job: JobView, pod: PodState, led: Ledger, wanted: set[str], settled: set[str]) -> bool:
    """Whether a pod of the job must go while it runs (re-derived every cycle); while the
    PodTemplates are out of step with the record (job.problem), by the ledger alone."""
    by_ledger = (
        led.paused
        or pod.attempt != led.attempt  # an earlier attempt's (or made by someone else)
        or (not pod.gated and pod.name not in led.released_set and pod.name not in settled)  # ran, and is not wanted in this attempt any more
    )
    if by_ledger or job.problem:
        return by_ledger
    return (
        job.pod(pod.name) is None  # its PodTemplate left git
        or (pod.name not in wanted and pod.name not in settled)  # a seat beyond the elastic target
    )


def held_by_kueue(pod: PodState) -> bool:
    """A pod of the job's that has ended, or never reached a node, and is being deleted, kept by
    Kueue's finalizer, which Kueue takes off such a pod of a group only once its replacement
    exists (pod_controller.go FindMatchingWorkloads: a deleted unbound pod is inactive, as a
    Failed one, isPodRunnableOrSucceeded; "workload is not deleted if all of the pods in the
    group are deleted" keeps them): a replacement of the same name cannot exist first, so the
    runtime, the pods' creating controller, takes it off (review 23, round 15: the job never ran
    again; review hx18: a job paused while Kueue still queued it, every pod gated, never resumed)."""
    return pod.ours and pod.deleting and (pod.terminal or pod.node is None) and keys.KUEUE_FINALIZER in pod.finalizers


def _ensure(job: JobView, pods: Mapping[str, PodState], led: Ledger, creates: tuple[str, ...], deletes: tuple[str, ...], world: World, stops: tuple[str, ...] = ()) -> list[Action]:
    """Actions that bring the cluster in line with the ledger (re-derived every cycle)."""
    actions: list[Action] = []
    if job.ssh_secret and world.secret_known and not world.secret_exists and world.secret_is_ours and led.outcome is None:
        actions.append(Action("create-secret", job.ssh_secret))
    wanted = {p.name for p in job.wanted()}
    settled = led.settled
    extra = set(deletes)
    for pod in sorted(pods.values(), key=lambda p: p.name):
        if not pod.ours or pod.deleting:
            continue  # only pods the record owns: never one somebody else made
        if pod.name in extra or (pod.attempt != led.attempt if led.outcome else _doomed(job, pod, led, wanted, settled)):
            actions.append(Action("delete", pod.name, pod.uid))
    actions.extend(Action("stop", name, pods[name].uid) for name in stops)  # after the outcome: end it, keep it (clean-up)
    actions.extend(Action("unhold", p.name, p.uid) for p in sorted(pods.values(), key=lambda p: p.name) if held_by_kueue(p))
    if led.outcome is None and world.secret_ready:  # a released pod's replacement waits for a trusted Secret, as its first release did
        for name in led.released:
            pod = pods.get(name)
            if pod is not None and pod.ours and pod.gated and not pod.deleting and pod.attempt == led.attempt:
                actions.append(Action("release", name, pod.uid))
        notes = {ATTEMPT: str(led.attempt), RESTART_COUNT: str(led.backoff_count), RESUMING: "true" if led.resuming else "false"}
        actions.extend(Action("create", name, annotations=notes) for name in creates if name not in pods)
    return actions


def reconcile(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, world: World, previous_status: Mapping[str, Any] | None, now: float, settle: float = SETTLE) -> Cycle:
    """Decide one cycle: new ledger, status, actions, events and the next wake-up (`settle`: how
    long a failure that would end the job waits for a disruption; run-local has none to wait for)."""
    led = ledger if world.secret_uid in (None, ledger.ssh_secret) else ledger.evolve(ssh_secret=world.secret_uid)
    events: list[Any] = []
    creates: tuple[str, ...] = ()
    deletes: tuple[str, ...] = ()
    stops: tuple[str, ...] = ()
    wait: str | None = None
    wake: float | None = None
    if led.outcome is None:
        led, events, creates, deletes, wait, wake = _run(job, pods, led, world, now, settle)
        if not led.released:  # names a namesake may need (namesakes.py), given back
            deletes = (*deletes, *given_back(job, pods, world.name_taken))
    if led.outcome is not None:
        cd = decide_cleanup(job, pods, led)
        led, deletes, stops = cd.ledger, cd.delete, cd.stop
    led = led.evolve(observed_generation=job.generation)
    overdue = [t for p in pods.values() if p.ours and p.delete_by is not None and (t := p.delete_by + DELETION_OVERDUE) > now]
    overdue += [t for p in pods.values() if p.ours and p.creating_since is not None and (t := p.creating_since + CREATING_OVERDUE) > now]
    wake = min((t for t in (wake, *overdue) if t is not None), default=None)  # a deletion that may not finish, a pod not created, is named then
    status = build_status(job, pods, led, previous_status, now, wait, world.tensorboard_ready)
    before = (previous_status or {}).get("phase")
    if before != status["phase"]:
        kind = "Warning" if status["phase"] == "Failed" else "Normal"
        events.append((kind, f"Phase{status['phase']}", f"phase {before or 'none'} -> {status['phase']}"))
    return Cycle(led, status, tuple(_ensure(job, pods, led, creates, deletes, world, stops)), tuple(events), wake, wait)


def scale_backoff(cycle: Cycle, before: Ledger, now: float, scale: float) -> Cycle:
    """The cycle with the back-offs it just set shortened (or lengthened) by `scale`, older
    ones left alone: `flatjob run-local --backoff-scale` for quick smoke tests."""
    led = cycle.ledger
    fresh = {k: v for k, v in led.not_before.items() if before.not_before.get(k) != v and v > now}
    gang = led.gang_not_before if led.gang_not_before != before.gang_not_before and led.gang_not_before is not None and led.gang_not_before > now else None
    if scale == 1.0 or not (fresh or gang):
        return cycle
    shrink = lambda t: now + (t - now) * scale  # noqa: E731
    led = led.evolve(not_before={**led.not_before, **{k: shrink(v) for k, v in fresh.items()}}, gang_not_before=shrink(gang) if gang else led.gang_not_before)
    times = [t for t in (cycle.wake_at, *(shrink(v) for v in fresh.values()), shrink(gang) if gang else None) if t is not None]
    return replace(cycle, ledger=led, status={**cycle.status, "runtime": led.to_dict()}, wake_at=min(times) if times else None)


__all__ = ["Action", "Cycle", "World", "keys", "reconcile", "scale_backoff"]
