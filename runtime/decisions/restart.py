"""Decide what failures restart, and account for them in the ledger before anything acts.

Scope (docs/architecture.md, "Restart scope"):
- pod:   replace only the failed pod, by its own replica type's policy (PyTorchTrainingJob,
         as T9k's manual restarts replicas; torchrun agents re-join; GenericJob replicas are
         independent);
- group: replace every pod of the attempt (DeepSpeed: worker-0's `deepspeed` cannot take a
         new member); one failure is one restart however many pods died;
- none:  never restart (ColossalAI: a restarted pod cannot re-join `colossalai run`).
Limits: each replica's own limit (GenericJob's restartPolicy.limit), else backoffLimit summed
over the job.  Counts: backoffCount counts restarts (a group restart is one); each type's
restartCount sums its replicas' restarts (a group restart adds one per replaced pod), as T9k's
status documents.  The replaced pods are drained (deleted and awaited) before their
successors are released, after an exponential, capped back-off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import JobView, Ledger, PodState, ran
from .exitcodes import retryable
from .outcomes import Failure

BACKOFF_BASE = 10.0  # seconds before the first restart is released
BACKOFF_CAP = 300.0  # like kubelet's CrashLoopBackOff: 10 s doubling to 5 min


@dataclass(frozen=True)
class RestartDecision:
    """The ledger after accounting for failures, and what happened, for events and status."""

    ledger: Ledger
    restarted: tuple[str, ...] = ()  # pod names being replaced
    fatal: Failure | None = None  # a failure that cannot be restarted and ends the job
    exhausted: bool = False  # the fatal failure hit the restart limit (BackoffLimitExceeded)
    events: tuple[tuple[str, str, str], ...] = field(default=())  # (type, reason, message)


def backoff(restarts: int) -> float:
    """Seconds to wait before releasing the replacement after the n-th restart."""
    return min(BACKOFF_BASE * 2 ** max(restarts - 1, 0), BACKOFF_CAP)



def _within_limits(job: JobView, ledger: Ledger, name: str, rtype: str) -> bool:
    """The replica's own limit ("the maximum restarts of this replica", T9k) and backoffLimit."""
    rule = job.rules.get(rtype)
    if rule is not None and rule.limit is not None and ledger.replica_restarts.get(name, 0) >= rule.limit:
        return False
    return job.backoff_limit is None or ledger.backoff_count < job.backoff_limit


def _counted(job: JobView, ledger: Ledger, names: list[str]) -> Ledger:
    """One more restart for each of these replicas: per type (status), per replica (limits).

    Per-replica counts are kept only where a replica has its own limit, so a group restart
    of thousands of pods does not grow the ledger by a line per pod.
    """
    restarts = dict(ledger.restarts)
    mine = dict(ledger.replica_restarts)
    for name in names:
        spec = job.pod(name)
        if spec is None:
            continue
        restarts[spec.type] = restarts.get(spec.type, 0) + 1
        rule = job.rules.get(spec.type)
        if rule is not None and rule.limit is not None:
            mine[name] = mine.get(name, 0) + 1
    return ledger.evolve(restarts=restarts, replica_restarts=mine)


def replica_failure_message(f: Failure) -> str:
    """T9k's ReplicaFailure message: `Pod[<pod>] exited with error code N` (ucman genericjob.md)."""
    if f.exit_code is not None:
        return f"Pod[{f.name}] exited with error code {f.exit_code}"
    return f"Pod[{f.name}] {f.reason}"


def _drain(pods: Mapping[str, PodState], names: list[str]) -> tuple[str, ...]:
    """UIDs of the observed incarnations of these pods (they must be gone before successors run)."""
    return tuple(pods[n].uid for n in names if n in pods)


def decide_restart(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, failures: tuple[Failure, ...], now: float) -> RestartDecision:
    """Count each failure once, restart what the policy allows, and name a fatal one."""
    failures = tuple(f for f in failures if f.uid not in ledger.counted)
    if not failures:
        return RestartDecision(ledger)
    counted = ledger.counted + tuple(f.uid for f in failures if f.uid not in ledger.counted)
    led = ledger.evolve(counted=counted, replica_failed=replica_failure_message(failures[0]))
    events: list[tuple[str, str, str]] = []
    restarted: list[str] = []
    for f in failures:
        if f.name in restarted:
            continue
        rule = job.rules.get(f.type)
        policy = rule.policy if rule is not None else "Never"
        wants = job.scope != "none" and retryable(policy, f.code)
        if not wants or not _within_limits(job, led, f.name, f.type):
            exhausted = wants  # the policy would restart it, but the limit is reached
            led = led.evolve(failed=(*led.failed, f.name), released={k: v for k, v in led.released.items() if k != f.name})
            events.append(("Warning", "ReplicaFailed", f"{f.name} {f.reason}; not restarted ({'limit reached' if exhausted else f'restartPolicy {policy}'})"))
            if _is_fatal(job, f):
                return RestartDecision(led, tuple(restarted), f, exhausted, tuple(events))
            continue
        count = led.backoff_count + 1
        delay = now + backoff(count)
        if job.scope == "group":
            names = sorted(set(led.released) | {f.name})
            led = _counted(job, led, names).evolve(
                attempt=led.attempt + 1,
                backoff_count=count,
                draining=led.draining + ran(pods, led),
                released={},
                succeeded=(),
                failed=(),
                spec_hashes={},
                not_before={p.name: delay for p in job.pods},
            )
            events.append(("Warning", "Restarting", f"{f.name} {f.reason}; restarting all {len(job.pods)} pods (restart {count})"))
            restarted.extend(names)
            break  # the whole group is being replaced: one restart, whatever else failed
        led = _counted(job, led, [f.name]).evolve(
            backoff_count=count,
            draining=led.draining + _drain(pods, [f.name] if f.name in pods and pods[f.name].uid == f.uid else []),
            released={k: v for k, v in led.released.items() if k != f.name},
            spec_hashes={k: v for k, v in led.spec_hashes.items() if k != f.name},
            not_before={**led.not_before, f.name: delay},
        )
        events.append(("Warning", "Restarting", f"{f.name} {f.reason}; restarting it (restart {count})"))
        restarted.append(f.name)
    return RestartDecision(led, tuple(restarted), None, False, tuple(events))


def restart_completed(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, names: tuple[str, ...], now: float) -> RestartDecision:
    """restartPolicy Always: a replica that succeeded runs again (the job has not finished)."""
    always = [
        n for n in names
        if (p := job.pod(n)) is not None and job.rules.get(p.type) and job.rules[p.type].policy == "Always" and _within_limits(job, ledger, n, p.type)
    ]
    if not always:  # a completed pod that may not run again simply stays succeeded
        return RestartDecision(ledger)
    completions = tuple(Failure(n, pods[n].uid, job.pod(n).type, 0, "completed", 0) for n in always if n in pods)  # type: ignore[union-attr]
    led = ledger.evolve(succeeded=tuple(n for n in ledger.succeeded if n not in always))
    decision = decide_restart(job, pods, led, completions, now)
    return RestartDecision(decision.ledger, decision.restarted, None, False, decision.events)


def _is_fatal(job: JobView, f: Failure) -> bool:
    """A failure that cannot be restarted ends the job when the group needs every member,
    or when the failed pod is the one whose outcome decides the job."""
    if job.scope in ("group", "none"):
        return True
    first = job.pods[0].name if job.pods else None
    return job.decider == "first" and f.name == first
