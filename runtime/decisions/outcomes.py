"""Observe what the current attempt's released pods did: successes, and new failures.

A failure is a released pod that ended non-zero, was evicted, or vanished without finishing
(deleted by someone else, node lost; or replaced by a pod that is not this attempt's, or not
the record's).  A failure is seen once: the cycle that counts it also takes the pod out of
`released`.  Pods the runtime itself deleted (restarts, scale-downs, clean-up, pause) were
taken out first, so they are never failures.
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
    """Compare the released pods with what is observed now."""
    succeeded: list[str] = []
    failures: list[Failure] = []
    for name in ledger.released:
        spec = job.pod(name)
        if spec is None:
            continue
        pod = pods.get(name)
        if pod is None or not pod.ours or pod.attempt != ledger.attempt:
            failures.append(Failure(name, pod.uid if pod is not None else "", spec.type, LOST, "was deleted before it finished"))
        elif pod.phase == "Succeeded":
            succeeded.append(name)
        elif pod.phase == "Failed":
            code = effective_exit_code(pod, job.launcher_kind if _launches(job, spec.rank) else None)
            what = f"failed with exit code {code}" if pod.exit_code is not None else f"was lost ({pod.reason or 'evicted'})"
            if pod.exit_code is not None and code != pod.exit_code:
                what = f"failed with exit code {pod.exit_code} (effective {code})"
            failures.append(Failure(name, pod.uid, spec.type, code, what, pod.exit_code))
    return Outcomes(tuple(succeeded), tuple(failures))


def _launches(job: JobView, rank: int) -> bool:
    """Whether the pod at this rank runs the job's launcher (every torchrun pod does)."""
    return job.launcher_kind == "torchrun" or rank == 0
