"""Finishing: runtime.decisions.finish.decide_success and decide_failure.

- GenericJob: every rule form (one type, several types, several ranks, several rules, string
  ranks from the spec, no successRules = every replica), failure rules, success unreachable;
- the other kinds: the first pod decides (master / worker-0 / launcher);
- activeDeadlineSeconds at its boundary; BackoffLimitExceeded and failure messages: T9k's
  bare message, the restart limit in a note for the Event.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from flatjob.runtime.decisions.finish import FinishDecision, decide_failure, decide_success
from flatjob.runtime.job import job_view as record_job_view
from flatjob.runtime.model import JobView, Ledger, RestartRule

from .builders import NOW, compiled, failure, job_view

SUCCEEDED = FinishDecision("Succeeded", "Succeeded", "The job has finished successfully.")
NOTHING = FinishDecision()


def generic(types: dict[str, int], success: tuple[dict[str, tuple[int, ...]], ...] = (), fail: tuple[dict[str, tuple[int, ...]], ...] = ()) -> JobView:
    return job_view("GenericJob", types=types, success_rules=success, failure_rules=fail)


MW = {"master": 1, "worker": 3}

SUCCESS_CASES = [
    # (job, succeeded pods, outcome)
    pytest.param(generic(MW, ({"worker": (0,)},)), ("j-worker-0",), SUCCEEDED, id="single-type-single-rank-met"),
    pytest.param(generic(MW, ({"worker": (0,)},)), ("j-worker-1", "j-master-0"), NOTHING, id="single-type-other-pods-do-not-count"),
    pytest.param(generic(MW, ({"worker": (0, 2)},)), ("j-worker-0",), NOTHING, id="several-ranks-one-missing"),
    pytest.param(generic(MW, ({"worker": (0, 2)},)), ("j-worker-0", "j-worker-2"), SUCCEEDED, id="several-ranks-met"),
    pytest.param(generic(MW, ({"master": (0,), "worker": (1,)},)), ("j-worker-1",), NOTHING, id="several-types-one-missing"),
    pytest.param(generic(MW, ({"master": (0,), "worker": (1,)},)), ("j-worker-1", "j-master-0"), SUCCEEDED, id="several-types-met"),
    pytest.param(generic(MW, ({"master": (0,)}, {"worker": (0, 1)})), ("j-worker-0", "j-worker-1"), SUCCEEDED, id="any-one-rule-is-enough"),
    pytest.param(generic(MW, ({"master": (0,)}, {"worker": (0, 1)})), ("j-worker-0",), NOTHING, id="no-rule-complete"),
    pytest.param(generic(MW, ({},)), ("j-master-0",), NOTHING, id="an-empty-rule-is-never-met"),
    pytest.param(generic(MW, ({"worker": (7,)},)), ("j-worker-0",), NOTHING, id="rank-beyond-replicas-is-never-met"),
    pytest.param(generic(MW), ("j-master-0", "j-worker-0", "j-worker-1"), NOTHING, id="no-rules-needs-every-replica"),
    pytest.param(generic(MW), ("j-master-0", "j-worker-0", "j-worker-1", "j-worker-2"), SUCCEEDED, id="no-rules-all-succeeded"),
    # first pod decides
    pytest.param(job_view("PyTorchTrainingJob"), ("j-master-0",), SUCCEEDED, id="pytorch-master-decides"),
    pytest.param(job_view("PyTorchTrainingJob"), ("j-worker-0", "j-worker-1"), NOTHING, id="pytorch-workers-do-not"),
    pytest.param(job_view("PyTorchTrainingJob", types={"worker": 2}), ("j-worker-0",), SUCCEEDED, id="pytorch-worker-only-worker-0-decides"),
    pytest.param(job_view("DeepSpeedJob"), ("j-worker-0",), SUCCEEDED, id="deepspeed-worker-0-decides"),
    pytest.param(job_view("DeepSpeedJob"), ("j-worker-1", "j-worker-2"), NOTHING, id="deepspeed-other-workers-do-not"),
    pytest.param(job_view("ColossalAIJob"), ("j-launcher",), SUCCEEDED, id="colossalai-launcher-decides"),
    pytest.param(job_view("ColossalAIJob"), ("j-worker-0", "j-worker-1"), NOTHING, id="colossalai-workers-do-not"),
]


@pytest.mark.parametrize(("job", "succeeded", "expected"), SUCCESS_CASES)
def test_decide_success(job: JobView, succeeded: tuple[str, ...], expected: FinishDecision) -> None:
    assert decide_success(job, Ledger(succeeded=succeeded)) == expected


FAILURE_CASES = [
    # (job, failed pods, outcome): failure rules and unreachable success (GenericJob only)
    pytest.param(generic(MW, ({"master": (0,)},), ({"worker": (0,)},)), ("j-worker-0",),
                 FinishDecision("Failed", "Failed", 'The job is failed with rule: {"worker":["0"]}'), id="failure-rule-met"),
    pytest.param(generic(MW, ({"master": (0,)},), ({"worker": (0, 1)},)), ("j-worker-0",), NOTHING, id="failure-rule-partly-met"),
    pytest.param(generic(MW, ({"master": (0,)},), ({"master": (0,), "worker": (0, 1)},)), ("j-worker-0", "j-worker-1", "j-master-0"),
                 FinishDecision("Failed", "Failed", 'The job is failed with rule: {"master":["0"],"worker":["0","1"]}'), id="failure-rule-several-types"),
    # Go's json.Marshal sorts a map's keys: the message never follows the spec's order.
    pytest.param(generic(MW, ({"master": (0,)},), ({"worker": (1,), "master": (0,)},)), ("j-worker-1", "j-master-0"),
                 FinishDecision("Failed", "Failed", 'The job is failed with rule: {"master":["0"],"worker":["1"]}'), id="failure-rule-keys-sorted"),
    pytest.param(generic(MW, ({"worker": (0,)}, {"worker": (1,)})), ("j-worker-0",), NOTHING, id="success-still-reachable"),
    pytest.param(generic(MW, ({"worker": (0,)}, {"worker": (1,)})), ("j-worker-0", "j-worker-1"),
                 FinishDecision("Failed", "Failed", "GenericJob j has failed: no success rule can be met any more (j-worker-0, j-worker-1 failed)"),
                 id="success-unreachable"),
    pytest.param(generic(MW), ("j-worker-2",),
                 FinishDecision("Failed", "Failed", "GenericJob j has failed: no success rule can be met any more (j-worker-2 failed)"),
                 id="no-rules-any-failure-is-unreachable"),
    pytest.param(generic(MW, ({"worker": (0,)},)), ("j-worker-1", "j-master-0"), NOTHING, id="failures-outside-every-rule"),
    pytest.param(job_view("PyTorchTrainingJob", scope="pod"), ("j-worker-1",), NOTHING, id="first-decider-ignores-other-failures"),
]


@pytest.mark.parametrize(("job", "failed", "expected"), FAILURE_CASES)
def test_decide_failure_by_rules(job: JobView, failed: tuple[str, ...], expected: FinishDecision) -> None:
    assert decide_failure(job, Ledger(failed=failed), None, False, NOW) == expected


@pytest.mark.parametrize(
    ("job", "fatal", "exhausted", "expected"),
    [
        pytest.param(job_view("PyTorchTrainingJob"), failure("j-master-0", 1), False,
                     FinishDecision("Failed", "Failed", "PyTorchTrainingJob j has failed: j-master-0 failed with exit code 1"), id="fatal"),
        pytest.param(job_view("DeepSpeedJob"), failure("j-worker-0", 137), False,
                     FinishDecision("Failed", "Failed", "DeepSpeedJob j has failed: j-worker-0 failed with exit code 137"), id="fatal-deepspeed-t9k-message"),
        pytest.param(job_view("PyTorchTrainingJob"), failure("j-worker-1", 137), True,
                     FinishDecision("Failed", "BackoffLimitExceeded", "PyTorchTrainingJob j has failed: j-worker-1 failed with exit code 137", "restart limit 3 reached"),
                     id="backoff-limit"),
        pytest.param(job_view("PyTorchTrainingJob", backoff_limit=0), failure("j-master-0", 137), True,
                     FinishDecision("Failed", "BackoffLimitExceeded", "PyTorchTrainingJob j has failed: j-master-0 failed with exit code 137", "restart limit 0 reached"),
                     id="backoff-limit-0"),
        # The message keeps the pod's own exit code, bare; how the policy read it goes to the Event.
        pytest.param(job_view("DeepSpeedJob"), replace(failure("j-worker-0", 137, reason="failed with exit code 255 (effective 137)"), exit_code=255), False,
                     FinishDecision("Failed", "Failed", "DeepSpeedJob j has failed: j-worker-0 failed with exit code 255", "j-worker-0 failed with exit code 255 (effective 137)"),
                     id="effective-code-bare"),
        pytest.param(job_view("PyTorchTrainingJob"), replace(failure("j-master-0", 137, reason="was evicted by its node (disk; exit code 137)"), exit_code=137), True,
                     FinishDecision("Failed", "BackoffLimitExceeded", "PyTorchTrainingJob j has failed: j-master-0 failed with exit code 137",
                                    "j-master-0 was evicted by its node (disk; exit code 137); restart limit 3 reached"),
                     id="eviction-bare-limit-noted"),
        pytest.param(job_view("PyTorchTrainingJob"), replace(failure("j-master-0", 137, reason="was evicted by its node (disk; exit code 0)"), exit_code=0), False,
                     FinishDecision("Failed", "Failed", "PyTorchTrainingJob j has failed: j-master-0 was evicted by its node (disk; exit code 0)"),
                     id="failed-with-exit-0-says-how"),  # never "failed with exit code 0"
        pytest.param(job_view("PyTorchTrainingJob"), failure("j-master-0", 137, reason="was lost (no exit code)"), False,
                     FinishDecision("Failed", "Failed", "PyTorchTrainingJob j has failed: j-master-0 was lost (no exit code)"),
                     id="no-exit-code"),
        pytest.param(job_view("GenericJob", rules={"worker": RestartRule("OnFailure", 2)}), failure("j-worker-0", 1), True,
                     FinishDecision("Failed", "BackoffLimitExceeded", "GenericJob j has failed: j-worker-0 failed with exit code 1", "restart limit 2 reached"),
                     id="type-limit"),
    ],
)
def test_decide_failure_by_a_fatal_failure(job: JobView, fatal: Any, exhausted: bool, expected: FinishDecision) -> None:
    assert decide_failure(job, Ledger(), fatal, exhausted, NOW) == expected


START = NOW - 600
DEADLINE_MESSAGE = "PyTorchTrainingJob j has failed: it was active longer than activeDeadlineSeconds (60s)"


@pytest.mark.parametrize(
    ("start", "now", "expected"),
    [
        pytest.param(START, START + 59, NOTHING, id="one-second-before"),
        pytest.param(START, START + 59.999, NOTHING, id="just-before"),
        pytest.param(START, START + 60, FinishDecision("Failed", "DeadlineExceeded", DEADLINE_MESSAGE), id="exactly-at-deadline"),
        pytest.param(START, START + 6000, FinishDecision("Failed", "DeadlineExceeded", DEADLINE_MESSAGE), id="long-after"),
        pytest.param(None, START + 6000, NOTHING, id="never-started-no-clock"),
    ],
)
def test_deadline_from_the_first_release(start: float | None, now: float, expected: FinishDecision) -> None:
    job = job_view("PyTorchTrainingJob", deadline=60)
    assert decide_failure(job, Ledger(start_time=start), None, False, now) == expected


def test_no_deadline_never_expires() -> None:
    assert decide_failure(job_view(), Ledger(start_time=0.0), None, False, NOW) == NOTHING


def test_a_fatal_failure_is_reported_before_the_deadline() -> None:
    job = job_view("PyTorchTrainingJob", deadline=60)
    got = decide_failure(job, Ledger(start_time=START), failure("j-master-0", 1), False, START + 600)
    assert got.reason == "Failed"


def test_success_is_final_even_if_other_rules_failed() -> None:
    job = generic(MW, ({"worker": (0,)},), ({"worker": (1,)},))
    assert decide_success(job, Ledger(succeeded=("j-worker-0",), failed=("j-worker-1",))) == SUCCEEDED


GENERIC_STRING_RANKS = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: rules
spec:
  successRules:
    - {"worker": ["0", 1]}
  failureRules:
    - {"master": ["0"]}
  replicaSpecs:
    - type: master
      replicas: 1
      template: {spec: {containers: [{name: c, image: busybox, command: [sh, -c, "exit 0"]}]}}
    - type: worker
      replicas: 2
      template: {spec: {containers: [{name: c, image: busybox, command: [sh, -c, "exit 0"]}]}}
"""


def test_string_ranks_from_the_spec_become_integers() -> None:
    job = record_job_view(*compiled(GENERIC_STRING_RANKS))
    assert job.success_rules == ({"worker": (0, 1)},)
    assert job.failure_rules == ({"master": (0,)},)
    assert decide_success(job, Ledger(succeeded=("rules-worker-0", "rules-worker-1"))) == SUCCEEDED
    got = decide_failure(job, Ledger(failed=("rules-master-0",)), None, False, NOW)
    assert got == FinishDecision("Failed", "Failed", 'The job is failed with rule: {"master":["0"]}')


def test_a_failure_rule_counts_a_replica_only_once_it_will_not_restart() -> None:
    """UM: replicas "failed or out of restarts", UC: "failed": a replica that failed and is
    being restarted has not failed yet (docs/architecture.md §7)."""
    from flatjob.runtime.decisions.restart import SETTLE, decide_restart

    from .builders import all_running, pod, running_ledger

    job = job_view("GenericJob", types={"worker": 2}, failure_rules=({"worker": (0,)},), rules={"worker": RestartRule("OnFailure", 1)})
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Failed", exit=1)}
    first = decide_restart(job, pods, running_ledger(job), (failure("j-worker-0", 1),), NOW)
    assert first.restarted == ("j-worker-0",)
    assert decide_failure(job, first.ledger, first.fatal, first.exhausted, NOW).outcome is None
    again = {**pods, "j-worker-0": pod("j-worker-0", "Failed", exit=1, incarnation=2)}  # its replacement failed too
    led = first.ledger.evolve(released=(*first.ledger.released, "j-worker-0"))
    settling = decide_restart(job, again, led, (failure("j-worker-0", 1, incarnation=2),), NOW + 60)
    assert settling.ledger.failed == () and settling.wake_at == NOW + 60 + SETTLE  # a failure for good waits for a disruption first
    second = decide_restart(job, again, settling.ledger, (failure("j-worker-0", 1, incarnation=2),), NOW + 60 + SETTLE)
    assert second.ledger.failed == ("j-worker-0",)
    assert decide_failure(job, second.ledger, second.fatal, second.exhausted, NOW + 60).message == 'The job is failed with rule: {"worker":["0"]}'
