"""Decide whether the job has finished, and how (T9k's rules per kind).

- GenericJob: successRules / failureRules (a rule is met when all its replicas succeeded,
  or all failed for good); with no successRules every replica must succeed; the job also
  fails when no success rule can be met any more.
- PyTorchTrainingJob, DeepSpeedJob, ColossalAIJob: the first pod decides (the master,
  worker-0, the launcher).
- Any kind: activeDeadlineSeconds from the first release.
The message is T9k's (`<Kind> <job> has failed: <pod> failed with exit code N`, ucman
deepspeedjob.md); the record's T9k conditions carry it with reason `Failed`, as every T9k
example does.  The way it failed (BackoffLimitExceeded, DeadlineExceeded) is the ledger's
reason, which the Stalled condition and the failure's Event carry, the Event with a note after
the message: how the pod's end was read when that is more than its bare exit code ("exit code
255 (effective 137)", an eviction, an init container) and the limit ("restart limit 3
reached") (docs/t9k-compatibility.md, status.conditions).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..model import JobView, Ledger
from .outcomes import Failure


@dataclass(frozen=True)
class FinishDecision:
    """The job's outcome, once there is one."""

    outcome: str | None = None  # Succeeded | Failed
    reason: str | None = None  # Succeeded | Failed | BackoffLimitExceeded | DeadlineExceeded
    message: str | None = None  # T9k's message, as the record's conditions show it
    note: str = ""  # more detail for the Event only ("restart limit 3 reached")


SUCCEEDED = FinishDecision("Succeeded", "Succeeded", "The job has finished successfully.")  # T9k's message


def _names(job: JobView, rule: dict[str, tuple[int, ...]]) -> list[str]:
    out = []
    for rtype, ranks in rule.items():
        for rank in ranks:
            pod = job.by_rank.get((rtype, rank))
            out.append(pod.name if pod is not None else f"{job.name}-{rtype}-{rank}")
    return out


def _rule_text(rule: dict[str, tuple[int, ...]]) -> str:
    """The rule as T9k's controller prints it (UC genericjob.md's status example:
    `{"worker":["0"]}`, Go's json.Marshal of a map of string ranks: sorted keys, no spaces)."""
    return json.dumps({t: [str(r) for r in ranks] for t, ranks in rule.items()}, sort_keys=True, separators=(",", ":"))


def decide_success(job: JobView, ledger: Ledger) -> FinishDecision:
    """Succeeded, when the deciding pod or a success rule says so."""
    done = set(ledger.succeeded)
    if job.decider == "first":
        if job.pods and job.pods[0].name in done:
            return SUCCEEDED
        return FinishDecision()
    rules = job.success_rules or (job.every_replica,)
    for rule in rules:
        if rule and all(n in done for n in _names(job, dict(rule))):
            return SUCCEEDED
    return FinishDecision()


def bare(fatal: Failure) -> str:
    """What T9k's message says of the pod that failed: its container's own exit code, bare
    (`failed with exit code 255`); how the policy read it ("effective 137", an eviction, an
    init container) goes to the Event, so scripts parsing `exit code (\\d+)$` keep working."""
    return f"failed with exit code {fatal.exit_code}" if fatal.exit_code not in (None, 0) else fatal.reason


def decide_failure(job: JobView, ledger: Ledger, fatal: Failure | None, exhausted: bool, now: float) -> FinishDecision:
    """Failed, by a fatal replica failure, a failure rule, an unreachable success, or the deadline."""
    kind = job.kind
    if fatal is not None:
        said = bare(fatal)
        head = f"{kind} {job.name} has failed: {fatal.name} {said}"
        detail = f"{fatal.name} {fatal.reason}" if fatal.reason != said else ""
        if exhausted:
            limit = job.backoff_limit if job.backoff_limit is not None else job.rules[fatal.type].limit
            return FinishDecision("Failed", "BackoffLimitExceeded", head, "; ".join(filter(None, (detail, f"restart limit {limit} reached"))))
        return FinishDecision("Failed", "Failed", head, detail)
    if job.deadline is not None and ledger.start_time is not None and now - ledger.start_time >= job.deadline:
        return FinishDecision("Failed", "DeadlineExceeded", f"{kind} {job.name} has failed: it was active longer than activeDeadlineSeconds ({job.deadline}s)")
    if job.decider == "rule":
        dead = set(ledger.failed)
        for rule in job.failure_rules:
            if rule and all(n in dead for n in _names(job, dict(rule))):
                return FinishDecision("Failed", "Failed", f"The job is failed with rule: {_rule_text(dict(rule))}")
        rules = job.success_rules or (job.every_replica,)
        if dead and all(any(n in dead for n in _names(job, dict(r))) for r in rules if r):
            return FinishDecision("Failed", "Failed", f"{kind} {job.name} has failed: no success rule can be met any more ({', '.join(sorted(dead))} failed)")
    return FinishDecision()
