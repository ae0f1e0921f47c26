"""Observe what the current attempt's released pods did: successes, failures, disruptions.

A failure is a released pod that ended non-zero by itself.  A disruption is a released pod
that something outside the training ended or is ending: it carries the DisruptionTarget
condition (the Eviction API of `kubectl drain`, the scheduler's preemption, taint eviction of
a lost node, PodGC, the kubelet's node-pressure eviction), or it was deleted by someone else
(`kubectl delete pod`, a namespace being deleted), or it vanished, or its name now holds a
pod that is not this attempt's or not the record's.  A disruption never decides the job:
how the program answered SIGTERM (a checkpoint and exit 0, an exit 1) says nothing about the
training, so the pod is replaced (architecture.md §5, "Disruptions").  Each is seen once:
the cycle that counts it also takes the pod out of `released`.  Pods the runtime itself
deleted (restarts, scale-downs, clean-up, pause) were taken out first, so they are neither.

A failure of a pod that was running when another pod of the attempt got into trouble is that
trouble's doing, and is a disruption too: ranks are coupled (NCCL, torchrun's rendezvous,
deepspeed's and colossalai run's ssh sessions), so a peer exits 1 or 255 when a drained or
lost member goes, and its exit code says nothing about the training either.  The trouble
lasts while the disrupted pod still runs (a drained pod keeps running through its grace
period, a pod on a lost node until the Node is deleted) and DISRUPTION_WINDOW after it was
first seen stopped or gone: its peers fail when it stops, not when it is marked.  A pod
started after the trouble began fails on its own account (a replacement that crashes is
counted, never replaced at once forever).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..model import JobView, Ledger, PodState
from .exitcodes import effective_exit_code

DISRUPTION_WINDOW = 30.0  # seconds after a disruption in which a peer's failure is its doing


@dataclass(frozen=True)
class Failure:
    """One failed incarnation: which pod, which UID, and the effective exit code."""

    name: str
    uid: str
    type: str
    code: int
    reason: str  # human words: "failed with exit code 1"
    exit_code: int | None = None  # the training container's own exit code, when it has one
    started_at: float | None = None  # when its kubelet admitted it (how long it ran)


@dataclass(frozen=True)
class Disruption:
    """One incarnation ended or ending by something outside the training."""

    name: str
    uid: str
    type: str
    reason: str  # human words: "was evicted (EvictionByEvictionAPI: Eviction API: evicting)"
    peer: str | None = None  # a failure that was this pod's disruption's doing


@dataclass(frozen=True)
class Outcomes:
    """What changed since the last cycle."""

    succeeded: tuple[str, ...]  # pod names newly finished with exit 0
    failures: tuple[Failure, ...]  # incarnations newly failed, not yet counted
    disruptions: tuple[Disruption, ...] = ()  # incarnations newly disrupted, not yet replaced


def observe(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, now: float | None = None) -> Outcomes:
    """Compare the released pods with what is observed now."""
    succeeded: list[str] = []
    failures: list[Failure] = []
    disruptions: list[Disruption] = []
    troubled = _troubled(pods, ledger, now)
    for name in ledger.released:
        spec = job.pod(name)
        if spec is None:
            continue
        pod = pods.get(name)
        why = disrupted(pod, ledger)
        if why is not None:
            disruptions.append(Disruption(name, pod.uid if pod is not None else "", spec.type, why))
        elif pod is not None and pod.phase == "Succeeded":
            succeeded.append(name)
        elif pod is not None and pod.phase == "Failed":
            code = effective_exit_code(pod, job.launcher_kind if _launches(job, spec.rank) else None)
            what = f"failed with exit code {code}" if pod.exit_code is not None else f"was lost ({pod.reason or 'no exit code'})"
            if pod.exit_code is not None and code != pod.exit_code:
                what = f"failed with exit code {pod.exit_code} (effective {code})"
            if pod.reason and pod.reason.startswith("Init:"):
                what = f"failed with exit code {pod.exit_code} in an init container ({pod.reason})"
            cause = next(((n, w) for n, w, since in troubled if n != name and (since is None or (pod.started_at is not None and pod.started_at <= since))), None)
            if cause is not None:  # a peer of a disrupted pod: the disruption's doing, not the training's
                disruptions.append(Disruption(name, pod.uid, spec.type, f"{what} while {cause[0]} {cause[1]}", peer=cause[0]))
                continue
            failures.append(Failure(name, pod.uid, spec.type, code, what, pod.exit_code, pod.started_at))
    return Outcomes(tuple(succeeded), tuple(failures), tuple(disruptions))


def _troubled(pods: Mapping[str, PodState], ledger: Ledger, now: float | None) -> list[tuple[str, str, float | None]]:
    """(pod, why, since) for each pod of the attempt in trouble now, and the latest disruption
    while its pod runs and DISRUPTION_WINDOW after; `since` (None: this cycle) is when the
    trouble began, so only pods already running then are its peers."""
    out: list[tuple[str, str, float | None]] = []
    for name in ledger.released:  # seen disrupted this cycle
        why = disrupted(pods.get(name), ledger)
        if why is not None:
            out.append((name, why, None))
    seen = {name for name, _, _ in out}
    for pod in pods.values():  # still running, on a node that stopped reporting or while being disrupted
        if pod.name in seen or not pod.ours or pod.gated or pod.terminal or pod.attempt != ledger.attempt:
            continue
        if pod.node_lost_since is not None:
            out.append((pod.name, "is on a node that stopped reporting", pod.node_lost_since))
        elif pod.disruption is not None or (pod.deleting and pod.name == ledger.disrupted_pod):
            out.append((pod.name, f"is being disrupted ({pod.disruption or 'deleted'})", ledger.disrupted_at))
    if ledger.disrupted_at is not None and now is not None and ledger.disrupted_at <= now:  # never from the future (a status edit)
        end = ledger.disrupted_until if ledger.disrupted_until is not None else now  # not seen stopped yet: it still counts
        if 0 <= now - end <= DISRUPTION_WINDOW:
            out.append((ledger.disrupted_pod or "a pod", f"was disrupted {now - ledger.disrupted_at:.0f} s before", ledger.disrupted_at))
    return out


def disruption_end(pods: Mapping[str, PodState], ledger: Ledger, now: float) -> Ledger:
    """The ledger with the moment its latest disrupted pod was first seen stopped or gone
    (its peers' DISRUPTION_WINDOW runs from then), once."""
    if ledger.disrupted_at is None or ledger.disrupted_until is not None:
        return ledger
    pod = pods.get(ledger.disrupted_pod) if ledger.disrupted_pod is not None else None
    running = pod is not None and not pod.terminal and (pod.disruption is not None or pod.deleting or pod.node_lost_since is not None)
    return ledger if running else ledger.evolve(disrupted_until=now)


def disrupted(pod: PodState | None, ledger: Ledger) -> str | None:
    """Why a released pod's end is not the training's (None: it is, or it has not ended)."""
    if pod is None:
        return "was deleted before it finished"
    if not pod.ours or pod.attempt != ledger.attempt:
        return "was replaced by a pod this attempt did not create"
    if pod.disruption is not None:
        detail = f": {pod.disruption_message}" if pod.disruption_message else ""
        return f"was disrupted ({pod.disruption}{detail})"
    if pod.deleting:
        return "was deleted by someone else before it finished"
    if pod.phase == "Failed" and pod.reason == "Evicted":  # a kubelet older than DisruptionTarget
        return "was evicted by its node"
    return None


def _launches(job: JobView, rank: int) -> bool:
    """Whether the pod at this rank runs the job's launcher (every torchrun pod does)."""
    return job.launcher_kind == "torchrun" or rank == 0
