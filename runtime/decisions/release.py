"""Decide which gated pods may run now, and which missing pods to create.

Gang start: nothing of an attempt runs until every pod it needs exists (created by the
GitOps tool or by the runtime), the SSH Secret and the PodGroup exist, the previous
attempt's pods are gone, and the back-off has passed.  Launchers (wave 1) follow once the
workers (wave 0) are Ready, i.e. their sshd accepts connections.  After the gang start,
replacements and elastic scale-ups are released one by one.  A gated pod whose spec-hash
differs from the record's rendering is stale (an old git revision): it is deleted, never run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import JobView, Ledger, PodSpecView, PodState


@dataclass(frozen=True)
class Deps:
    """Objects besides pods that a release waits for."""

    secret_ready: bool = True
    podgroup_ready: bool = True


@dataclass(frozen=True)
class ReleaseDecision:
    """Pods to release (recorded in the ledger), create, or delete as stale; and why not more."""

    ledger: Ledger
    release: tuple[str, ...] = ()
    create: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    wait: str | None = None
    wake_at: float | None = None
    events: tuple[tuple[str, str, str], ...] = field(default=())


def _usable(spec: PodSpecView, pod: PodState | None, ledger: Ledger) -> bool:
    """A gated, current incarnation that never ran and belongs to no finished business."""
    if pod is None or not pod.gated or pod.deleting or pod.phase != "Pending":
        return False
    gone = set(ledger.counted) | set(ledger.draining) | set(ledger.cleaned) | set(ledger.stopped.values())
    return pod.uid not in gone and pod.spec_hash == spec.spec_hash


def decide_release(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, deps: Deps, now: float) -> ReleaseDecision:
    """The release step of one reconcile cycle (called only while the job runs)."""
    settled = set(ledger.succeeded) | set(ledger.failed)
    wanted = [p for p in job.wanted() if p.name not in settled]
    stale = tuple(p.name for p in wanted if (o := pods.get(p.name)) is not None and o.gated and not o.deleting and o.spec_hash != p.spec_hash)
    create = tuple(p.name for p in wanted if p.name not in pods)
    waiting_drain = [o.name for o in pods.values() if o.uid in ledger.draining]
    if not deps.secret_ready:
        return ReleaseDecision(ledger, (), create, stale, f"waiting for the SSH Secret {job.ssh_secret}")
    if not deps.podgroup_ready:
        return ReleaseDecision(ledger, (), create, stale, f"waiting for the PodGroup {job.name}")
    pending = [p for p in wanted if p.name not in ledger.released]
    if not pending:
        return ReleaseDecision(ledger, (), create, stale)
    if job.scope == "group" and waiting_drain:
        return ReleaseDecision(ledger, (), create, stale, f"waiting for {len(waiting_drain)} pod(s) of the previous attempt to terminate")
    usable = [p for p in pending if _usable(p, pods.get(p.name), ledger) and p.name not in waiting_drain]
    later = [ledger.not_before[p.name] for p in usable if ledger.not_before.get(p.name, 0) > now]
    ready_now = [p for p in usable if ledger.not_before.get(p.name, 0) <= now]
    gang = not ledger.released
    if gang and len(usable) < len(pending):
        missing = len(pending) - len(usable)
        return ReleaseDecision(ledger, (), create, stale, f"waiting for {missing} of {len(pending)} pod(s) to exist before starting them together")
    if gang and later:
        return ReleaseDecision(ledger, (), create, stale, "backing off before the restart", wake_at=max(later))
    release = _by_wave(job, wanted, ready_now, pods, ledger)
    wake = min(later) if later else None
    if not release:
        return ReleaseDecision(ledger, (), create, stale, "waiting for the workers' sshd to be ready" if ready_now else None, wake)
    released = {**ledger.released, **{p.name: pods[p.name].uid for p in release}}
    hashes = {**ledger.spec_hashes, **{p.name: p.spec_hash for p in release}}
    size = job.target if gang else ledger.size
    led = ledger.evolve(released=released, spec_hashes=hashes, start_time=ledger.start_time if ledger.start_time is not None else now, size=size)
    events = (("Normal", "Released", f"released {len(release)} pod(s): {', '.join(p.name for p in release[:5])}{' ...' if len(release) > 5 else ''}"),)
    return ReleaseDecision(led, tuple(p.name for p in release), create, stale, None, wake, events)


def _by_wave(job: JobView, wanted: list[PodSpecView], ready_now: list[PodSpecView], pods: Mapping[str, PodState], ledger: Ledger) -> list[PodSpecView]:
    """Wave 0 now; wave 1 once every wanted wave-0 pod is released and Ready."""
    first = [p for p in ready_now if p.wave == 0]
    workers = [p for p in wanted if p.wave == 0]
    workers_ready = all(p.name in ledger.released and (o := pods.get(p.name)) is not None and o.ready for p in workers)
    second = [p for p in ready_now if p.wave == 1] if workers_ready else []
    return first + second
