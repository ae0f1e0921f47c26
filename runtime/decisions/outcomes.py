"""Observe what the current attempt's pods did: successes, and failures not yet accounted for.

A failure is a released incarnation that ended non-zero, was evicted, or vanished without
finishing (deleted by someone else, node lost).  Pods the runtime itself deleted (restarts,
scale-downs, clean-up, pause) are never failures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..model import JobView, Ledger, PodState
from .exitcodes import LOST, effective_exit_code


@dataclass(frozen=True)
class Failure:
    """One failed incarnation: which pod, which UID, and the effective exit code."""

    name: str
    uid: str
    type: str
    code: int
    reason: str  # human words: "failed with exit code 1", "was deleted before it finished"
    exit_code: int | None = None  # the training container's own exit code, when it has one


@dataclass(frozen=True)
class Outcomes:
    """What changed since the last cycle."""

    succeeded: tuple[str, ...]  # pod names newly finished with exit 0
    failures: tuple[Failure, ...]  # incarnations newly failed, not yet counted


def observe(job: JobView, pods: Mapping[str, PodState], ledger: Ledger) -> Outcomes:
    """Compare released incarnations with what is observed now."""
    succeeded: list[str] = []
    failures: list[Failure] = []
    for name, uid in sorted(ledger.released.items()):
        spec = job.pod(name)
        if spec is None or uid in ledger.counted:
            continue
        pod = pods.get(name)
        if pod is None or pod.uid != uid:
            failures.append(Failure(name, uid, spec.type, LOST, "was deleted before it finished"))
        elif pod.phase == "Succeeded":
            succeeded.append(name)
        elif pod.phase == "Failed":
            code = effective_exit_code(pod, job.launcher_kind if _launches(job, spec.rank) else None)
            what = f"failed with exit code {code}" if pod.exit_code is not None else f"was lost ({pod.reason or 'evicted'})"
            if pod.exit_code is not None and code != pod.exit_code:
                what = f"failed with exit code {pod.exit_code} (effective {code})"
            failures.append(Failure(name, uid, spec.type, code, what, pod.exit_code))
    return Outcomes(tuple(succeeded), tuple(failures))


def _launches(job: JobView, rank: int) -> bool:
    """Whether the pod at this rank runs the job's launcher (every torchrun pod does)."""
    return job.launcher_kind == "torchrun" or rank == 0
