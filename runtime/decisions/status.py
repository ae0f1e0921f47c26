"""Build the record's status: T9k's JobStatus shape, plus kstatus conditions and the ledger.

T9k condition types and messages (user manuals): Initialized, Running, ReplicaFailure (reason
ErrorInPod, message `Pod[<pod>] exited with error code N`, ucman genericjob.md; a failed
DeepSpeedJob or ColossalAIJob's mirrors the job's failure, ucman deepspeedjob.md), Completed,
Failed, Paused; a failed job's are reason `Failed` with T9k's message, however it failed
(Stalled names the way: BackoffLimitExceeded, DeadlineExceeded, Failed).  Phase Unknown ("the
controller cannot obtain the job's phase") while a released pod's node stopped reporting
(Kubernetes never sets a pod's own phase Unknown now: the pod stays Running with Ready=False).
A pod in trouble (its node lost, a deletion that cannot finish, unschedulable, an image that
cannot be pulled) is named in Ready and Reconciling, with what a human can do where only a
human can, and in its replica entry.  For Flux's kstatus and
Argo CD: observedGeneration, Ready (running as wanted, or succeeded), Reconciling (starting,
restarting, resuming; reason Restarting and what is restarted while a failed replica waits
for its replacement) and Stalled (failed).  Running's message is T9k's "All pods are running
normally." only while they all are.  A condition's lastTransitionTime changes only
when its status does.  status.tensorboard is T9k's DependentStatus for the TensorBoard
Deployment git holds; status.selector selects the job's pods, for the scale subresource.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flatjob.compiler import keys

from ..model import JobView, Ledger, PodState

MSG_INITIALIZED = "The job has been initialized successfully."
MSG_RUNNING = "All pods are running normally."
# ReplicaFailure of a job that succeeded with no replica failure, as each kind's T9k page shows
# it: the launcher kinds (UC colossalaijob.md, and mpijob.md for DeepSpeedJob's family) `Finished`,
# the others (UC pytorchtrainingjob.md, tensorflowtrainingjob.md) '-' and the Running message.
SUCCEEDED_REPLICAS = {"ColossalAIJob": ("Finished", "The job has finished successfully"), "DeepSpeedJob": ("Finished", "The job has finished successfully")}
# ReplicaFailure of a failed job of a launcher kind mirrors the job's failure, as UC
# deepspeedjob.md shows it (True, reason Failed, `DeepSpeedJob X has failed: X-worker-0 failed
# with exit code 137`); the others name the pod (UC genericjob.md: ErrorInPod, `Pod[<pod>]
# exited with error code N`).
FAILED_MIRRORED = frozenset(SUCCEEDED_REPLICAS)
MSG_NO_FAILURE = "No replica has failed."  # ReplicaFailure=False while a pod is in trouble: never "running normally"
MSG_PAUSED = "All replicas are deleted or being deleted."
REASON_REPLICA_FAILURE = "ErrorInPod"  # T9k's reason (ucman genericjob.md)
REASON_FAILED = "Failed"  # T9k's reason of a failed job's conditions, however it failed (UM, ucman examples)
DELETION_OVERDUE = 60.0  # seconds past a pod's deletionTimestamp before its unfinished deletion is named
# Seconds a bound pod may wait for its containers to be created before it is named: the
# kubelet's podAttachAndMountTimeout (2m3s, pkg/kubelet/volumemanager/volume_manager.go), after
# which it has given up its first wait for the pod's volumes and said why in an Event.
CREATING_OVERDUE = 123.0


# The last second RFC 3339 (and so metav1.Time) can write: 9999-12-31T23:59:59Z.
LAST_SECOND = 253_402_300_799


def rfc3339(ts: float) -> str:
    """UTC seconds as Kubernetes writes times, clamped to what it can write: a time computed
    from a pod's values (a toleration of 2^63-1 s past a lost node) is no time gmtime takes,
    and its OverflowError failed the job's every reconcile (hx22)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(min(max(ts, 0.0), LAST_SECOND) if ts == ts else 0.0))


def _replica_phase(name: str, pod: PodState | None, ledger: Ledger, wanted: set[str]) -> str:
    if pod is None or not pod.ours:  # a pod somebody else made is not the replica
        return "Deleted" if ledger.cleaned_up or ledger.paused or name not in wanted else "Creating"
    if pod.deleting or pod.attempt != ledger.attempt:  # going, or an earlier attempt's on its way out
        return "Deleted"
    return pod.phase if pod.phase in ("Pending", "Running", "Succeeded", "Failed") else "Unknown"


def _released_now(pods: Mapping[str, PodState], ledger: Ledger) -> list[PodState]:
    """The observed pods this attempt released (not those being deleted)."""
    return [p for n in sorted(ledger.released) if (p := pods.get(n)) is not None and p.attempt == ledger.attempt and not p.deleting]


def unknown_pods(pods: Mapping[str, PodState], ledger: Ledger) -> list[str]:
    """Released pods the runtime cannot see: their node stopped reporting (or, from an older
    Kubernetes, their phase is Unknown)."""
    return [p.name for p in _released_now(pods, ledger) if p.phase == "Unknown" or p.node_lost_since is not None]


@dataclass(frozen=True)
class Trouble:
    """A pod that is not doing what the job needs, and why, for the record's readers."""

    pod: str
    reason: str  # NodeLost | DeletionStuck | Disrupted | SchedulingGated | Unschedulable | ContainerCreating | ImagePullBackOff, ErrImagePull and other waiting reasons
    message: str


def troubles(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, now: float | None = None) -> list[Trouble]:
    """The job's pods in trouble, in name order (every pod is looked at: O(pods))."""
    out = []
    for name, pod in sorted(pods.items()):
        if not pod.ours or job.pod(name) is None:
            continue
        node = pod.node or "?"
        overdue = pod.deleting and pod.delete_by is not None and now is not None and now >= pod.delete_by + DELETION_OVERDUE
        held = [f for f in pod.finalizers if f != keys.KUEUE_FINALIZER]  # Kueue's the runtime takes off itself
        if overdue and pod.terminal and held:  # ended, yet kept: someone's finalizer
            out.append(Trouble(name, "DeletionStuck", (
                f"pod {name} has ended and was deleted, but its finalizer(s) {', '.join(held)} keep it, so the job cannot replace "
                f"it: ask their owner, or `kubectl patch pod {name} --type=json -p '[{{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}}]'`")))
        elif overdue and not pod.terminal and pod.node_lost_since is None:  # a node lost before the pod was ready clears no Ready: its deletion tells
            out.append(Trouble(name, "DeletionStuck", (
                f"pod {name} should have stopped by {rfc3339(pod.delete_by or 0)} but its deletion has not finished, so the job cannot "
                f"replace it: if its node {node} is gone, `kubectl delete node {node}`; once you know its processes stopped, "
                f"`kubectl delete pod {name} --grace-period=0 --force`")))
        elif pod.node_lost_since is not None and not pod.terminal:
            since = rfc3339(pod.node_lost_since)
            if pod.deleting:  # taint eviction deleted it, and no kubelet can finish the deletion
                out.append(Trouble(name, "NodeLost", (
                    f"pod {name} is being deleted, but its node {node} has not reported since {since}, so the deletion cannot finish "
                    f"and the job cannot replace the pod: if the machine is gone, `kubectl delete node {node}` (a cloud provider does "
                    f"this itself); once you know its processes stopped, `kubectl delete pod {name} --grace-period=0 --force`")))
            elif pod.unreachable_grace is None:  # it tolerates the unreachable taint forever: nothing deletes it
                out.append(Trouble(name, "NodeLost", (
                    f"pod {name} on node {node} has not been reported since {since} (the node is not ready), and it tolerates an "
                    f"unreachable node forever, so Kubernetes never deletes it and the job cannot replace it: if the machine is gone, "
                    f"`kubectl delete node {node}`; once you know its processes stopped, `kubectl delete pod {name} --grace-period=0 --force`")))
            else:
                out.append(Trouble(name, "NodeLost", (
                    f"pod {name} on node {node} has not been reported since {since} (the node is not ready); Kubernetes deletes it "
                    f"once its toleration of an unreachable node runs out ({pod.unreachable_grace:.0f} s, about "
                    f"{rfc3339(pod.node_lost_since + pod.unreachable_grace)}), then the job replaces it")))
        elif pod.deleting and not pod.terminal and pod.attempt == ledger.attempt and (pod.disruption is not None or name in ledger.disrupted):
            how = f"is being disrupted ({pod.disruption}{': ' + pod.disruption_message if pod.disruption_message else ''})" if pod.disruption else "is being deleted by someone else"
            out.append(Trouble(name, "Disrupted", f"pod {name} {how}; the job replaces it once it has stopped (not a restart)"))
        elif pod.phase == "Pending" and not pod.gated and not pod.deleting and pod.attempt == ledger.attempt:
            out.extend(_pending(name, pod, now))
    return out


def _pending(name: str, pod: PodState, now: float | None = None) -> list[Trouble]:
    """What keeps a released pod Pending, when something does."""
    if pod.other_gates:  # released by the runtime, held by someone else's gate
        return [Trouble(name, "SchedulingGated", (
            f"pod {name} waits for its scheduling gate(s) {', '.join(pod.other_gates)} to be removed: a queue such as Kueue's "
            "removes its gate once it admits the job (see its Workload)"))]
    if pod.unschedulable:
        return [Trouble(name, "Unschedulable", f"pod {name} cannot be scheduled: {pod.unschedulable}")]
    if pod.waiting:
        return [Trouble(name, pod.waiting.split(":", 1)[0], f"pod {name} cannot start: {pod.waiting}")]
    if pod.creating_since is not None and now is not None and now >= pod.creating_since + CREATING_OVERDUE:
        return [Trouble(name, "ContainerCreating", (
            f"pod {name} has waited on node {pod.node or '?'} since {rfc3339(pod.creating_since)} for its containers to be created: "
            f"a volume it mounts may be missing (a ConfigMap, a Secret, a PersistentVolumeClaim) or attached to another node "
            f"(Multi-Attach), or its image is still being pulled; its Events say which: `kubectl describe pod {name}`"))]
    return []


def _summary(found: list[Trouble]) -> str:
    more = f" ({len(found) - 1} more pod(s) in trouble: see status.tasks[].replicas[])" if len(found) > 1 else ""
    return found[0].message + more


def phase(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> str:
    """Pending, Running, Paused, Resuming, Succeeded, Failed or Unknown."""
    if ledger.outcome:
        return ledger.outcome
    if ledger.paused:
        return "Paused"
    if ledger.resuming:
        return "Resuming"
    if unknown_pods(pods, ledger):
        return "Unknown"
    if ledger.started:  # T9k: Pending is "just created, waiting for the replicas to start"; a restart or a settling failure is not that
        return "Running"
    running = any(p.phase == "Running" for p in _released_now(pods, ledger))
    return "Running" if running else "Pending"


def _runs(name: str, pods: Mapping[str, PodState], ledger: Ledger) -> bool:
    """A pod released in this attempt and running."""
    return name in ledger.released_set and (o := pods.get(name)) is not None and o.phase == "Running"


def all_running(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> bool:
    """Every pod that should run now is released and running (or already succeeded)."""
    done = frozenset(ledger.succeeded)
    return bool(job.wanted()) and all(_runs(p.name, pods, ledger) for p in job.wanted() if p.name not in done)


def _few(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 3 else f"{', '.join(names[:3])} and {len(names) - 3} more"


def restarting(job: JobView, ledger: Ledger) -> str | None:
    """What a restart in progress replaces and why, until its replacements are released: a
    replica failed within its restart limit (Argo CD and Flux show this, docs/gitops.md)."""
    if ledger.outcome or ledger.paused or ledger.refused or not ledger.backoff_count or not ledger.replica_failed:
        return None
    group = ledger.gang_not_before is not None and not ledger.released
    waiting = sorted(n for n in ledger.not_before if n not in ledger.released_set)
    if not (group or waiting):
        return None
    everyone = [p.name for p in job.wanted()]
    who = (f"all {len(everyone)} pods" if len(everyone) > 1 else _few(everyone)) if group else _few(waiting)
    limit = f" of backoffLimit {job.backoff_limit}" if job.backoff_limit is not None else ""
    return f"Restarting {who} after {ledger.replica_failed} (restart {ledger.backoff_count}{limit})."


def _running_note(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> str:
    """T9k's Running message when every pod runs; else how many do, and which failed for good."""
    wanted = [p.name for p in job.wanted() if p.name not in ledger.succeeded]
    up = sum(1 for n in wanted if _runs(n, pods, ledger))
    if up == len(wanted):
        return MSG_RUNNING
    lost = [n for n in wanted if n in ledger.failed]
    return f"{up} of {len(wanted)} pods are running" + (f"; {_few(lost)} failed and {'is' if len(lost) == 1 else 'are'} not restarted." if lost else ".")


def settled(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> bool:
    """Running as it will stay: every pod runs but those that failed for good without ending
    the job (a worker under restartPolicy Never; only the master decides). Nothing is being
    reconciled: Ready (as its policy wants it; ReplicaFailure and the message name the failed),
    not Reconciling, so GitOps tools read the job as current (docs/gitops.md)."""
    wanted = [p.name for p in job.wanted() if p.name not in ledger.settled]
    return bool(ledger.failed) and bool(wanted) and all(_runs(n, pods, ledger) for n in wanted)


def replacing(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> str | None:
    """Which disrupted pods are being replaced (not restarts: docs/runtime.md), until each
    replacement runs, with how many of the job's pods run meanwhile."""
    gone = sorted(n for n in ledger.disrupted if n not in ledger.disrupted_end and job.pod(n) is not None and not _runs(n, pods, ledger))
    if ledger.outcome or ledger.refused or not gone:  # a replacement the API server refuses says why instead
        return None
    return f"Replacing {_few(gone)} after a disruption (not counted as a restart); {_running_note(job, pods, ledger)}"


def _conditions(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, wait: str | None, found: list[Trouble]) -> list[tuple[str, str, str, str]]:
    ph = phase(job, pods, ledger)
    # PodTemplates out of step with the record (job.problem): the pods in view are not all the
    # job's, and nothing is judged till they are whole; never steady (review hx24: a template
    # deleted under a running job left it Ready while its pod failed unreplaced).
    steady = all_running(job, pods, ledger) and not found and not job.problem
    restart = restarting(job, ledger)
    degraded = not steady and not found and not restart and ph == "Running" and settled(job, pods, ledger) and not job.problem
    busy = "Restarting" if restart else ph  # Ready and Reconciling's reason while not steady
    failed = ledger.outcome == "Failed"
    done = ledger.outcome is not None
    why = ledger.reason or "-"  # how it ended: Succeeded, Failed, BackoffLimitExceeded, DeadlineExceeded
    reason = REASON_FAILED if failed else why  # T9k's conditions: every failure is `Failed`
    message = ledger.message or ""
    if found and not done:  # a pod in trouble says more than a restart in progress
        wait, busy, restart = _summary(found), found[0].reason, None
    elif ph == "Unknown":
        wait = f"The phase of {', '.join(unknown_pods(pods, ledger))} is Unknown: the node does not report it."
    note = replacing(job, pods, ledger) or ledger.refused or (_running_note(job, pods, ledger) if ph == "Running" else None)  # better than the bare phase
    out = [
        ("Initialized", "True", "-", MSG_INITIALIZED) if ledger.start_time is not None or ledger.resuming else ("Initialized", "False", "Initializing", wait or "Waiting for the job's pods."),
        ("Running", "False", reason, message) if done else ("Running", "True", "-", restart or _running_note(job, pods, ledger)) if ph == "Running" and not found else ("Running", "Unknown" if ph == "Unknown" else "True" if ph == "Running" else "False", busy, restart or wait or ph),
        ("ReplicaFailure", "True", REASON_FAILED, message) if failed and job.kind in FAILED_MIRRORED
        else ("ReplicaFailure", "True", REASON_REPLICA_FAILURE, ledger.replica_failed) if ledger.replica_failed
        else ("ReplicaFailure", "False", *SUCCEEDED_REPLICAS.get(job.kind, ("-", MSG_RUNNING))) if ledger.outcome == "Succeeded"
        else ("ReplicaFailure", "False", "-", MSG_RUNNING if steady else MSG_NO_FAILURE),
        ("Completed", "True", "Succeeded", message) if ledger.outcome == "Succeeded" else ("Completed", "False", reason if failed else "-", message if failed else "The job has not finished."),
        ("Failed", "True", reason, message) if failed else ("Failed", "False", ledger.outcome or "-", message if done else "The job has not failed."),
        ("Paused", "True", "Paused", MSG_PAUSED) if ledger.paused else ("Paused", "False", "-", "The job is not paused."),
        ("Ready", "True", ph, message if done else MSG_RUNNING) if (ledger.outcome == "Succeeded" or (steady and not done)) else ("Ready", "True", ph, _running_note(job, pods, ledger)) if degraded and not done else ("Ready", "False", busy, message or restart or wait or note or ph),
        ("Reconciling", "False", ph, _running_note(job, pods, ledger) if degraded and not done else ph) if (done or steady or degraded or ledger.paused) else ("Reconciling", "True", busy, restart or wait or note or f"The job is {ph.lower()}."),
        ("Stalled", "True", why, message) if failed else ("Stalled", "False", ph, "The job has not failed."),
    ]
    return out


# tasks[].replicas lists at most REPLICAS_LISTED replicas of a type and JOB_LISTED of the whole
# job (docs/runtime.md, "Status"), each with at most CONTAINERS_LISTED containers: a 5000-pod
# job's full list would be ~750 KB of a 1.5 MiB object, a GenericJob may have up to 100 replica
# types (FJ105), and `aggregate` counts every replica anyway.  Every type's first replica is
# listed, first: T9k's manuals follow a job with `kubectl logs $(kubectl get pj X -o
# jsonpath='{.status.tasks[0].replicas[0].name}')`, which must name the master (worker-0, the
# launcher); the other places go to the job's most telling replicas, whatever their type.
REPLICAS_LISTED = 100
JOB_LISTED = 200
CONTAINERS_LISTED = 8
_PHASE_ORDER = {phase: i for i, phase in enumerate(("Failed", "Unknown", "Pending", "Creating", "Deleted", "Running", "Succeeded"))}
Replica = tuple[Any, PodState | None, str]  # (its spec, its pod, its phase in the record)


def _listed(types: list[list[Replica]]) -> list[list[Replica]]:
    """Each type's replicas to list: all when the job has at most JOB_LISTED and each type at
    most REPLICAS_LISTED; else each type's first, then the most telling others (failed, unknown,
    pending, creating, deleted, running, succeeded; by index), within both caps, in index order."""
    if sum(map(len, types)) <= JOB_LISTED and all(len(t) <= REPLICAS_LISTED for t in types):
        return types
    chosen = [[min(t, key=lambda r: r[0].index)] if t else [] for t in types]
    others = sorted(((i, r) for i, t in enumerate(types) for r in t if r is not chosen[i][0]),
                    key=lambda ir: (_PHASE_ORDER.get(ir[1][2], 9), ir[1][0].index, ir[0]))
    room = JOB_LISTED - sum(map(len, chosen))
    for i, r in others:
        if room <= 0:
            break
        if len(chosen[i]) < REPLICAS_LISTED:
            chosen[i].append(r)
            room -= 1
    return [c[:1] + sorted(c[1:], key=lambda r: r[0].index) for c in chosen]


def _replica(spec: Any, pod: PodState | None, rphase: str, trouble: Trouble | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": spec.name, "phase": rphase}
    if pod is not None:
        entry["uid"] = pod.uid
        entry["containers"] = [{"name": n, "state": s, **({"exitCode": c} if c is not None else {})} for n, s, c in pod.containers[:CONTAINERS_LISTED]]
    if trouble is not None:
        entry["reason"], entry["message"] = trouble.reason, trouble.message
    elif pod is not None and pod.disruption is not None:
        entry["reason"], entry["message"] = "Disrupted", f"{pod.disruption}: {pod.disruption_message or ''}".rstrip(": ")
    return entry


def tensorboard_status(job: JobView, ready: bool | None) -> dict[str, Any] | None:
    """T9k's DependentStatus for the TensorBoard, naming the Deployment that stands in for T9k's
    TensorBoard object; `ready` is None until the runtime observes the Deployment."""
    if job.tensorboard is None:
        return None
    dependent = {"apiVersion": "apps/v1", "kind": "Deployment", "name": job.tensorboard}
    if job.namespace:
        dependent["namespace"] = job.namespace
    reason, note, kind = {
        True: ("DependentReady", "is ready", "Normal"),
        False: ("DependentNotReady", "is not ready", "Warning"),
        None: ("DependentUnknown", "is not observed by the runtime", "Normal"),
    }[ready]
    return {"action": "NOP", "dependent": dependent, "note": f"TensorBoard [{job.tensorboard}] {note}", "ready": bool(ready), "reason": reason, "type": kind}


def build_status(
    job: JobView, pods: Mapping[str, PodState], ledger: Ledger, previous: Mapping[str, Any] | None, now: float, wait: str | None = None,
    tensorboard_ready: bool | None = None,
) -> dict[str, Any]:
    """The whole status document for one reconcile cycle."""
    prev = {c.get("type"): c for c in (previous or {}).get("conditions") or [] if isinstance(c, dict)}
    found = troubles(job, pods, ledger, now) if ledger.outcome is None else []
    by_pod = {t.pod: t for t in found}
    conditions = []
    for ctype, status, reason, message in _conditions(job, pods, ledger, wait, found):
        old = prev.get(ctype)
        when = old.get("lastTransitionTime") if old and old.get("status") == status and old.get("lastTransitionTime") else rfc3339(now)
        cond = {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": when}
        if job.generation is not None:
            cond["observedGeneration"] = job.generation
        conditions.append(cond)
    tasks: list[dict[str, Any]] = []
    aggregate = dict.fromkeys(("creating", "pending", "running", "succeeded", "failed", "unknown", "deleted"), 0)
    wanted = {p.name for p in job.wanted()}
    # A pod the record names and owns whose PodTemplate the job lacks now (job.unplanned: one a
    # namesake of another kind took over) still runs as the job's: counted and listed, where
    # a job with two of its three pods running said `running: 1` and listed no worker.
    kept = [n for n in job.unplanned if (p := pods.get(n.name)) is not None and p.ours]
    specs = [*job.pods, *kept]
    rtypes = list(dict.fromkeys(p.type for p in specs))
    by_type: dict[str, list[Replica]] = {rtype: [] for rtype in rtypes}
    for spec in specs:
        pod = pods.get(spec.name)
        rphase = _replica_phase(spec.name, pod, ledger, wanted)
        aggregate[rphase.lower()] += 1
        by_type[spec.type].append((spec, pod, rphase))
    if kept:  # in index order among the type's others
        by_type = {t: sorted(r, key=lambda r: r[0].index) for t, r in by_type.items()}
    for rtype, listed in zip(rtypes, _listed([by_type[t] for t in rtypes]), strict=True):
        tasks.append({"type": rtype, "restartCount": ledger.restarts.get(rtype, 0), "replicas": [_replica(spec, pod, rphase, by_pod.get(spec.name)) for spec, pod, rphase in listed]})
    status: dict[str, Any] = {
        "phase": phase(job, pods, ledger),
        "conditions": conditions,
        "tasks": tasks,
        "aggregate": aggregate,
        "backoffCount": ledger.backoff_count,
        "runtime": ledger.to_dict(),
    }
    if job.generation is not None:
        status["observedGeneration"] = job.generation
    status["selector"] = f"{keys.JOB_NAME}={job.name}"  # the scale subresource's labelSelectorPath (HPA, KEDA)
    tensorboard = tensorboard_status(job, tensorboard_ready)
    if tensorboard is not None:
        status["tensorboard"] = tensorboard
    return status
