"""Restarts: runtime.decisions.restart.decide_restart over scope x policy x limits.

- scope group (DeepSpeed): one failure replaces every pod as a new attempt; restartCount
  grows by one per replaced replica, backoffCount by one;
- scope pod (PyTorchTrainingJob, plain or torchrun; GenericJob): only the failed pod is
  replaced, by its own type's policy (T9k's manual restarts replicas); other types' pods,
  whatever their policy, are left alone;
- scope none (ColossalAI): nothing is restarted, the failure ends the job;
- limits: backoffLimit summed over the job, GenericJob's limit per replica;
- several failures in one cycle; the deciding pod vs another pod;
- every failure is counted once, by UID, before anything acts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from flatjob.runtime.decisions.outcomes import Failure, observe
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
DS = ("j-worker-0", "j-worker-1", "j-worker-2")


def torchrun(**kw: Any) -> JobView:
    return job_view("PyTorchTrainingJob", scope="pod", launcher_kind="torchrun", **kw)


def plain(policies: dict[str, str]) -> JobView:
    """A plain (non-torchrun) PyTorchTrainingJob whose types have their own policies."""
    return job_view("PyTorchTrainingJob", rules={t: RestartRule(p) for t, p in policies.items()})


def deepspeed(**kw: Any) -> JobView:
    return job_view("DeepSpeedJob", **kw)


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
    replica_restarts: dict[str, int] = field(default_factory=dict)
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
        replica_restarts=dict(led.replica_restarts),
        draining=tuple(sorted(u.removeprefix("uid-") for u in led.draining)),
        released=tuple(sorted(led.released)),
        failed=led.failed,
        not_before=dict(led.not_before),
    )
    assert got == want


GROUP_ALL = {"restarted": DS, "backoff_count": 1, "attempt": 2, "draining": DS, "released": (), "not_before": dict.fromkeys(DS, NOW + 10),
             "restarts": {"worker": 3}}  # a group restart restarts every replica: restartCount sums them (T9k)


def restarts_alone(name: str, job_pods: tuple[str, ...] = ALL, count: int = 1, rtype: str | None = None, **kw: Any) -> Want:
    """Only `name` is replaced: its type's restartCount grows by one, the others keep running."""
    rtype = rtype or name.split("-")[1]
    return Want(restarted=(name,), backoff_count=count, restarts={rtype: 1}, draining=(name,),
                released=tuple(n for n in job_pods if n != name), not_before={name: NOW + backoff(count)}, **kw)


def fatal(name: str, job_pods: tuple[str, ...] = ALL, **kw: Any) -> Want:
    return Want(fatal=name, failed=(name,), released=tuple(n for n in job_pods if n != name), **kw)


def failed_alone(name: str, job_pods: tuple[str, ...] = ALL, **kw: Any) -> Want:
    return Want(failed=(name,), released=tuple(n for n in job_pods if n != name), **kw)


CASES = [
    # --- scope group: DeepSpeedJob (worker-0's deepspeed cannot take a new member) -------------
    pytest.param(deepspeed(policy="OnFailure"), {"j-worker-2": 137}, {}, Want(**GROUP_ALL), id="group-OnFailure-restarts-all"),
    pytest.param(deepspeed(policy="Always"), {"j-worker-1": 1}, {}, Want(**GROUP_ALL), id="group-Always-restarts-all"),
    pytest.param(deepspeed(policy="ExitCode"), {"j-worker-1": 137}, {}, Want(**GROUP_ALL), id="group-ExitCode-137-restarts-all"),
    pytest.param(deepspeed(policy="ExitCode"), {"j-worker-0": 143}, {}, Want(**GROUP_ALL), id="group-ExitCode-launcher-143-restarts-all"),
    pytest.param(deepspeed(policy="ExitCode"), {"j-worker-1": 1}, {}, fatal("j-worker-1", DS), id="group-ExitCode-1-fatal"),
    pytest.param(deepspeed(policy="Never"), {"j-worker-2": 137}, {}, fatal("j-worker-2", DS), id="group-Never-any-pod-fatal"),
    pytest.param(deepspeed(policy="OnFailure"), {"j-worker-1": 1}, {"backoff_count": 2, "restarts": {"worker": 6}},
                 Want(**{**GROUP_ALL, "backoff_count": 3, "restarts": {"worker": 9}, "not_before": dict.fromkeys(DS, NOW + 40)}),
                 id="group-backoffLimit-not-reached"),
    pytest.param(deepspeed(policy="OnFailure"), {"j-worker-1": 1}, {"backoff_count": 3},
                 fatal("j-worker-1", DS, exhausted=True, backoff_count=3), id="group-backoffLimit-reached"),
    pytest.param(deepspeed(policy="OnFailure", backoff_limit=0), {"j-worker-1": 1}, {},
                 fatal("j-worker-1", DS, exhausted=True), id="group-backoffLimit-0"),
    # --- scope pod: plain PyTorchTrainingJob, each type by its own policy (T9k 重启机制) ---------
    pytest.param(plain({"master": "Never", "worker": "OnFailure"}), {"j-worker-0": 1}, {},
                 restarts_alone("j-worker-0"), id="plain-worker-OnFailure-restarts-alone-master-Never-untouched"),
    pytest.param(plain({"master": "Never", "worker": "OnFailure"}), {"j-master-0": 1}, {},
                 fatal("j-master-0"), id="plain-master-Never-fatal"),
    pytest.param(plain({"master": "OnFailure", "worker": "Never"}), {"j-worker-1": 137}, {},
                 failed_alone("j-worker-1"), id="plain-worker-Never-not-restarted-not-fatal"),
    pytest.param(plain({"master": "OnFailure", "worker": "Never"}), {"j-master-0": 137}, {},
                 restarts_alone("j-master-0"), id="plain-master-OnFailure-restarts-alone"),
    pytest.param(plain({"master": "ExitCode", "worker": "ExitCode"}), {"j-worker-0": 1}, {},
                 failed_alone("j-worker-0"), id="plain-ExitCode-worker-1-not-restarted"),
    pytest.param(plain({"master": "OnFailure", "worker": "OnFailure"}), {"j-worker-0": 1}, {"backoff_count": 3},
                 failed_alone("j-worker-0", backoff_count=3), id="plain-backoffLimit-reached-worker-not-fatal"),
    pytest.param(plain({"master": "OnFailure", "worker": "OnFailure"}), {"j-master-0": 1}, {"backoff_count": 3},
                 fatal("j-master-0", exhausted=True, backoff_count=3), id="plain-backoffLimit-reached-master-fatal"),
    # --- scope pod: torchrun -----------------------------------------------------------------
    pytest.param(torchrun(policy="OnFailure"), {"j-worker-0": 1}, {}, restarts_alone("j-worker-0"), id="pod-OnFailure-worker-restarts-only-it"),
    pytest.param(torchrun(policy="OnFailure"), {"j-master-0": 1}, {}, restarts_alone("j-master-0"), id="pod-OnFailure-master-restarts-only-it"),
    pytest.param(torchrun(policy="Never"), {"j-worker-0": 1}, {}, failed_alone("j-worker-0"), id="pod-Never-other-pod-not-fatal"),
    pytest.param(torchrun(policy="Never"), {"j-master-0": 1}, {}, fatal("j-master-0"), id="pod-Never-deciding-pod-fatal"),
    pytest.param(torchrun(policy="ExitCode"), {"j-master-0": 1}, {}, fatal("j-master-0"), id="pod-ExitCode-deciding-pod-1-fatal"),
    pytest.param(torchrun(policy="ExitCode"), {"j-worker-1": 138}, {}, restarts_alone("j-worker-1"), id="pod-ExitCode-worker-138-restarts"),
    pytest.param(torchrun(policy="OnFailure"), {"j-worker-0": 1}, {"backoff_count": 3},
                 failed_alone("j-worker-0", backoff_count=3), id="pod-backoffLimit-reached-other-pod-not-fatal"),
    pytest.param(torchrun(policy="OnFailure"), {"j-master-0": 1}, {"backoff_count": 3},
                 fatal("j-master-0", exhausted=True, backoff_count=3), id="pod-backoffLimit-reached-deciding-pod-fatal"),
    # --- GenericJob: the limit is per replica ("当前副本的最大重启次数"), no backoffLimit ------------
    pytest.param(generic({"worker": 2}), {"j-worker-0": 1}, {"restarts": {"worker": 1}, "replica_restarts": {"j-worker-0": 1}, "backoff_count": 1},
                 Want(restarted=("j-worker-0",), backoff_count=2, restarts={"worker": 2}, replica_restarts={"j-worker-0": 2}, draining=("j-worker-0",),
                      released=("j-worker-1",), not_before={"j-worker-0": NOW + 20}),
                 id="generic-replica-limit-not-reached"),
    pytest.param(generic({"worker": 2}), {"j-worker-0": 1}, {"restarts": {"worker": 2}, "replica_restarts": {"j-worker-0": 2}, "backoff_count": 2},
                 Want(backoff_count=2, restarts={"worker": 2}, replica_restarts={"j-worker-0": 2}, failed=("j-worker-0",), released=("j-worker-1",)),
                 id="generic-replica-limit-reached"),
    pytest.param(generic({"worker": 1}), {"j-worker-1": 1}, {"restarts": {"worker": 1}, "replica_restarts": {"j-worker-0": 1}, "backoff_count": 1},
                 Want(restarted=("j-worker-1",), backoff_count=2, restarts={"worker": 2}, replica_restarts={"j-worker-0": 1, "j-worker-1": 1},
                      draining=("j-worker-1",), released=("j-worker-0",), not_before={"j-worker-1": NOW + 20}),
                 id="generic-limit-1-second-replica-still-restarts"),
    pytest.param(generic({}), {"j-worker-0": 1}, {}, failed_alone("j-worker-0", ("j-worker-0", "j-worker-1")), id="generic-default-limit-0"),
    pytest.param(generic({"worker": 5}, policy="Never"), {"j-worker-0": 1}, {}, failed_alone("j-worker-0", ("j-worker-0", "j-worker-1")), id="generic-Never"),
    pytest.param(generic({"worker": 5}, types={"master": 1, "worker": 2}), {"j-master-0": 1}, {"restarts": {"worker": 4}, "backoff_count": 4},
                 Want(backoff_count=4, restarts={"worker": 4}, failed=("j-master-0",), released=("j-worker-0", "j-worker-1")),
                 id="generic-limits-are-per-type-master-exhausted"),
    pytest.param(generic({"worker": 5}, types={"master": 1, "worker": 2}), {"j-worker-1": 1},
                 {"restarts": {"worker": 4}, "replica_restarts": {"j-worker-0": 4}, "backoff_count": 4},
                 Want(restarted=("j-worker-1",), backoff_count=5, restarts={"worker": 5}, replica_restarts={"j-worker-0": 4, "j-worker-1": 1},
                      draining=("j-worker-1",), released=("j-master-0", "j-worker-0"), not_before={"j-worker-1": NOW + 160}),
                 id="generic-limits-are-per-replica-worker-restarts"),
    # --- scope none: ColossalAI ----------------------------------------------------------------
    pytest.param(job_view("ColossalAIJob"), {"j-launcher": 137}, {},
                 fatal("j-launcher", ("j-launcher", "j-worker-0", "j-worker-1")), id="none-launcher-fatal"),
    pytest.param(job_view("ColossalAIJob", policy="OnFailure"), {"j-worker-0": 137}, {},
                 fatal("j-worker-0", ("j-launcher", "j-worker-0", "j-worker-1")), id="none-worker-fatal-whatever-the-policy"),
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
    decision, _ = decide(deepspeed(policy="OnFailure"), {"j-worker-0": 1, "j-worker-1": 137})
    check(decision, Want(**GROUP_ALL))
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

@pytest.mark.parametrize("job", [deepspeed(policy="OnFailure"), torchrun(policy="OnFailure")], ids=["group", "pod"])
def test_decide_restart_twice_with_the_same_failure_changes_nothing(job: JobView) -> None:
    first, _ = decide(job, {"j-worker-0": 1})
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Failed", exit=1)}
    again = decide_restart(job, pods, first.ledger, (failure("j-worker-0", 1),), NOW + 1)
    assert again.ledger == first.ledger


@pytest.mark.parametrize("job", [deepspeed(policy="OnFailure"), torchrun(policy="OnFailure")], ids=["group", "pod"])
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
    job = deepspeed(policy="OnFailure")
    pods = {**all_running(job), "j-worker-1": pod("j-worker-1", "Failed", exit=1), "j-worker-2": pod("j-worker-2")}
    led = running_ledger(job, released={"j-worker-0": uid("j-worker-0"), "j-worker-1": uid("j-worker-1")})
    decision = decide_restart(job, pods, led, (failure("j-worker-1", 1),), NOW)
    assert set(decision.ledger.draining) == {uid("j-worker-0"), uid("j-worker-1")}
    assert decision.ledger.restarts == {"worker": 2}  # the two that ran; the gated one never did


# --- events, back-off, Always ------------------------------------------------------------------

def test_events_and_replica_failure_message() -> None:
    decision, _ = decide(deepspeed(policy="OnFailure"), {"j-worker-1": 1})
    assert decision.events == (("Warning", "Restarting", "j-worker-1 failed with exit code 1; restarting all 3 pods (restart 1)"),)
    decision, _ = decide(job_view(policy="OnFailure"), {"j-worker-0": 1})
    assert decision.events == (("Warning", "Restarting", "j-worker-0 failed with exit code 1; restarting it (restart 1)"),)
    decision, _ = decide(job_view(policy="OnFailure"), {"j-worker-0": 1}, backoff_count=3)
    assert decision.events == (("Warning", "ReplicaFailed", "j-worker-0 failed with exit code 1; not restarted (limit reached)"),)
    decision, _ = decide(job_view(policy="Never"), {"j-worker-0": 1})
    assert decision.events == (("Warning", "ReplicaFailed", "j-worker-0 failed with exit code 1; not restarted (restartPolicy Never)"),)


@pytest.mark.parametrize(
    ("exit_code", "reason", "message"),
    [
        (1, "failed with exit code 1", "Pod[j-worker-0] exited with error code 1"),
        (127, "failed with exit code 127", "Pod[j-worker-0] exited with error code 127"),
        (1, "failed with exit code 1 (effective 137)", "Pod[j-worker-0] exited with error code 1"),  # torchrun: the pod's own code
        (None, "was deleted before it finished", "Pod[j-worker-0] was deleted before it finished"),
        (None, "was lost (Evicted)", "Pod[j-worker-0] was lost (Evicted)"),
    ],
)
def test_replica_failure_message_is_t9ks(exit_code: int | None, reason: str, message: str) -> None:
    """ucman genericjob.md: ReplicaFailure says `Pod[<pod>] exited with error code N`."""
    job = job_view(policy="Never")
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Failed", exit=exit_code)}
    f = Failure("j-worker-0", uid("j-worker-0"), "worker", 137 if exit_code is None else exit_code, reason, exit_code)
    decision = decide_restart(job, pods, running_ledger(job), (f,), NOW)
    assert decision.ledger.replica_failed == message


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


def test_plain_always_reruns_a_finished_worker_alone() -> None:
    """T9k restarts replicas: a worker that finished before the master re-runs on its own;
    the master keeps running and the job is not started over (row 1 of issue 15)."""
    job = plain({"master": "Always", "worker": "Always"})
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Succeeded")}
    led = running_ledger(job, succeeded=("j-worker-0",), released={"j-master-0": uid("j-master-0"), "j-worker-1": uid("j-worker-1")})
    decision = restart_completed(job, pods, led, ("j-worker-0",), NOW)
    assert decision.restarted == ("j-worker-0",)
    assert decision.ledger.attempt == 1 and decision.ledger.draining == (uid("j-worker-0"),)
    assert dict(decision.ledger.released) == {"j-master-0": uid("j-master-0"), "j-worker-1": uid("j-worker-1")}
    assert dict(decision.ledger.restarts) == {"worker": 1}
