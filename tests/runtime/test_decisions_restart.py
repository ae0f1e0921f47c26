"""Restarts: runtime.decisions.restart.decide_restart over scope x policy x limits.

- scope group (plain DDP, DeepSpeed): one failure replaces every pod as a new attempt;
- scope pod (torchrun, GenericJob): only the failed pod is replaced;
- scope none (ColossalAI): nothing is restarted, the failure ends the job;
- limits: backoffLimit summed over the job, GenericJob's per-type limit;
- several failures in one cycle; the deciding pod vs another pod;
- every failure is counted once, by UID, before anything acts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from flatjob.runtime.decisions.outcomes import observe
from flatjob.runtime.decisions.restart import (
    BACKOFF_CAP,
    backoff,
    decide_restart,
    restart_completed,
)
from flatjob.runtime.model import JobView, Ledger, RestartRule

from .builders import NOW, all_running, failure, job_view, pod, running_ledger, uid

PT = {"master": 1, "worker": 2}
ALL = ("j-master-0", "j-worker-0", "j-worker-1")


def torchrun(**kw: Any) -> JobView:
    return job_view("PyTorchTrainingJob", scope="pod", launcher_kind="torchrun", **kw)


def generic(limits: dict[str, int], policy: str = "OnFailure", types: dict[str, int] | None = None) -> JobView:
    types = types or {"worker": 2}
    return job_view("GenericJob", types=types, rules={t: RestartRule(policy, limits.get(t, 0)) for t in types})


@dataclass(frozen=True)
class Want:
    """The expected decision, in the terms a reader checks."""

    restarted: tuple[str, ...] = ()
    fatal: str | None = None
    exhausted: bool = False
    backoff_count: int = 0
    attempt: int = 1
    restarts: dict[str, int] = field(default_factory=dict)
    draining: tuple[str, ...] = ()  # pod names whose current UID is being drained
    released: tuple[str, ...] = ALL
    failed: tuple[str, ...] = ()
    not_before: dict[str, float] = field(default_factory=dict)


def decide(job: JobView, fails: dict[str, int], **ledger: Any) -> Any:
    """All pods released and running except `fails` (name -> exit code); decide at NOW."""
    pods = {**all_running(job), **{n: pod(n, "Failed", exit=c) for n, c in fails.items()}}
    led = running_ledger(job, **ledger)
    failures = tuple(failure(n, c, rtype=job.pod(n).type) for n, c in sorted(fails.items()))  # type: ignore[union-attr]
    return decide_restart(job, pods, led, failures, NOW), led


def check(decision: Any, want: Want) -> None:
    led = decision.ledger
    got = Want(
        restarted=decision.restarted,
        fatal=decision.fatal.name if decision.fatal else None,
        exhausted=decision.exhausted,
        backoff_count=led.backoff_count,
        attempt=led.attempt,
        restarts={k: v for k, v in led.restarts.items() if v},
        draining=tuple(sorted(u.removeprefix("uid-") for u in led.draining)),
        released=tuple(sorted(led.released)),
        failed=led.failed,
        not_before=dict(led.not_before),
    )
    assert got == want


GROUP_ALL = {"restarted": ALL, "backoff_count": 1, "attempt": 2, "draining": ALL, "released": (), "not_before": dict.fromkeys(ALL, NOW + 10)}

CASES = [
    # --- scope group: PyTorchTrainingJob without torchrun ------------------------------------
    pytest.param(job_view(policy="OnFailure"), {"j-worker-0": 1}, {},
                 Want(**GROUP_ALL, restarts={"worker": 1}), id="group-OnFailure-worker-1-restarts-all"),
    pytest.param(job_view(policy="Always"), {"j-worker-0": 1}, {},
                 Want(**GROUP_ALL, restarts={"worker": 1}), id="group-Always-worker-1-restarts-all"),
    pytest.param(job_view(policy="ExitCode"), {"j-worker-0": 137}, {},
                 Want(**GROUP_ALL, restarts={"worker": 1}), id="group-ExitCode-worker-137-restarts-all"),
    pytest.param(job_view(policy="ExitCode"), {"j-master-0": 143}, {},
                 Want(**GROUP_ALL, restarts={"master": 1}), id="group-ExitCode-master-143-restarts-all"),
    pytest.param(job_view(policy="ExitCode"), {"j-worker-0": 1}, {},
                 Want(fatal="j-worker-0", failed=("j-worker-0",), released=("j-master-0", "j-worker-1")),
                 id="group-ExitCode-worker-1-fatal"),
    pytest.param(job_view(policy="Never"), {"j-worker-1": 137}, {},
                 Want(fatal="j-worker-1", failed=("j-worker-1",), released=("j-master-0", "j-worker-0")),
                 id="group-Never-any-pod-fatal"),
    pytest.param(job_view(policy="OnFailure"), {"j-worker-0": 1}, {"backoff_count": 2},
                 Want(**{**GROUP_ALL, "backoff_count": 3, "not_before": dict.fromkeys(ALL, NOW + 40)}, restarts={"worker": 1}),
                 id="group-backoffLimit-not-reached"),
    pytest.param(job_view(policy="OnFailure"), {"j-worker-0": 1}, {"backoff_count": 3},
                 Want(fatal="j-worker-0", exhausted=True, backoff_count=3, failed=("j-worker-0",), released=("j-master-0", "j-worker-1")),
                 id="group-backoffLimit-reached"),
    pytest.param(job_view(policy="OnFailure", backoff_limit=0), {"j-worker-0": 1}, {},
                 Want(fatal="j-worker-0", exhausted=True, failed=("j-worker-0",), released=("j-master-0", "j-worker-1")),
                 id="group-backoffLimit-0"),
    pytest.param(job_view("DeepSpeedJob", policy="OnFailure"), {"j-worker-2": 137}, {},
                 Want(restarted=("j-worker-0", "j-worker-1", "j-worker-2"), backoff_count=1, attempt=2, restarts={"worker": 1},
                      draining=("j-worker-0", "j-worker-1", "j-worker-2"), released=(),
                      not_before=dict.fromkeys(("j-worker-0", "j-worker-1", "j-worker-2"), NOW + 10)),
                 id="group-DeepSpeed-restarts-all"),
    # --- scope pod: torchrun -----------------------------------------------------------------
    pytest.param(torchrun(policy="OnFailure"), {"j-worker-0": 1}, {},
                 Want(restarted=("j-worker-0",), backoff_count=1, restarts={"worker": 1}, draining=("j-worker-0",),
                      released=("j-master-0", "j-worker-1"), not_before={"j-worker-0": NOW + 10}),
                 id="pod-OnFailure-worker-restarts-only-it"),
    pytest.param(torchrun(policy="OnFailure"), {"j-master-0": 1}, {},
                 Want(restarted=("j-master-0",), backoff_count=1, restarts={"master": 1}, draining=("j-master-0",),
                      released=("j-worker-0", "j-worker-1"), not_before={"j-master-0": NOW + 10}),
                 id="pod-OnFailure-master-restarts-only-it"),
    pytest.param(torchrun(policy="Never"), {"j-worker-0": 1}, {},
                 Want(failed=("j-worker-0",), released=("j-master-0", "j-worker-1")),
                 id="pod-Never-other-pod-not-fatal"),
    pytest.param(torchrun(policy="Never"), {"j-master-0": 1}, {},
                 Want(fatal="j-master-0", failed=("j-master-0",), released=("j-worker-0", "j-worker-1")),
                 id="pod-Never-deciding-pod-fatal"),
    pytest.param(torchrun(policy="ExitCode"), {"j-master-0": 1}, {},
                 Want(fatal="j-master-0", failed=("j-master-0",), released=("j-worker-0", "j-worker-1")),
                 id="pod-ExitCode-deciding-pod-1-fatal"),
    pytest.param(torchrun(policy="ExitCode"), {"j-worker-1": 138}, {},
                 Want(restarted=("j-worker-1",), backoff_count=1, restarts={"worker": 1}, draining=("j-worker-1",),
                      released=("j-master-0", "j-worker-0"), not_before={"j-worker-1": NOW + 10}),
                 id="pod-ExitCode-worker-138-restarts"),
    pytest.param(torchrun(policy="OnFailure"), {"j-worker-0": 1}, {"backoff_count": 3},
                 Want(exhausted=False, backoff_count=3, failed=("j-worker-0",), released=("j-master-0", "j-worker-1")),
                 id="pod-backoffLimit-reached-other-pod-not-fatal"),
    pytest.param(torchrun(policy="OnFailure"), {"j-master-0": 1}, {"backoff_count": 3},
                 Want(fatal="j-master-0", exhausted=True, backoff_count=3, failed=("j-master-0",), released=("j-worker-0", "j-worker-1")),
                 id="pod-backoffLimit-reached-deciding-pod-fatal"),
    # --- GenericJob: per-type limit, no backoffLimit, rules decide (never fatal here) ----------
    pytest.param(generic({"worker": 2}), {"j-worker-0": 1}, {"restarts": {"worker": 1}, "backoff_count": 1},
                 Want(restarted=("j-worker-0",), backoff_count=2, restarts={"worker": 2}, draining=("j-worker-0",),
                      released=("j-worker-1",), not_before={"j-worker-0": NOW + 20}),
                 id="generic-type-limit-not-reached"),
    pytest.param(generic({"worker": 2}), {"j-worker-0": 1}, {"restarts": {"worker": 2}, "backoff_count": 2},
                 Want(backoff_count=2, restarts={"worker": 2}, failed=("j-worker-0",), released=("j-worker-1",)),
                 id="generic-type-limit-reached"),
    pytest.param(generic({}), {"j-worker-0": 1}, {},
                 Want(failed=("j-worker-0",), released=("j-worker-1",)),
                 id="generic-default-limit-0"),
    pytest.param(generic({"worker": 5}, policy="Never"), {"j-worker-0": 1}, {},
                 Want(failed=("j-worker-0",), released=("j-worker-1",)),
                 id="generic-Never"),
    pytest.param(generic({"worker": 5}, types={"master": 1, "worker": 2}), {"j-master-0": 1}, {"restarts": {"worker": 4}, "backoff_count": 4},
                 Want(backoff_count=4, restarts={"worker": 4}, failed=("j-master-0",), released=("j-worker-0", "j-worker-1")),
                 id="generic-limits-are-per-type-master-exhausted"),
    pytest.param(generic({"worker": 5}, types={"master": 1, "worker": 2}), {"j-worker-1": 1}, {"restarts": {"worker": 4}, "backoff_count": 4},
                 Want(restarted=("j-worker-1",), backoff_count=5, restarts={"worker": 5}, draining=("j-worker-1",),
                      released=("j-master-0", "j-worker-0"), not_before={"j-worker-1": NOW + 160}),
                 id="generic-limits-are-per-type-worker-restarts"),
    # --- scope none: ColossalAI ----------------------------------------------------------------
    pytest.param(job_view("ColossalAIJob"), {"j-launcher": 137}, {},
                 Want(fatal="j-launcher", failed=("j-launcher",), released=("j-worker-0", "j-worker-1")),
                 id="none-launcher-fatal"),
    pytest.param(job_view("ColossalAIJob", policy="OnFailure"), {"j-worker-0": 137}, {},
                 Want(fatal="j-worker-0", failed=("j-worker-0",), released=("j-launcher", "j-worker-1")),
                 id="none-worker-fatal-whatever-the-policy"),
]


@pytest.mark.parametrize(("job", "fails", "ledger", "want"), CASES)
def test_one_failure(job: JobView, fails: dict[str, int], ledger: dict[str, Any], want: Want) -> None:
    decision, _ = decide(job, fails, **ledger)
    check(decision, _relative(want, job))


def _relative(want: Want, job: JobView) -> Want:
    """Default `released` (ALL) means every pod of this job."""
    if want.released is ALL:
        return Want(**{**want.__dict__, "released": tuple(sorted(p.name for p in job.pods))})
    return want


# --- several failures in one cycle ------------------------------------------------------------

def test_group_several_failures_are_one_restart() -> None:
    decision, _ = decide(job_view(policy="OnFailure"), {"j-worker-0": 1, "j-worker-1": 137})
    check(decision, Want(**GROUP_ALL, restarts={"worker": 1}))
    assert set(decision.ledger.counted) == {uid("j-worker-0"), uid("j-worker-1")}


def test_pod_several_failures_are_one_restart_each() -> None:
    decision, _ = decide(torchrun(policy="OnFailure"), {"j-worker-0": 1, "j-worker-1": 137})
    check(decision, Want(
        restarted=("j-worker-0", "j-worker-1"), backoff_count=2, restarts={"worker": 2},
        draining=("j-worker-0", "j-worker-1"), released=("j-master-0",),
        not_before={"j-worker-0": NOW + 10, "j-worker-1": NOW + 20},
    ))
    assert set(decision.ledger.counted) == {uid("j-worker-0"), uid("j-worker-1")}


def test_pod_several_failures_stop_at_the_limit() -> None:
    decision, _ = decide(torchrun(policy="OnFailure"), {"j-worker-0": 1, "j-worker-1": 1}, backoff_count=2)
    check(decision, Want(
        restarted=("j-worker-0",), backoff_count=3, restarts={"worker": 1}, draining=("j-worker-0",),
        released=("j-master-0",), failed=("j-worker-1",), not_before={"j-worker-0": NOW + 40},
    ))


def test_group_a_fatal_failure_wins_over_a_retryable_one_when_it_comes_first() -> None:
    # master-0 (exit 1, permanent under ExitCode) sorts before worker-0 (137): the job fails.
    decision, _ = decide(job_view(policy="ExitCode"), {"j-master-0": 1, "j-worker-0": 137})
    assert decision.fatal is not None and decision.fatal.name == "j-master-0"
    assert decision.ledger.backoff_count == 0


# --- counting once --------------------------------------------------------------------------

@pytest.mark.parametrize("job", [job_view(policy="OnFailure"), torchrun(policy="OnFailure")], ids=["group", "pod"])
def test_decide_restart_twice_with_the_same_failure_changes_nothing(job: JobView) -> None:
    first, _ = decide(job, {"j-worker-0": 1})
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Failed", exit=1)}
    again = decide_restart(job, pods, first.ledger, (failure("j-worker-0", 1),), NOW + 1)
    assert again.ledger == first.ledger


@pytest.mark.parametrize("job", [job_view(policy="OnFailure"), torchrun(policy="OnFailure")], ids=["group", "pod"])
def test_observe_then_restart_twice_counts_once(job: JobView) -> None:
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Failed", exit=1)}
    led = running_ledger(job)
    first = decide_restart(job, pods, led, observe(job, pods, led).failures, NOW)
    second = decide_restart(job, pods, first.ledger, observe(job, pods, first.ledger).failures, NOW + 1)
    assert second.ledger == first.ledger
    assert first.ledger.backoff_count == 1


def test_a_vanished_pod_is_counted_but_nothing_is_drained() -> None:
    job = torchrun(policy="OnFailure")
    pods = all_running(job)
    del pods["j-worker-0"]
    decision = decide_restart(job, pods, running_ledger(job), (failure("j-worker-0", 137),), NOW)
    assert decision.restarted == ("j-worker-0",)
    assert decision.ledger.draining == ()
    assert decision.ledger.counted == (uid("j-worker-0"),)


def test_a_new_gated_incarnation_is_not_drained() -> None:
    # Argo CD recreated the pod before the runtime saw the old one go: the new one is kept.
    job = torchrun(policy="OnFailure")
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", incarnation=2)}
    decision = decide_restart(job, pods, running_ledger(job), (failure("j-worker-0", 137),), NOW)
    assert uid("j-worker-0", 2) not in decision.ledger.draining


def test_group_restart_does_not_drain_gated_pods() -> None:
    job = job_view(policy="OnFailure")
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Failed", exit=1), "j-worker-1": pod("j-worker-1")}
    led = running_ledger(job, released={"j-master-0": uid("j-master-0"), "j-worker-0": uid("j-worker-0")})
    decision = decide_restart(job, pods, led, (failure("j-worker-0", 1),), NOW)
    assert set(decision.ledger.draining) == {uid("j-master-0"), uid("j-worker-0")}


# --- events, back-off, Always ------------------------------------------------------------------

def test_events_and_replica_failure_message() -> None:
    decision, _ = decide(job_view(policy="OnFailure"), {"j-worker-0": 1})
    assert decision.events == (("Warning", "Restarting", "j-worker-0 failed with exit code 1; restarting all 3 pods (restart 1)"),)
    assert decision.ledger.replica_failed == "j-worker-0 failed with exit code 1"
    decision, _ = decide(job_view(policy="OnFailure"), {"j-worker-0": 1}, backoff_count=3)
    assert decision.events == (("Warning", "ReplicaFailed", "j-worker-0 failed with exit code 1; not restarted (limit reached)"),)
    decision, _ = decide(job_view(policy="Never"), {"j-worker-0": 1})
    assert decision.events == (("Warning", "ReplicaFailed", "j-worker-0 failed with exit code 1; not restarted (restartPolicy Never)"),)


@pytest.mark.parametrize(("restarts", "seconds"), [(0, 10), (1, 10), (2, 20), (3, 40), (4, 80), (5, 160), (6, 300), (20, 300)])
def test_backoff_doubles_from_10s_capped_at_5min(restarts: int, seconds: float) -> None:
    assert backoff(restarts) == seconds
    assert backoff(restarts) <= BACKOFF_CAP


def test_no_failures_is_no_change() -> None:
    job = job_view()
    led = running_ledger(job)
    assert decide_restart(job, all_running(job), led, (), NOW).ledger is led


@pytest.mark.parametrize(("policy", "restarted"), [("Always", ("j-worker-0",)), ("OnFailure", ()), ("Never", ())])
def test_completed_pods_run_again_only_under_always(policy: str, restarted: tuple[str, ...]) -> None:
    job = torchrun(policy=policy)
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Succeeded")}
    led = running_ledger(job, succeeded=("j-worker-0",), released={"j-master-0": uid("j-master-0"), "j-worker-1": uid("j-worker-1")})
    decision = restart_completed(job, pods, led, ("j-worker-0",), NOW)
    assert decision.restarted == restarted
    assert decision.fatal is None
    assert ("j-worker-0" in decision.ledger.succeeded) is (not restarted)
    assert decision.ledger.backoff_count == len(restarted)


def test_unknown_replica_type_is_never_restarted() -> None:
    job = torchrun(rules={"master": RestartRule("OnFailure")})
    decision, _ = decide(job, {"j-worker-0": 1})
    assert decision.restarted == () and decision.ledger.failed == ("j-worker-0",)


def test_decisions_never_change_their_inputs() -> None:
    job = job_view(policy="OnFailure")
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Failed", exit=1)}
    led = running_ledger(job)
    before = (dict(pods), Ledger.from_dict(led.to_dict()))
    decide_restart(job, pods, led, (failure("j-worker-0", 1),), NOW)
    assert (dict(pods), Ledger.from_dict(led.to_dict())) == before


def test_a_completed_pod_that_cannot_run_again_stays_succeeded() -> None:
    job = generic({"worker": 0}, policy="Always")
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Succeeded")}
    led = running_ledger(job, succeeded=("j-worker-0",), released={"j-worker-1": uid("j-worker-1")})
    decision = restart_completed(job, pods, led, ("j-worker-0",), NOW)
    assert decision.restarted == ()
    assert decision.ledger.failed == ()
    assert decision.ledger.succeeded == ("j-worker-0",)
