"""Observe what the current attempt's released pods did: successes, failures, disruptions.

A failure is a released pod that ended non-zero by itself.  A disruption is a released pod
that something outside the training ended or is ending, that never ran because its
node's kubelet refused to admit it (a device plugin restarting, OutOfcpu), or whose program
its node lost (a node restart: exit 255, reason Unknown, LOST_PROGRAM): it carries the DisruptionTarget
condition (the Eviction API of `kubectl drain`, the scheduler's preemption, taint eviction of
a lost node, PodGC, the kubelet's node-pressure eviction), or it was deleted by someone else
(`kubectl delete pod`, a namespace being deleted), or it vanished, or its name now holds a
pod that is not this attempt's or not the record's.  A disruption never decides the job:
how the program answered SIGTERM (a checkpoint and exit 0, an exit 1) says nothing about the
training, so the pod is replaced (architecture.md §5, "Disruptions").  Each is seen once:
the cycle that counts it also takes the pod out of `released`.  Pods the runtime itself
deleted (restarts, scale-downs, clean-up, pause) were taken out first, so they are neither.
A kubelet's eviction for the pod's own ephemeral-storage or emptyDir limit carries no
DisruptionTarget: it is a failure, counted as a Kubernetes Job counts it, and named as an
eviction (not a bare 137, which reads as out of memory).

A failure of a pod that was running when another pod of the attempt got into trouble is that
trouble's doing, and is a disruption too: ranks are coupled (NCCL, torchrun's rendezvous,
deepspeed's and colossalai run's ssh sessions), so a peer exits 1 or 255 when a drained or
lost member goes, and its exit code says nothing about the training either.  The trouble
lasts while the disrupted pod still runs (a drained pod keeps running through its grace
period, a pod on a lost node until the Node is deleted), then until its replacement runs (a
preempted master's replacement may stay Unschedulable while its peers time out waiting for it),
and DISRUPTION_WINDOW after (REPLACEMENT_WAIT at most while it does not run): its peers fail
when it stops or when they give up waiting, not when it is marked.  Every disrupted pod keeps its own trouble (the ledger's `disrupted`): two
drains that overlap each excuse their own peers.  A pod started after the trouble began fails
on its own account (a replacement that crashes is counted, never replaced at once forever),
and so does one that had already ended before it began (a failure waiting out SETTLE is not
excused by a drain 20 s later): a trouble is dated by its DisruptionTarget (a kubelet's up to
the pod's grace earlier), the deletion's request, the node's mark (up to NODE_NOTICE earlier)
or when the runtime saw it, and a failure ended CLOCK_SLACK before that is still its doing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..model import CLOCK_SLACK, JobView, Ledger, PodState
from .exitcodes import effective_exit_code

# A node that stops reporting (power, a switch) shows in its pods only when the node lifecycle
# controller marks them NotReady: node-monitor-grace-period (50 s since 1.32) after the last
# heartbeat, checked every node-monitor-period (5 s) (pkg/controller/nodelifecycle
# node_lifecycle_controller.go monitorNodeHealth, then MarkPodsNotReady).  A peer whose
# collective broke when the node went fails long before that.
NODE_NOTICE = 55.0

# A container's end its node, not its program, reported: containerd's CRI restore after a node
# restart finds a container that was running with no task, exited 255, reason Unknown
# (pkg/cri/server/restart.go loadContainer); a kubelet that cannot find a container it ran
# says ContainerStatusUnknown, 137 (kubelet_pods.go convertToAPIContainerStatuses).
LOST_PROGRAM = {
    "Unknown": "was lost with its node: the container runtime found its program gone (a node restart)",
    "ContainerStatusUnknown": "was lost with its node: its kubelet could not find its container",
}

DISRUPTION_WINDOW = 30.0  # seconds after a disruption in which a peer's failure is its doing
REPLACEMENT_WAIT = 900.0  # seconds a disrupted pod's trouble lasts at most while its replacement does not run
# The kubelet's messages when it ends a pod for its node's sake (pkg/kubelet/eviction/helpers.go
# nodeLowMessageFmt, nodeConditionMessageFmt; nodeshutdown_manager_linux.go nodeShutdownMessage):
# a disruption where DisruptionTarget (1.26) is missing; any other eviction is for the pod's
# own ephemeral-storage or emptyDir limit.
FOR_THE_NODE = {
    "The node was low on resource": "was evicted by its node",
    "The node had condition": "was evicted by its node",
    "Pod was terminated in response to imminent node shutdown": "was stopped by its node's shutdown",
}
# (torchrun's rendezvous and NCCL's watchdog give up on a missing member within 10 minutes)


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
    finished_at: float | None = None  # when its program ended (the container's finishedAt), if known


@dataclass(frozen=True)
class Disruption:
    """One incarnation ended or ending by something outside the training."""

    name: str
    uid: str
    type: str
    reason: str  # human words: "was evicted (EvictionByEvictionAPI: Eviction API: evicting)"
    peer: str | None = None  # a failure that was this pod's disruption's doing
    late: bool = False  # first seen once its pod had stopped (a kubelet's eviction): peers may have failed first
    since: float | None = None  # when the disruption began (its DisruptionTarget condition), if known
    rejected: bool = False  # its node refused it before it ran, or lost its program (a reboot): replaced after the pod's back-off, as it may happen every time (a pinned node, a program that crashes its machine)


@dataclass(frozen=True)
class Outcomes:
    """What changed since the last cycle."""

    succeeded: tuple[str, ...]  # pod names newly finished with exit 0
    failures: tuple[Failure, ...]  # incarnations newly failed, not yet counted
    disruptions: tuple[Disruption, ...] = ()  # incarnations newly disrupted, not yet replaced


def observe(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, now: float | None = None, ended: Mapping[str, PodState] | None = None) -> Outcomes:
    """Compare the released pods with what is observed now; `ended`: pods deleted lately, as
    their DELETED event left them (a pod that ended before its deletion is judged by its end)."""
    succeeded: list[str] = []
    failures: list[Failure] = []
    disruptions: list[Disruption] = []
    troubled = _troubled(pods, ledger, now, ended)
    for name in ledger.released:
        spec = job.pod(name)
        if spec is None:
            continue
        pod = pods.get(name)
        if pod is None:
            pod = ended_before_deleted((ended or {}).get(name), ledger)
        elif pod.terminal and (pod.deleting or pod.disruption is not None):
            pod = ended_before_deleted(pod, ledger) or pod
        why = _why(name, pod, pods, ledger, ended)
        if why is not None:
            disruptions.append(Disruption(name, pod.uid if pod is not None else "", spec.type, why, late=pod is not None and pod.terminal,
                                          since=pod.disrupted_since if pod is not None else None,
                                          rejected=pod is not None and (pod.rejected is not None or lost_program(pod) is not None)))
        elif pod is not None and pod.phase == "Succeeded":
            succeeded.append(name)
        elif pod is not None and pod.phase == "Failed":
            code = effective_exit_code(pod, job.launcher_kind if _launches(job, spec.rank) else None)
            what = _failed_how(pod, code)
            own = _own_loss(pod, ledger)
            if own is not None:
                disruptions.append(Disruption(name, pod.uid, spec.type, f"{what} while its node was not reporting", since=own))
                continue
            cause = next(((n, w) for n, w, began in troubled if n != name and _coupled(pod, began)), None)
            if cause is not None:  # a peer of a disrupted pod: the disruption's doing, not the training's
                disruptions.append(Disruption(name, pod.uid, spec.type, f"{what} while {cause[0]} {cause[1]}", peer=cause[0]))
                continue
            failures.append(Failure(name, pod.uid, spec.type, code, what, pod.exit_code, pod.started_at, pod.finished_at))
    return Outcomes(tuple(succeeded), tuple(failures), tuple(disruptions))


Began = tuple[float | None, float | None]  # when a trouble began: at the earliest, at the latest (None: unknown)


def _coupled(pod: PodState, began: Began, slack: float = CLOCK_SLACK) -> bool:
    """Whether a failed pod was running when a peer's trouble began, `began` (at the earliest,
    at the latest; None: unknown, so it may have been), and ended after it did."""
    earliest, latest = began
    if latest is None:
        return True
    ended_after = pod.finished_at is None or earliest is None or pod.finished_at >= earliest - slack
    return pod.started_at is not None and pod.started_at <= latest + slack and ended_after  # (startedAt is its node's clock too)


def _troubled(pods: Mapping[str, PodState], ledger: Ledger, now: float | None, ended: Mapping[str, PodState] | None = None) -> list[tuple[str, str, Began]]:
    """(pod, why, began) for each pod of the attempt in trouble now, and each disrupted pod
    until its replacement runs and DISRUPTION_WINDOW after; only pods running when it began,
    and ending after, are its peers (`_coupled`)."""
    out: list[tuple[str, str, Began]] = []
    for name in ledger.released:  # seen disrupted this cycle
        pod = pods.get(name)
        why = _why(name, pod, pods, ledger, ended)
        if why is not None:
            out.append((name, why, _began(pod)))
    seen = {name for name, *_ in out}
    for pod in pods.values():  # still running, on a node that stopped reporting or while being disrupted
        if pod.name in seen or not pod.ours or pod.gated or pod.terminal or pod.attempt != ledger.attempt:
            continue
        if pod.node_lost_since is not None:  # marked up to NODE_NOTICE after the node stopped
            out.append((pod.name, "is on a node that stopped reporting", (pod.node_lost_since - NODE_NOTICE, pod.node_lost_since)))
        elif pod.disruption is not None or (pod.deleting and pod.name in ledger.disrupted):
            began = _began(pod)
            seen_at = ledger.disrupted.get(pod.name)
            out.append((pod.name, f"is being disrupted ({pod.disruption or 'deleted'})", began if began[1] is not None or seen_at is None else (seen_at, seen_at)))
        else:
            continue
        seen.add(pod.name)
    for name, since in sorted(ledger.disrupted.items(), key=lambda kv: kv[1]):  # when it was seen
        if name in seen or now is None or since > now:  # never from the future (a status edit)
            continue
        end = _ended(ledger, name, since, now)
        if end is None:
            out.append((name, f"was disrupted {now - since:.0f} s before and has not run again since", (since, since)))
        elif 0 <= now - end <= DISRUPTION_WINDOW:
            out.append((name, f"was disrupted {now - since:.0f} s before", (since, since)))
    return out


def _began(pod: PodState | None) -> Began:
    """When a disrupted pod's trouble began, as its object says: its DisruptionTarget (a
    kubelet's dated when the pod stopped, so up to its grace earlier), else the deletion's
    request; unknown when it vanished or is not this attempt's."""
    if pod is None or not pod.ours:
        return None, None
    if pod.disruption is not None:
        return pod.disrupted_since, pod.disruption_dated
    if lost_program(pod) is not None:  # lost while it ran: after it started, by when its runtime said so
        return pod.started_at, pod.finished_at
    return (pod.deletion_began, pod.deletion_began) if pod.deleting else (None, None)


def disruption_end(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, now: float) -> Ledger:
    """The ledger with the moment each disrupted pod's replacement was first seen running (or
    the pod no longer wanted: its peers' DISRUPTION_WINDOW runs from then), and entries whose
    window has passed, or that date from the future (a status edit), dropped."""
    ledger = note_lost(pods, ledger, now)
    if not ledger.disrupted:
        return ledger
    wanted = {p.name for p in job.wanted()} - ledger.settled
    keep: dict[str, float] = {}
    ended: dict[str, float] = {}
    for name, since in ledger.disrupted.items():
        if _still_lost(pods.get(name), ledger):  # its trouble lasts while it is marked
            keep[name] = since
            continue
        end = ledger.disrupted_end.get(name)
        if since > now or (end is not None and now - end > DISRUPTION_WINDOW):
            continue
        keep[name] = since
        if end is None and (name not in wanted or _running_again(pods.get(name), ledger)):
            end = now
        end = end if end is not None else _ended(ledger, name, since, now)
        if end is not None:
            ended[name] = end
    if keep == ledger.disrupted and ended == ledger.disrupted_end:
        return ledger
    return ledger.evolve(disrupted=keep, disrupted_end=ended)


def _failed_how(pod: PodState, code: int) -> str:
    """How a failed pod ended, in words, given its effective exit code."""
    what = f"failed with exit code {code}" if pod.exit_code is not None else f"was lost ({pod.reason or 'no exit code'})"
    if pod.exit_code is not None and code != pod.exit_code:
        what = f"failed with exit code {pod.exit_code} (effective {code})"
    if pod.evicted is not None:  # for its own storage limit: the pod's doing, counted as a Job counts it
        what = f"was evicted by its node ({pod.evicted.strip()}; exit code {pod.exit_code})"
    if pod.reason and pod.reason.startswith("Init:"):
        effective = f" (effective {code})" if code != pod.exit_code else ""
        what = f"failed with exit code {pod.exit_code}{effective} in an init container ({pod.reason})"
    return what


def _own_loss(pod: PodState, ledger: Ledger) -> float | None:
    """When the loss of a failed pod's own node began, at the earliest, if the pod was running
    then and ended after (its node's mark, noted by note_lost, less NODE_NOTICE); None when its
    end is its own (a replacement started after the mark: CLOCK_SLACK for its node's clock)."""
    mark = ledger.disrupted.get(pod.name)
    if mark is None or pod.started_at is None or pod.started_at + CLOCK_SLACK > mark or not _coupled(pod, (mark - NODE_NOTICE, mark)):
        return None
    return mark - NODE_NOTICE


def _still_lost(pod: PodState | None, ledger: Ledger) -> bool:
    """A released pod of this attempt whose node is marked as not reporting (observe.py)."""
    return pod is not None and pod.node_lost_since is not None and pod.ours and pod.attempt == ledger.attempt and pod.name in ledger.released_set


def note_lost(pods: Mapping[str, PodState], ledger: Ledger, now: float) -> Ledger:
    """The ledger with each released pod whose node is marked as not reporting noted in
    `disrupted` (since the mark, never after now): its kubelet reports what its program did
    meanwhile only once the node is back (a partition healed: status_manager.go sends its
    cached status then), and an end that came while the node was cut off is the loss's doing,
    as a peer's is (`observe`); its replacement, started after, fails on its own account."""
    lost = {name: min(pod.node_lost_since, now) for name, pod in pods.items()
            if _still_lost(pod, ledger) and pod.node_lost_since is not None
            and (name not in ledger.disrupted or ledger.disrupted[name] < (pod.started_at or 0.0))}  # (an entry of an earlier incarnation's)
    if not lost:
        return ledger
    return ledger.evolve(disrupted={**ledger.disrupted, **lost}, disrupted_end={k: v for k, v in ledger.disrupted_end.items() if k not in lost})


def _ended(ledger: Ledger, name: str, since: float, now: float) -> float | None:
    """When a disrupted pod's trouble ended: its replacement seen running, or REPLACEMENT_WAIT
    after it began for a replacement that never runs (Unschedulable, an init crash loop)."""
    end = ledger.disrupted_end.get(name)
    return since + REPLACEMENT_WAIT if end is None and now - since > REPLACEMENT_WAIT else end


def _running_again(pod: PodState | None, ledger: Ledger) -> bool:
    """Whether a disrupted pod's name holds this attempt's replacement, running untroubled."""
    return (
        pod is not None and pod.ours and pod.attempt == ledger.attempt and not pod.gated and pod.phase == "Running"
        and not pod.deleting and pod.disruption is None and pod.node_lost_since is None
    )


def ended_before_deleted(pod: PodState | None, ledger: Ledger) -> PodState | None:
    """A deleted (or disrupted) pod of this attempt that had ended more than CLOCK_SLACK before
    the deletion or its DisruptionTarget began, judged by its end: the deletion came too late to
    be why.  A completed replica is never run again (a terminal pod is deleted at once,
    strategy.go CheckGracefulDelete, so the watch brings its success and its deletion together:
    `kubectl delete` or a drain of completed pods, PodGC's terminated-pod threshold or a deleted
    node, which patches no terminal pod, gc_controller.go markFailedAndDeletePodWithCondition),
    and a failure stays the failure it was (a failure for good settling, restart.SETTLE, whose
    pod goes meanwhile: decisions.settling_ended keeps its last state).  None otherwise: a pod
    still running, or one that ended after SIGTERM, is a disruption (docs/architecture.md §5)."""
    if pod is None or not pod.ours or pod.attempt != ledger.attempt or pod.phase not in ("Succeeded", "Failed") or pod.finished_at is None:
        return None
    began = [t for t in (pod.deletion_began, pod.disrupted_since) if t is not None]
    if not began or pod.finished_at + CLOCK_SLACK >= min(began):
        return None
    return replace(pod, deleting=False, disruption=None, disruption_message=None, disrupted_since=None, disruption_dated=None)


# A released pod that is gone with no DELETED event the informer still holds (GONE_KEEP): it was
# deleted while the runtime's watch was down (a relist shows only what exists) or before this
# process started.  Its end was never seen, so nothing says it succeeded or failed: a disruption,
# replaced (architecture.md §5, "A pod whose end was never seen"; flatjob has no finalizer).
NEVER_SEEN = "is gone and its end was never seen (deleted while the runtime was not watching)"


def _why(name: str, pod: PodState | None, pods: Mapping[str, PodState], ledger: Ledger, ended: Mapping[str, PodState] | None) -> str | None:
    """`disrupted`, told apart for a pod that is gone: one whose deletion was seen (its DELETED
    event, ended too late before it to be judged by its end) from one that just vanished."""
    if pod is None and name not in pods and name not in (ended or {}):
        return NEVER_SEEN
    return disrupted(pod, ledger)


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
    if pod.phase == "Failed" and pod.evicted:  # a kubelet older than DisruptionTarget (1.26), for its node's sake
        what = next((w for start, w in FOR_THE_NODE.items() if pod.evicted.startswith(start)), None)
        if what is not None:
            return f"{what} ({pod.evicted.strip()})"
    if pod.rejected is not None:  # no program ran: nothing about the training is known
        return f"was rejected by its node before it ran ({pod.rejected})"
    lost = lost_program(pod)
    if lost is not None:  # the node lost the program: its end says nothing about the training
        return f"{lost} (exit code {pod.exit_code}, reason {pod.reason})"
    return None


def lost_program(pod: PodState) -> str | None:
    """Why a Failed pod's program was lost by its node (an init container's too: `Init:Unknown`),
    or None; an eviction for the pod's own storage limit is the pod's doing, counted (a kill
    there may read ContainerStatusUnknown)."""
    if pod.phase != "Failed" or pod.evicted is not None:
        return None
    return LOST_PROGRAM.get((pod.reason or "").removeprefix("Init:"))


def _launches(job: JobView, rank: int) -> bool:
    """Whether the pod at this rank runs the job's launcher (every torchrun pod does)."""
    return job.launcher_kind == "torchrun" or rank == 0
