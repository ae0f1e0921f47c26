"""Clean-up after the job finished (cleanUpPolicy; ColossalAI's cleanUpWorkers).

The runtime is the only creator of the job's pods and creates none after the outcome, so
what the policy deletes never comes back, and the choice is simply re-derived every cycle.
Pods that never ran go whatever the policy says: still gated, or released but admitted by no
node yet (Pending, unbound); they hold quota and no log, and would start a replica of a job
that has ended once a node had room (review of issue 20, round 15: kept under None).
Two failures end pods whatever the policy says (docs/architecture.md, "Clean-up"):
- a deadline ends every unfinished pod: otherwise it would not stop anything (T9k: "the system tries to
  terminate it", API reference, activeDeadlineSeconds).  A restart-limit failure
  does not: it is a failure like any other, and None keeps what still runs running, as T9k's
  manuals say ("在训练结束后, 可能有些副本仍处于运行状态 … None: 不删除副本");
- a ColossalAIJob failed by one of its workers ends the other unfinished workers: they hold
  GPUs for a `colossalai run` that can no longer finish.  The launcher is kept for its log,
  as cleanUpWorkers keeps it; its run ends when its ssh sessions to the workers close.
A pod the policy deletes anyway is deleted; one it keeps (None: "如果需要从副本中读取训练日志",
T9k user manuals) is *stopped* instead: the runtime sets spec.activeDeadlineSeconds, so the
kubelet kills its containers and the pod ends Failed (DeadlineExceeded), its object and log
kept (kubelet pkg/kubelet/active_deadline.go).  A pod no node has admitted yet (Pending,
unbound) has no log: it is deleted.  One a kubelet admitted is stopped like a running one,
even while Pending: its init containers (a data download, a checkpoint fetch) may have logged,
and a stopped pod is terminal, so it holds no quota either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..model import JobView, Ledger, PodState

_UNFINISHED = ("Pending", "Running", "Unknown")
STOP_DEADLINE = 1  # spec.activeDeadlineSeconds of a stopped pod: past already, and >= 1 as validation wants


@dataclass(frozen=True)
class CleanupDecision:
    """The ledger (clean-up decided), the pods to delete, and the pods to stop but keep."""

    ledger: Ledger
    delete: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()


DEADLINE = "DeadlineExceeded"  # the only way of failing that ends what the policy keeps


def _worker(job: JobView, name: str) -> bool:
    spec = job.pod(name)
    return spec is not None and spec.type == "worker"


def _selected(job: JobView, pod: PodState, policy: str) -> bool:
    """Whether the job's policy deletes this pod."""
    return {
        "All": True,
        "Unfinished": pod.phase in _UNFINISHED,
        "None": False,
        "Workers": _worker(job, pod.name),
    }[policy]


def must_end(job: JobView, pod: PodState, ledger: Ledger) -> bool:
    """Whether the way the job failed ends this unfinished pod, whatever the policy keeps."""
    if pod.phase not in _UNFINISHED or ledger.outcome != "Failed":
        return False
    if ledger.reason == DEADLINE:
        return True
    worker_failed = any(_worker(job, n) for n in ledger.failed)
    return job.scope == "none" and worker_failed and _worker(job, pod.name)


def decide_cleanup(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> CleanupDecision:
    """The finished job's pods that go (what the policy names, every pod that never ran) and
    those that stop but stay, for their logs."""
    delete: list[str] = []
    stop: list[str] = []
    for p in pods.values():
        if not p.ours or p.deleting:
            continue
        if p.gated or _selected(job, p, job.cleanup) or (p.phase == "Pending" and p.node is None):  # no node admitted it: no log, and it would run a finished job
            delete.append(p.name)
        elif must_end(job, p, ledger) and not p.stopped:
            stop.append(p.name)
    led = ledger if ledger.cleaned_up else ledger.evolve(cleaned_up=True)
    return CleanupDecision(led, tuple(sorted(delete)), tuple(sorted(stop)))
