"""Decide which pods to create from their PodTemplates, which to release, which to replace.

The runtime is the only creator of the job's pods.  An attempt's pods are created gated (the
gate is in the template), stamped with the attempt, and released once the whole gang exists:
- a gang waits for the SSH Secret and the PodGroup, for every pod of earlier attempts to be
  gone (BlockingRecreate, jobset#684), and for the restart back-off;
- launchers (wave 1) follow once the workers (wave 0) are Ready, i.e. their sshd answers,
  except under a gang scheduler, which needs the whole gang ungated before it binds any;
- after the gang start, replacements (a pod-scope restart, an elastic scale-up) are created
  after their back-off and released one by one;
- a create the API server refuses (403 over quota, an admission webhook) rolls the gang
  back: its gated pods are deleted, the record says why, and the gang is tried again after
  a back-off of 10 s doubling to 5 min; the first two refusals over quota in a row, most
  often the quota controller not yet caught up with the pods that just went, after 3 s and 6 s
  and without a Warning;
- a gated pod made for another attempt or from an older template is deleted, never run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import JobView, Ledger, PodSpecView, PodState
from .restart import backoff

EXCEEDED_QUOTA = "exceeded quota: "  # quota admission's refusal (resourcequota/controller.go CheckRequest)
QUOTA_CATCHUP = 3.0  # seconds before a first refusal over quota is tried again, quietly (twice that after a second)
QUIET_QUOTA_TRIES = 2  # refusals over quota in a row before one is said (a Warning, the usual back-off)


@dataclass(frozen=True)
class Deps:
    """What a gang waits for besides its pods, and what the API server said last time."""

    secret_ready: bool = True
    podgroup_ready: bool = True
    refused: tuple[str, str] | None = None  # (pod, the API server's message): its create was refused
    secret_wait: str | None = None  # why the Secret is not ready, when there is more to say than that it is missing


@dataclass(frozen=True)
class ReleaseDecision:
    """Pods to release (recorded in the ledger), create and delete; and why not more."""

    ledger: Ledger
    release: tuple[str, ...] = ()
    create: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    wait: str | None = None
    wake_at: float | None = None
    events: tuple[tuple[str, str, str], ...] = field(default=())


def _current(spec: PodSpecView, pod: PodState | None, ledger: Ledger) -> bool:
    """A gated pod of ours, created for this attempt from the PodTemplate as it is now."""
    return pod is not None and pod.ours and pod.gated and not pod.deleting and pod.phase == "Pending" and pod.attempt == ledger.attempt and pod.spec_hash == spec.spec_hash


def _stale(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> tuple[str, ...]:
    """Gated pods that must never run: another attempt's, or from an older template."""
    out = []
    for name, pod in sorted(pods.items()):
        spec = job.pod(name)
        if pod.ours and pod.gated and not pod.deleting and (spec is None or pod.attempt != ledger.attempt or pod.spec_hash != spec.spec_hash):
            out.append(name)
    return tuple(out)


def unreleased_gang(pods: Mapping[str, PodState]) -> tuple[str, ...]:
    """The gated pods of the job's (by its record's uid), not being deleted: before the gang's
    release, the pods created for it, which no program of ever ran."""
    return tuple(n for n, p in sorted(pods.items()) if p.ours and p.gated and not p.deleting)


def given_back(job: JobView, pods: Mapping[str, PodState], name_taken: bool) -> tuple[str, ...]:
    """The gated pods of an unreleased gang whose names the job gives back (namesakes.py): all of
    them while a namesake's pods hold some of its names; while its PodTemplates are out of step,
    those whose PodTemplate is out of its view (a namesake's apply of the same names took it, or
    it went), which no gang starts from.  The others stay, to be used once the view is whole."""
    return tuple(n for n in unreleased_gang(pods) if name_taken or (job.problem and job.pod(n) is None))


def _refused(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, refusal: tuple[str, str], now: float) -> ReleaseDecision:
    """A pod the attempt needs was refused: roll the gang back (or delay the one pod), say why.

    A refusal over quota is most often the quota controller behind the pods that just went
    (admission charges a new pod at once, only the controller takes a charge off, once it has
    seen the pod end or go: resource_quota_controller.go replenishment, seconds later on a
    busy controller manager): the first two are tried again after 3 s and 6 s, with no
    Warning; a third is said as any refusal is."""
    name, message = refusal
    count = ledger.refusals + 1
    quiet = count <= QUIET_QUOTA_TRIES and EXCEEDED_QUOTA in message
    until = now + (QUOTA_CATCHUP * count if quiet else backoff(count))
    text = f"the API server refused pod {name}: {message}"
    retry = f"retrying in {until - now:.0f} s" + (" (the quota controller may not have released the pods that just went)" if quiet else "")
    if not ledger.released:
        gang = unreleased_gang(pods)
        led = ledger.evolve(refused=text, refusals=count, gang_not_before=until)
        event = ("Warning", "GangRefused", f"{text}; deleted the {len(gang)} pod(s) created for this attempt, {retry}")
        return ReleaseDecision(led, delete=gang, wait=f"{text}; {retry}", wake_at=until, events=() if quiet else (event,))
    led = ledger.evolve(refused=text, refusals=count, not_before={**ledger.not_before, name: until})
    event = ("Warning", "PodRefused", f"{text}; {retry}")
    return ReleaseDecision(led, wait=f"{text}; {retry}", wake_at=until, events=() if quiet else (event,))


def decide_release(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, deps: Deps, now: float) -> ReleaseDecision:
    """The create-and-release step of one reconcile cycle (called only while the job runs)."""
    if job.problem:
        return ReleaseDecision(ledger, wait=job.problem)
    if deps.refused is not None:
        return _refused(job, pods, ledger, deps.refused, now)
    stale = _stale(job, pods, ledger)
    settled = ledger.settled
    wanted = [p for p in job.wanted() if p.name not in settled]
    pending = [p for p in wanted if p.name not in ledger.released_set]
    if not pending:
        return ReleaseDecision(ledger, delete=stale)
    if not deps.secret_ready:
        return ReleaseDecision(ledger, delete=stale, wait=deps.secret_wait or f"waiting for the SSH Secret {job.ssh_secret}")
    if not deps.podgroup_ready:
        return ReleaseDecision(ledger, delete=stale, wait=f"waiting for the PodGroup {job.name}")
    gang = not ledger.released
    if gang:
        old = [p for p in pods.values() if p.ours and p.attempt != ledger.attempt]
        if old:
            return ReleaseDecision(ledger, delete=stale, wait=f"waiting for {len(old)} pod(s) of the previous attempt to terminate")
        if ledger.gang_not_before is not None and now < ledger.gang_not_before:
            why = ledger.refused or "backing off before the restart"
            return ReleaseDecision(ledger, delete=stale, wait=why, wake_at=ledger.gang_not_before)
    due = [p for p in pending if ledger.not_before.get(p.name, 0) <= now]
    later = [ledger.not_before[p.name] for p in pending if ledger.not_before.get(p.name, 0) > now]
    wake = min(later) if later else None
    create = tuple(p.name for p in due if p.name not in pods)
    usable = [p for p in due if _current(p, pods.get(p.name), ledger)]
    squatted = [p.name for p in pending if (o := pods.get(p.name)) is not None and not o.ours]
    if gang and len(usable) < len(pending):
        missing = len(pending) - len(usable)
        wait = f"waiting for {missing} of {len(pending)} pod(s) to exist before starting them together"
        if squatted:
            wait = f"pod {squatted[0]} exists but was not created by this job's runtime (no ownerReference to the record): delete it to let the job start"
        return ReleaseDecision(ledger, create=create, delete=stale, wait=wait, wake_at=wake)
    release = _by_wave(job, wanted, usable, pods, ledger)
    if not release:
        return ReleaseDecision(ledger, create=create, delete=stale, wait="waiting for the workers' sshd to be ready" if usable else None, wake_at=wake)
    names = [p.name for p in release]
    gone = set(names)  # once, not per entry: a 1000-pod release with 1000 back-offs pending
    not_before = {k: v for k, v in ledger.not_before.items() if k not in gone}
    waiting = bool(not_before) and ledger.refused is not None  # a refused pod still backs off: keep its count
    led = ledger.evolve(
        released=(*ledger.released, *names),
        start_time=ledger.start_time if ledger.start_time is not None else now,
        size=job.target if gang else ledger.size,
        not_before=not_before,
        gang_not_before=None if gang else ledger.gang_not_before,
        refused=ledger.refused if waiting else None,
        refusals=ledger.refusals if waiting else 0,
    )
    events = (("Normal", "Released", f"released {len(names)} pod(s): {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"),)
    return ReleaseDecision(led, tuple(names), create, stale, None, wake, events)


def _by_wave(job: JobView, wanted: list[PodSpecView], ready_now: list[PodSpecView], pods: Mapping[str, PodState], ledger: Ledger) -> list[PodSpecView]:
    """Wave 0 now; wave 1 once every wanted wave-0 pod is released and Ready.

    Under a gang scheduler every wave goes at once: it binds no member until minMember of
    them are ungated and fit, and a gated launcher is never in its queue, so holding the
    launcher until its workers are Ready would deadlock the gang.  The launch scripts wait
    for their peers' sshd themselves (wait_for_peers.py), so nothing is lost."""
    if job.gang:
        return list(ready_now)
    first = [p for p in ready_now if p.wave == 0]
    workers = [p for p in wanted if p.wave == 0]
    workers_ready = all(p.name in ledger.released_set and (o := pods.get(p.name)) is not None and o.ready for p in workers)
    second = [p for p in ready_now if p.wave == 1] if workers_ready else []
    return first + second
