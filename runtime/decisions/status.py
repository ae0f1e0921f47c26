"""Build the record's status: T9k's JobStatus shape, plus kstatus conditions and the ledger.

T9k condition types and messages (user manuals): Initialized, Running, ReplicaFailure,
Completed, Failed, Paused.  For Flux's kstatus and Argo CD: observedGeneration, Ready
(running as wanted, or succeeded), Reconciling (starting, restarting, resuming) and
Stalled (failed).  A condition's lastTransitionTime changes only when its status does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..model import JobView, Ledger, PodState

MSG_INITIALIZED = "The job has been initialized successfully."
MSG_RUNNING = "All pods are running normally."
MSG_PAUSED = "All replicas are deleted or being deleted."


def rfc3339(ts: float) -> str:
    """UTC seconds as Kubernetes writes times."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _replica_phase(name: str, pod: PodState | None, ledger: Ledger) -> str:
    if pod is None:
        return "Deleted" if ledger.cleaned_up or ledger.paused or name in ledger.stopped else "Creating"
    if pod.deleting:
        return "Deleted"
    return pod.phase if pod.phase in ("Pending", "Running", "Succeeded", "Failed") else "Unknown"


def phase(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> str:
    """Pending, Running, Paused, Resuming, Succeeded or Failed."""
    if ledger.outcome:
        return ledger.outcome
    if ledger.paused:
        return "Paused"
    if ledger.resuming:
        return "Resuming"
    running = any((p := pods.get(n)) is not None and p.uid == uid and p.phase == "Running" for n, uid in ledger.released.items())
    return "Running" if running else "Pending"


def all_running(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> bool:
    """Every pod that should run now is released and running (or already succeeded)."""
    wanted = [p for p in job.wanted() if p.name not in ledger.succeeded]
    return bool(job.wanted()) and all(
        p.name in ledger.released and (o := pods.get(p.name)) is not None and o.phase == "Running" for p in wanted
    )


def _conditions(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, wait: str | None) -> list[tuple[str, str, str, str]]:
    ph = phase(job, pods, ledger)
    steady = all_running(job, pods, ledger)
    failed = ledger.outcome == "Failed"
    done = ledger.outcome is not None
    reason = ledger.reason or "-"
    message = ledger.message or ""
    out = [
        ("Initialized", "True", "-", MSG_INITIALIZED) if ledger.start_time is not None else ("Initialized", "False", "Initializing", wait or "Waiting for the job's pods."),
        ("Running", "False", reason, message) if done else ("Running", "True", "-", MSG_RUNNING) if ph == "Running" else ("Running", "False", ph, wait or ph),
        ("ReplicaFailure", "True", "ReplicaFailed", ledger.replica_failed) if ledger.replica_failed else ("ReplicaFailure", "False", "-", MSG_RUNNING),
        ("Completed", "True", "Succeeded", message) if ledger.outcome == "Succeeded" else ("Completed", "False", reason if failed else "-", message if failed else "The job has not finished."),
        ("Failed", "True", reason, message) if failed else ("Failed", "False", ledger.outcome or "-", message if done else "The job has not failed."),
        ("Paused", "True", "Paused", MSG_PAUSED) if ledger.paused else ("Paused", "False", "-", "The job is not paused."),
        ("Ready", "True", ph, message if done else MSG_RUNNING) if (ledger.outcome == "Succeeded" or (steady and not done)) else ("Ready", "False", ph, message or wait or ph),
        ("Reconciling", "False", ph, ph) if (done or steady or ledger.paused) else ("Reconciling", "True", ph, wait or f"The job is {ph.lower()}."),
        ("Stalled", "True", reason, message) if failed else ("Stalled", "False", ph, "The job has not failed."),
    ]
    return out


def build_status(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, previous: Mapping[str, Any] | None, now: float, wait: str | None = None) -> dict[str, Any]:
    """The whole status document for one reconcile cycle."""
    prev = {c.get("type"): c for c in (previous or {}).get("conditions") or [] if isinstance(c, dict)}
    conditions = []
    for ctype, status, reason, message in _conditions(job, pods, ledger, wait):
        old = prev.get(ctype)
        when = old.get("lastTransitionTime") if old and old.get("status") == status and old.get("lastTransitionTime") else rfc3339(now)
        cond = {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": when}
        if job.generation is not None:
            cond["observedGeneration"] = job.generation
        conditions.append(cond)
    tasks: list[dict[str, Any]] = []
    aggregate = dict.fromkeys(("creating", "pending", "running", "succeeded", "failed", "unknown", "deleted"), 0)
    for rtype in dict.fromkeys(p.type for p in job.pods):
        replicas = []
        for spec in (p for p in job.pods if p.type == rtype):
            pod = pods.get(spec.name)
            rphase = _replica_phase(spec.name, pod, ledger)
            aggregate[rphase.lower()] += 1
            entry: dict[str, Any] = {"name": spec.name, "phase": rphase}
            if pod is not None:
                entry["uid"] = pod.uid
                entry["containers"] = [{"name": n, "state": s, **({"exitCode": c} if c is not None else {})} for n, s, c in pod.containers]
            replicas.append(entry)
        tasks.append({"type": rtype, "restartCount": ledger.restarts.get(rtype, 0), "replicas": replicas})
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
    return status
