"""Restarts: runtime.decisions.restart.decide_restart over scope x policy x limits.

- scope group (DeepSpeed): one failure replaces every pod as a new attempt; restartCount
  grows by one per replaced replica, backoffCount by one;
- scope pod (PyTorchTrainingJob, plain or torchrun; GenericJob): only the failed pod is
  replaced, by its own type's policy (T9k's manual restarts replicas); other types' pods,
  whatever their policy, are left alone;
- scope none (ColossalAI): nothing is restarted, the failure ends the job;
- limits: backoffLimit summed over the job, GenericJob's limit per replica;
- several failures in one cycle, or within INCIDENT_WINDOW of each other: one incident, one
  restart in backoffCount; the deciding pod vs another pod;
- back-off per pod (a group: per gang), escalating only with that pod's own failures in a
  row, started over after RESET_AFTER of running, lengthened by a deterministic jitter;
- disruptions are replaced at once and never counted (pod scope: the pod; group and none
  scopes: the whole gang as a new attempt);
- every failure is counted once, before anything acts: its pod leaves `released` in the same
  ledger write, so it is never seen again; a pod-scope replacement waits for `not_before`,
  a group restart's new attempt for `gang_not_before`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from flatjob.runtime.decisions.outcomes import Disruption, Failure, observe
from flatjob.runtime.decisions.restart import (
    BACKOFF_CAP,
    INCIDENT_SPLIT,
    INCIDENT_WINDOW,
    JITTER,
    JITTER_BLOCKS,
    RESET_AFTER,
    SETTLE,
    backoff,
    decide_restart,
    restart_completed,
)
from flatjob.runtime.model import JobView, Ledger, RestartRule

from .builders import NOW, acts, all_running, cycle, failure, job_view, pod, running_ledger, uid

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
    released: tuple[str, ...] = ALL
    failed: tuple[str, ...] = ()
    not_before: dict[str, float] = field(default_factory=dict)  # pod scope: when each replacement may start
    gang_not_before: float | None = None  # group scope: when the new attempt may start


def decide(job: JobView, fails: dict[str, int], **ledger: Any) -> Any:
    """All pods released and running except `fails` (name -> exit code); decide at NOW, once
    each failure has settled (a failure for good first waits SETTLE for a disruption:
    test_a_failure_for_good_settles_before_it_decides)."""
    pods = {**all_running(job), **{n: pod(n, "Failed", exit=c) for n, c in fails.items()}}
    led = running_ledger(job, **ledger)
    led = led.evolve(settling={**{n: NOW - SETTLE for n in fails}, **led.settling})
    failures = tuple(failure(n, c, rtype=job.pod(n).type) for n, c in sorted(fails.items()))  # type: ignore[union-attr]
    return decide_restart(job, pods, led, failures, NOW), led


def on_time(got: float | None, want: float | None) -> float | None:
    """`got` when it is `want` lengthened by at most the jitter (then `want`), else `got`."""
    if got is None or want is None:
        return got
    return want if want <= got <= want + JITTER * (want - NOW) + 1e-9 else got


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
        released=tuple(sorted(led.released)),
        failed=led.failed,
        not_before={k: on_time(v, want.not_before.get(k)) for k, v in led.not_before.items()},
        gang_not_before=on_time(led.gang_not_before, want.gang_not_before),
    )
    assert got == want


GROUP_ALL = {"restarted": DS, "backoff_count": 1, "attempt": 2, "released": (), "gang_not_before": NOW + 10,
             "restarts": {"worker": 3}}  # a group restart restarts every replica: restartCount sums them (T9k)


def restarts_alone(name: str, job_pods: tuple[str, ...] = ALL, count: int = 1, rtype: str | None = None, **kw: Any) -> Want:
    """Only `name` is replaced: its type's restartCount grows by one, the others keep running."""
    rtype = rtype or name.split("-")[1]
    return Want(restarted=(name,), backoff_count=count, restarts={rtype: 1},
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
    pytest.param(deepspeed(policy="OnFailure"), {"j-worker-1": 1}, {"backoff_count": 2, "restarts": {"worker": 6}, "levels": {"*": 2}},
                 Want(**{**GROUP_ALL, "backoff_count": 3, "restarts": {"worker": 9}, "gang_not_before": NOW + 40}),
                 id="group-backoffLimit-not-reached-third-in-a-row-waits-40s"),
    pytest.param(deepspeed(policy="OnFailure"), {"j-worker-1": 1}, {"backoff_count": 2, "restarts": {"worker": 6}},
                 Want(**{**GROUP_ALL, "backoff_count": 3, "restarts": {"worker": 9}}),
                 id="group-earlier-restarts-not-in-a-row-wait-10s"),
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
    pytest.param(generic({"worker": 2}), {"j-worker-0": 1}, {"restarts": {"worker": 1}, "replica_restarts": {"j-worker-0": 1}, "backoff_count": 1, "levels": {"j-worker-0": 1}},
                 Want(restarted=("j-worker-0",), backoff_count=2, restarts={"worker": 2}, replica_restarts={"j-worker-0": 2},
                      released=("j-worker-1",), not_before={"j-worker-0": NOW + 20}),
                 id="generic-replica-limit-not-reached-its-second-in-a-row-waits-20s"),
    pytest.param(generic({"worker": 2}), {"j-worker-0": 1}, {"restarts": {"worker": 2}, "replica_restarts": {"j-worker-0": 2}, "backoff_count": 2},
                 Want(backoff_count=2, restarts={"worker": 2}, replica_restarts={"j-worker-0": 2}, failed=("j-worker-0",), released=("j-worker-1",)),
                 id="generic-replica-limit-reached"),
    pytest.param(generic({"worker": 1}), {"j-worker-1": 1}, {"restarts": {"worker": 1}, "replica_restarts": {"j-worker-0": 1}, "backoff_count": 1},
                 Want(restarted=("j-worker-1",), backoff_count=2, restarts={"worker": 2}, replica_restarts={"j-worker-0": 1, "j-worker-1": 1},
                      released=("j-worker-0",), not_before={"j-worker-1": NOW + 10}),
                 id="generic-limit-1-second-replica-still-restarts-its-own-back-off"),
    pytest.param(generic({}), {"j-worker-0": 1}, {}, failed_alone("j-worker-0", ("j-worker-0", "j-worker-1")), id="generic-default-limit-0"),
    pytest.param(generic({"worker": 5}, policy="Never"), {"j-worker-0": 1}, {}, failed_alone("j-worker-0", ("j-worker-0", "j-worker-1")), id="generic-Never"),
    pytest.param(generic({"worker": 5}, types={"master": 1, "worker": 2}), {"j-master-0": 1}, {"restarts": {"worker": 4}, "backoff_count": 4},
                 Want(backoff_count=4, restarts={"worker": 4}, failed=("j-master-0",), released=("j-worker-0", "j-worker-1")),
                 id="generic-limits-are-per-type-master-exhausted"),
    pytest.param(generic({"worker": 5}, types={"master": 1, "worker": 2}), {"j-worker-1": 1},
                 {"restarts": {"worker": 4}, "replica_restarts": {"j-worker-0": 4}, "backoff_count": 4},
                 Want(restarted=("j-worker-1",), backoff_count=5, restarts={"worker": 5}, replica_restarts={"j-worker-0": 4, "j-worker-1": 1},
                      released=("j-master-0", "j-worker-0"), not_before={"j-worker-1": NOW + 10}),
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


def test_pod_several_failures_together_are_one_incident_one_restart() -> None:
    """Two ranks down in one cycle (a NCCL abort): each is replaced after its own first step,
    restartCount counts both, backoffCount (and backoffLimit) one."""
    decision, _ = decide(torchrun(policy="OnFailure"), {"j-worker-0": 1, "j-worker-1": 137})
    check(decision, Want(
        restarted=("j-worker-0", "j-worker-1"), backoff_count=1, restarts={"worker": 2},
        released=("j-master-0",), not_before={"j-worker-0": NOW + 10, "j-worker-1": NOW + 10},
    ))
    assert decision.ledger.incident == ("j-worker-0", "j-worker-1") and decision.ledger.incident_at == NOW


def test_pod_an_incident_that_reaches_the_limit_restarts_all_its_pods() -> None:
    """The incident is the one restart backoffLimit still allows: every pod in it comes back."""
    decision, _ = decide(torchrun(policy="OnFailure"), {"j-worker-0": 1, "j-worker-1": 1}, backoff_count=2)
    check(decision, Want(
        restarted=("j-worker-0", "j-worker-1"), backoff_count=3, restarts={"worker": 2},
        released=("j-master-0",), not_before={"j-worker-0": NOW + 10, "j-worker-1": NOW + 10},
    ))


def _fail_at(job: JobView, led: Ledger, name: str, now: float, started: float | None = None, ended: float | None = None) -> Any:
    pods = {**all_running(job), name: pod(name, "Failed", exit=1)}
    f = Failure(name, uid(name), job.pod(name).type, 1, "failed with exit code 1", 1, started, ended)  # type: ignore[union-attr]
    return decide_restart(job, pods, led, (f,), now)


@pytest.mark.parametrize(
    ("gap", "first_ended", "ended", "same_pod", "counted"),
    [(0.0, None, None, False, 1), (INCIDENT_WINDOW, None, None, False, 1), (INCIDENT_WINDOW + 1, None, None, False, 2), (5.0, None, None, True, 2),
     (INCIDENT_WINDOW + 40, None, 3.0, False, 1), (INCIDENT_WINDOW + 40, None, INCIDENT_WINDOW + 39, False, 2), (INCIDENT_WINDOW + 1, None, -40.0, False, 2),
     (0.0, -300.0, -10.0, False, 2), (0.0, -300.0, -300.0 + INCIDENT_WINDOW, False, 1), (INCIDENT_WINDOW + 40, -2.0, 3.0, False, 1),
     (0.0, -300.0, None, False, 1), (0.0, 0.0, 45.0, False, 1), (0.0, -300.0, -300.0 + INCIDENT_SPLIT + 1, False, 2)],
    ids=["together", "at-the-window-end", "after-the-window", "the-same-pod-again",
         "seen-late-but-ended-together", "seen-late-and-ended-late", "ended-long-before-the-first",
         "seen-together-after-an-outage-but-ended-minutes-apart", "seen-together-and-ended-within-the-window",
         "both-ends-known-seen-late-ended-together", "seen-together-its-end-unknown",
         "seen-together-a-node-clock-45-s-ahead", "seen-together-ended-just-over-the-split"],
)
def test_an_incident_is_other_pods_failing_within_its_window(gap: float, first_ended: float | None, ended: float | None, same_pod: bool, counted: int) -> None:
    """By when the second failure was seen (`gap` after the first) or ended (`ended`, after the
    first was seen): a runtime that restarted or waited between the two must not split one
    incident.  But where both containers' finishedAt are known (`first_ended`, `ended`) and lie
    more than INCIDENT_SPLIT apart, two incidents: a runtime that was down while ranks failed
    minutes apart.  A node clock 45 s ahead splits nothing."""
    job = torchrun(policy="OnFailure", backoff_limit=10)
    first = _fail_at(job, running_ledger(job), "j-worker-0", NOW, ended=None if first_ended is None else NOW + first_ended)
    again = first.ledger.evolve(released=(*first.ledger.released, "j-worker-0")) if same_pod else first.ledger
    second = _fail_at(job, again, "j-worker-0" if same_pod else "j-worker-1", NOW + gap, ended=None if ended is None else NOW + ended)
    assert second.ledger.backoff_count == counted
    assert first.ledger.incident_ended == (None if first_ended is None else NOW + first_ended)
    assert Ledger.from_dict(first.ledger.to_dict()) == first.ledger  # kept in status.runtime


def test_back_off_is_per_pod_and_a_long_run_starts_it_over() -> None:
    """The kubelet's rule: 10 s doubling to 5 min per container, reset after 10 min of running."""
    job = torchrun(policy="OnFailure", backoff_limit=100)
    led = running_ledger(job, levels={"j-worker-0": 5})  # worker-0 has crash-looped five times in a row
    crash = _fail_at(job, led, "j-worker-0", NOW, started=NOW - 3)
    assert on_time(crash.ledger.not_before["j-worker-0"], NOW + 300) == NOW + 300 and crash.ledger.levels["j-worker-0"] == 6
    other = _fail_at(job, led, "j-worker-1", NOW, started=NOW - 3)
    assert on_time(other.ledger.not_before["j-worker-1"], NOW + 10) == NOW + 10  # another pod's loop is not its own
    long_run = _fail_at(job, led, "j-worker-0", NOW, started=NOW - RESET_AFTER)
    assert on_time(long_run.ledger.not_before["j-worker-0"], NOW + 10) == NOW + 10 and long_run.ledger.levels["j-worker-0"] == 1


def test_jitter_is_deterministic_and_spreads_a_mass_failure_in_waves() -> None:
    job = generic({"worker": 3}, types={"worker": 200})
    pods = {n: pod(n, "Failed", exit=137) for n in all_running(job)}
    once = cycle(job, pods, running_ledger(job)).ledger
    assert once.not_before == cycle(job, pods, running_ledger(job)).ledger.not_before  # a pure function of its inputs
    waits = sorted(v - NOW for v in once.not_before.values())
    assert waits[0] >= 10.0 and waits[-1] <= 10.0 * (1 + JITTER) and len(set(waits)) == JITTER_BLOCKS
    assert len(once.to_dict()["notBefore"]) == JITTER_BLOCKS  # one brace range per wave


def test_group_a_fatal_failure_wins_over_a_retryable_one_when_it_comes_first() -> None:
    # master-0 (exit 1, permanent under ExitCode) sorts before worker-0 (137): the job fails.
    decision, _ = decide(job_view(policy="ExitCode"), {"j-master-0": 1, "j-worker-0": 137})
    assert decision.fatal is not None and decision.fatal.name == "j-master-0"
    assert decision.ledger.backoff_count == 0


# --- counting once --------------------------------------------------------------------------

@pytest.mark.parametrize("job", [deepspeed(policy="OnFailure"), torchrun(policy="OnFailure")], ids=["group", "pod"])
def test_observe_then_restart_twice_counts_once(job: JobView) -> None:
    """The counted pod leaves `released` in the same ledger, so the next look does not see it."""
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Failed", exit=1)}
    led = running_ledger(job)
    first = decide_restart(job, pods, led, observe(job, pods, led).failures, NOW)
    assert "j-worker-0" not in first.ledger.released
    assert observe(job, pods, first.ledger).failures == ()
    second = decide_restart(job, pods, first.ledger, observe(job, pods, first.ledger).failures, NOW + 1)
    assert second.ledger == first.ledger
    assert first.ledger.backoff_count == 1


@pytest.mark.parametrize("job", [deepspeed(policy="OnFailure"), torchrun(policy="OnFailure")], ids=["group", "pod"])
def test_a_runtime_restarted_from_the_written_ledger_does_not_count_again(job: JobView) -> None:
    """Crash safety: the failed pod is still there (its delete never happened); a cycle from the
    ledger written before the delete deletes it again and counts nothing."""
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Failed", exit=1)}
    first = cycle(job, pods, running_ledger(job))
    again = cycle(job, pods, first.ledger, now=NOW + 1)
    assert first.ledger.backoff_count == 1
    assert (again.ledger.backoff_count, again.ledger.restarts) == (first.ledger.backoff_count, first.ledger.restarts)
    assert ("delete", "j-worker-0") in acts(again)


def test_a_vanished_pod_is_a_disruption_replaced_at_once_and_not_counted() -> None:
    job = torchrun(policy="Never")
    pods = all_running(job)
    del pods["j-worker-0"]
    out = observe(job, pods, running_ledger(job))
    assert (out.failures, [d.name for d in out.disruptions]) == ((), ["j-worker-0"])
    decision = decide_restart(job, pods, running_ledger(job), out.failures, NOW, out.disruptions)
    assert decision.restarted == ("j-worker-0",) and decision.fatal is None
    assert (decision.ledger.released, decision.ledger.not_before) == (("j-master-0", "j-worker-1"), {})
    assert (decision.ledger.backoff_count, decision.ledger.restarts, decision.ledger.disruptions) == (0, {}, 1)


@pytest.mark.parametrize("job", [deepspeed(policy="Never"), job_view("ColossalAIJob")], ids=["group", "none"])
def test_a_disruption_of_a_gang_replaces_it_as_a_new_attempt_uncounted(job: JobView) -> None:
    """A launcher cannot take a new member, so the gang comes back whole; the peers that failed
    because their launcher or peer was taken are the disruption's doing, not failures."""
    first = job.pods[0].name
    pods = {**all_running(job), job.pods[1].name: pod(job.pods[1].name, "Failed", exit=255)}
    d = Disruption(first, uid(first), job.pods[0].type, "was disrupted (EvictionByEvictionAPI: Eviction API: evicting)")
    decision = decide_restart(job, pods, running_ledger(job), (failure(job.pods[1].name, 137, rtype=job.pods[1].type),), NOW, (d,))
    led = decision.ledger
    assert (led.attempt, led.released, led.backoff_count, led.restarts, led.disruptions, led.gang_not_before) == (2, (), 0, {}, 1, None)
    assert decision.fatal is None and decision.events[0][1] == "Disrupted"


def test_a_pod_restart_keeps_the_attempt() -> None:
    """Pod scope: the replacement belongs to the same attempt; only its release waits."""
    decision, _ = decide(torchrun(policy="OnFailure"), {"j-worker-0": 137})
    assert (decision.ledger.attempt, decision.ledger.gang_not_before) == (1, None)


def test_group_restart_counts_only_the_pods_that_ran() -> None:
    job = deepspeed(policy="OnFailure")
    pods = {**all_running(job), "j-worker-1": pod("j-worker-1", "Failed", exit=1), "j-worker-0": pod("j-worker-0")}
    led = running_ledger(job, released=("j-worker-1", "j-worker-2"))  # worker-0 (the launcher) was still gated
    decision = decide_restart(job, pods, led, (failure("j-worker-1", 1),), NOW)
    assert decision.restarted == ("j-worker-1", "j-worker-2")
    assert decision.ledger.restarts == {"worker": 2}  # the two that ran; the gated one never did
    assert (decision.ledger.attempt, decision.ledger.released) == (2, ())


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


@pytest.mark.parametrize(("restarts", "seconds"), [(0, 10), (1, 10), (2, 20), (3, 40), (4, 80), (5, 160), (6, 300), (20, 300), (1100, 300), (10**6, 300)])
def test_backoff_doubles_from_10s_capped_at_5min(restarts: int, seconds: float) -> None:
    assert backoff(restarts) == seconds
    assert backoff(restarts) <= BACKOFF_CAP


def test_2000_replicas_lost_at_once_are_one_incident_and_back_off_one_step() -> None:
    """GenericJob limits each replica, not the job: 2000 replicas lost at once all restart,
    as one incident, each after the first step (never the escalated 300 s)."""
    job = generic({"worker": 3}, types={"worker": 2000})
    pods = {n: pod(n, "Failed", exit=137) for n in all_running(job)}
    c = cycle(job, pods, running_ledger(job))
    assert c.ledger.outcome is None and c.ledger.backoff_count == 1 and c.ledger.restarts == {"worker": 2000}
    assert all(on_time(v, NOW + backoff(1)) == NOW + backoff(1) for v in c.ledger.not_before.values())
    assert len(c.ledger.to_dict()["incident"]) == 1  # one brace range, not 2000 names
    assert backoff(2000) == backoff(10**6) == BACKOFF_CAP


def test_no_failures_is_no_change() -> None:
    job = job_view()
    led = running_ledger(job)
    assert decide_restart(job, all_running(job), led, (), NOW).ledger is led


@pytest.mark.parametrize(("policy", "restarted"), [("Always", ("j-worker-0",)), ("OnFailure", ()), ("Never", ())])
def test_completed_pods_run_again_only_under_always(policy: str, restarted: tuple[str, ...]) -> None:
    job = torchrun(policy=policy)
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Succeeded")}
    led = running_ledger(job, succeeded=("j-worker-0",), released=("j-master-0", "j-worker-1"))
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
    led = running_ledger(job, succeeded=("j-worker-0",), released=("j-worker-1",))
    decision = restart_completed(job, pods, led, ("j-worker-0",), NOW)
    assert decision.restarted == ()
    assert decision.ledger.failed == ()
    assert decision.ledger.succeeded == ("j-worker-0",)


def test_plain_always_reruns_a_finished_worker_alone() -> None:
    """T9k restarts replicas: a worker that finished before the master re-runs on its own;
    the master keeps running and the job is not started over (row 1 of issue 15)."""
    job = plain({"master": "Always", "worker": "Always"})
    pods = {**all_running(job), "j-worker-0": pod("j-worker-0", "Succeeded")}
    led = running_ledger(job, succeeded=("j-worker-0",), released=("j-master-0", "j-worker-1"))
    decision = restart_completed(job, pods, led, ("j-worker-0",), NOW)
    assert decision.restarted == ("j-worker-0",)
    assert (decision.ledger.attempt, on_time(decision.ledger.not_before["j-worker-0"], NOW + 10)) == (1, NOW + 10)
    assert (decision.ledger.released, decision.ledger.succeeded) == (("j-master-0", "j-worker-1"), ())
    assert dict(decision.ledger.restarts) == {"worker": 1}
    assert acts(cycle(job, pods, decision.ledger)) == (("delete", "j-worker-0"),)  # the finished pod goes; its successor follows
