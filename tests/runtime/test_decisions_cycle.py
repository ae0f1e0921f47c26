"""One whole cycle: the actions runtime.decisions.reconcile re-derives from the ledger and the pods.

- deletes: every pod of a paused job; pods of another attempt (running or gated) and pods
  without the runtime's attempt annotation; a pod whose PodTemplate left git; a pod that ran
  but is no longer released (a counted failure, a scaled-down seat); after the outcome,
  pods of other attempts and every pod that never ran;
- never: a pod the record does not own (ours=False), whatever state the job is in, and a pod
  already being deleted;
- releases: only gated pods of this attempt that the record owns;
- creates: the runtime's annotations (attempt, restart count, resuming) are set at create;
- a refused create rolls the gang back; the status says why until the gang is released;
- the SSH Secret is created when it is missing and the runtime's to make.
"""

from __future__ import annotations

from typing import Any

import pytest

from flatjob.compiler import keys
from flatjob.runtime.decisions import Action, World, scale_backoff
from flatjob.runtime.decisions.restart import SETTLE
from flatjob.runtime.model import JobView, Ledger, PodState

from .builders import (
    NOW,
    acts,
    all_running,
    conditions,
    cycle,
    gated,
    job_view,
    observed,
    pod,
    running_ledger,
)

PT = job_view("PyTorchTrainingJob")
TORCHRUN = job_view("PyTorchTrainingJob", launcher_kind="torchrun")
GENERIC = job_view("GenericJob", types={"worker": 3})
DS = job_view("DeepSpeedJob", ssh_secret="j-ssh", wave1=())
ELASTIC = job_view("PyTorchTrainingJob", types={"node": 4}, launcher_kind="torchrun", elastic=True, target=2)
ALL = ("j-master-0", "j-worker-0", "j-worker-1")
QUOTA = "exceeded quota: gpu, requested: nvidia.com/gpu=8, used: nvidia.com/gpu=16, limited: nvidia.com/gpu=16"
DENIED = 'admission webhook "gpu-policy.example.com" denied the request: no GPUs for this team on weekends'


def each(job: JobView, phase: str = "Running", **kw: Any) -> dict[str, PodState]:
    """Every pod of the job in one phase, with the same pod() options."""
    return observed(*(pod(p.name, phase, **kw) for p in job.pods))


def deletes(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple(("delete", n) for n in names)


def creates(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple(("create", n) for n in names)


def releases(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple(("release", n) for n in names)


FINISHED = Ledger(outcome="Succeeded", reason="Succeeded", start_time=NOW - 100)

# id: (job, pods, ledger, world, actions)
CASES: dict[str, tuple[JobView, dict[str, PodState], Ledger, World, tuple[tuple[str, str], ...]]] = {
    # --- gang start and release ---------------------------------------------------------------
    "fresh-gang-creates-every-pod": (PT, {}, Ledger(), World(), creates(*ALL)),
    "complete-gang-released": (PT, gated(PT), Ledger(), World(), releases(*ALL)),
    "released-pods-running-nothing-to-do": (PT, all_running(PT), running_ledger(PT), World(), ()),
    # --- another attempt's pods: deleted, never released; the new gang waits until they are gone
    "other-attempt-running-deleted-gang-waits": (PT, each(PT), Ledger(attempt=2), World(), deletes(*ALL)),
    "other-attempt-gated-deleted-never-released": (PT, gated(PT, attempt=1), Ledger(attempt=2), World(), deletes(*ALL)),
    "other-attempt-one-left-blocks-the-gang": (
        PT, {**gated(PT, "j-worker-1", attempt=2), "j-worker-1": pod("j-worker-1", "Running", attempt=1)}, Ledger(attempt=2), World(), deletes("j-worker-1"),
    ),
    "other-attempt-already-deleting-nothing-more": (PT, each(PT, deleting=True), Ledger(attempt=2), World(), ()),
    "no-attempt-annotation-deleted": (PT, gated(PT, attempt=None), Ledger(), World(), deletes(*ALL)),
    # --- pods the record does not own are never touched --------------------------------------
    "not-ours-gated-this-attempt-never-released": (PT, observed(*(pod(n, ours=False) for n in ALL)), Ledger(), World(), ()),
    "not-ours-other-attempt-never-deleted": (PT, each(PT, attempt=7, ours=False), Ledger(), World(), ()),
    "not-ours-released-name-never-released": (PT, observed(*(pod(n, ours=False) for n in ALL)), Ledger(released=ALL, start_time=NOW), World(), ()),
    "not-ours-while-paused": (job_view(run_mode="pause"), each(PT, ours=False), Ledger(paused=True), World(), ()),
    "not-ours-after-the-outcome": (job_view(cleanup="All"), each(PT, "Succeeded", ours=False), FINISHED, World(), ()),
    "not-ours-gang-refused": (PT, {**gated(PT, "j-worker-1"), "j-master-0": pod("j-master-0", ours=False)}, Ledger(), World(refused=("j-worker-1", QUOTA)),
                              deletes("j-worker-0")),
    "not-ours-template-left": (job_view(types={"master": 1, "worker": 1}), {**all_running(PT), "j-worker-1": pod("j-worker-1", "Running", ours=False)},
                               running_ledger(PT, released=ALL[:2]), World(), ()),
    # --- pause -------------------------------------------------------------------------------
    "paused-deletes-every-pod-of-ours": (job_view(run_mode="pause"), {**all_running(PT), "j-worker-1": pod("j-worker-1")}, running_ledger(PT), World(), deletes(*ALL)),
    "paused-a-pod-that-appears-is-deleted": (job_view(run_mode="pause"), observed(pod("j-worker-0", attempt=2)), Ledger(paused=True, attempt=2), World(), deletes("j-worker-0")),
    # --- restarts, replacements, seats, templates --------------------------------------------
    "pod-restart-deletes-the-failed-pod": (
        TORCHRUN, {**all_running(TORCHRUN), "j-worker-0": pod("j-worker-0", "Failed", exit=1)}, running_ledger(TORCHRUN), World(), deletes("j-worker-0"),
    ),
    "pod-restart-creates-after-the-back-off": (
        TORCHRUN, observed(pod("j-master-0", "Running"), pod("j-worker-1", "Running")),
        running_ledger(TORCHRUN, released=("j-master-0", "j-worker-1"), not_before={"j-worker-0": NOW}, backoff_count=1), World(), creates("j-worker-0"),
    ),
    "pod-restart-a-gated-replacement-is-kept-and-released": (
        TORCHRUN, {**all_running(TORCHRUN), "j-worker-0": pod("j-worker-0")},
        running_ledger(TORCHRUN, released=("j-master-0", "j-worker-1"), not_before={"j-worker-0": NOW}), World(), releases("j-worker-0"),
    ),
    "group-restart-deletes-the-old-attempt": (
        DS, {**all_running(DS), "j-worker-1": pod("j-worker-1", "Failed", exit=1)}, running_ledger(DS), World(), deletes("j-worker-0", "j-worker-1", "j-worker-2"),
    ),
    "template-left-git-gated-pod-deleted": (job_view(types={"master": 1, "worker": 1}), gated(PT), Ledger(), World(),
                                            deletes("j-worker-1") + releases("j-master-0", "j-worker-0")),
    "scaled-down-seat-deleted": (
        ELASTIC, observed(*(pod(f"j-node-{i}", "Running") for i in range(3))),
        Ledger(released=("j-node-0", "j-node-1", "j-node-2"), start_time=NOW - 10, size=3), World(), deletes("j-node-2"),
    ),
    "gated-seat-beyond-the-target-deleted": (ELASTIC, gated(ELASTIC), Ledger(), World(), deletes("j-node-2", "j-node-3") + releases("j-node-0", "j-node-1")),
    # --- after the outcome -------------------------------------------------------------------
    "finished-deletes-never-ran-and-other-attempts": (
        GENERIC, observed(pod("j-worker-0", "Succeeded"), pod("j-worker-1", "Running", attempt=0), pod("j-worker-2")),
        FINISHED.evolve(succeeded=("j-worker-0",)), World(), deletes("j-worker-1", "j-worker-2"),
    ),
    "finished-creates-and-releases-nothing": (PT, gated(PT, "j-worker-1"), FINISHED.evolve(released=("j-master-0",)), World(), deletes("j-master-0", "j-worker-0")),
    # --- what a gang waits for ----------------------------------------------------------------
    "ssh-secret-missing-is-created-first": (DS, {}, Ledger(), World(secret_exists=False), (("create-secret", "j-ssh"),)),
    "ssh-secret-replaced-gated-released-pods-wait-for-the-new-one": (  # chaos: killed between the Secret's create and its first release
        DS, gated(DS), running_ledger(DS, released=("j-worker-1", "j-worker-2")), World(secret_exists=False), (("create-secret", "j-ssh"),),
    ),
    "ssh-secret-refused-no-release-of-released-pods": (
        DS, gated(DS), running_ledger(DS, released=("j-worker-1", "j-worker-2")), World(secret_refused="someone else's"), (),
    ),
    # a namesake of another kind holds some of the job's pod names (namesakes.py): the job gives
    # way, deleting the gated pods of its unreleased gang, even with its PodTemplates out of step
    "name-taken-gives-way-deletes-its-unreleased-gang": (DS, gated(DS, "j-worker-2"), Ledger(), World(secret_refused="NameTaken", name_taken=True), deletes("j-worker-0", "j-worker-1")),
    "name-taken-gives-way-its-templates-taken-too": (
        job_view("DeepSpeedJob", problem="waiting for the job's PodTemplates to match the record (0 present, 3 expected)"), gated(DS, "j-worker-2"), Ledger(),
        World(secret_refused="NameTaken", name_taken=True), deletes("j-worker-0", "j-worker-1"),
    ),
    "name-taken-never-after-its-release": (DS, gated(DS), running_ledger(DS, released=("j-worker-1", "j-worker-2")), World(secret_refused="NameTaken", name_taken=True), ()),
    "a-foreign-secret-keeps-the-gang": (DS, gated(DS, "j-worker-2"), Ledger(), World(secret_refused="someone else's"), ()),
    "a-named-secret-is-waited-for": (DS, {}, Ledger(), World(secret_exists=False, secret_is_ours=False), ()),
    "podgroup-missing-nothing-created": (DS, {}, Ledger(), World(podgroup_exists=False), ()),
    "templates-out-of-step-nothing-created": (job_view(problem="waiting for the job's PodTemplates to match the record (2 present, 3 expected)"), {}, Ledger(), World(), ()),
    "templates-out-of-step-an-unreleased-pod-whose-template-went-goes": (  # no gang starts from it; its name may be a namesake's (namesakes.py)
        job_view("DeepSpeedJob", types={"worker": 1}, problem="waiting for the job's PodTemplates to match the record (1 present, 3 expected)"),
        gated(DS, "j-worker-2"), Ledger(), World(), deletes("j-worker-1"),
    ),
    "templates-out-of-step-unreleased-pods-with-their-templates-stay": (  # a resize before the gang started: reused once the view is whole
        job_view("DeepSpeedJob", problem="waiting for the job's PodTemplates to match the record (3 present, 4 expected)"), gated(DS, "j-worker-2"), Ledger(), World(), (),
    ),
    "templates-out-of-step-a-released-gangs-pods-stay": (
        job_view("DeepSpeedJob", problem="waiting for the job's PodTemplates to match the record (2 present, 3 expected)"), gated(DS), running_ledger(DS, released=("j-worker-1", "j-worker-2")), World(),
        (("release", "j-worker-1"), ("release", "j-worker-2")),  # recorded releases go out as before; nothing deleted
    ),
}


@pytest.mark.parametrize(("job", "pods", "led", "world", "expected"), list(CASES.values()), ids=list(CASES))
def test_actions(job: JobView, pods: dict[str, PodState], led: Ledger, world: World, expected: tuple[tuple[str, str], ...]) -> None:
    assert acts(cycle(job, pods, led, world)) == expected


def test_pods_not_ours_never_appear_in_any_action() -> None:
    """Whatever the job's state, no action names a pod the record does not own."""
    for case, (job, pods, led, world, _) in CASES.items():
        foreign = {n for n, p in pods.items() if not p.ours}
        touched = {name for kind, name in acts(cycle(job, pods, led, world)) if kind in ("delete", "release")}
        assert not foreign & touched, case


# --- what a create and a release carry ----------------------------------------------------------

@pytest.mark.parametrize(
    ("led", "notes"),
    [
        pytest.param(Ledger(), ("1", "0", "false"), id="first-attempt"),
        pytest.param(Ledger(attempt=3, backoff_count=2, gang_not_before=NOW), ("3", "2", "false"), id="after-two-restarts"),
        pytest.param(Ledger(attempt=4, backoff_count=1, resuming=True), ("4", "1", "true"), id="resuming"),
    ],
)
def test_creates_carry_the_runtimes_annotations(led: Ledger, notes: tuple[str, str, str]) -> None:
    """The runtime stamps each pod at create time: its attempt (what the ledger matches it by),
    the restart count and resuming (read by the pod through the downward API)."""
    c = cycle(PT, {}, led)
    want = dict(zip((keys.ATTEMPT, keys.RESTART_COUNT, keys.RESUMING), notes, strict=True))
    assert [(a.kind, a.name, dict(a.annotations)) for a in c.actions] == [("create", n, want) for n in ALL]


def test_a_release_names_the_pod_it_saw_and_adds_nothing() -> None:
    """A release removes the gate of exactly the observed pod (its UID) and sets no annotation."""
    pods = gated(PT)
    assert cycle(PT, pods).actions == tuple(Action("release", n, pods[n].uid) for n in ALL)


# --- a refused create: the gang is rolled back, retried after a back-off, and the record says why

def test_a_refused_gang_is_rolled_back_retried_and_reset_on_release() -> None:
    refused = f"the API server refused pod j-worker-1: {DENIED}"
    first = cycle(PT, gated(PT, "j-worker-1"), Ledger(), World(refused=("j-worker-1", DENIED)))
    assert acts(first) == deletes("j-master-0", "j-worker-0")
    assert (first.ledger.refused, first.ledger.refusals, first.ledger.gang_not_before, first.wake_at) == (refused, 1, NOW + 10, NOW + 10)
    assert conditions(first.status)["Ready"]["message"] == f"{refused}; retrying in 10 s"

    waiting = cycle(PT, {}, first.ledger, now=NOW + 5, previous=first.status)
    assert acts(waiting) == () and waiting.wait == refused
    assert conditions(waiting.status)["Initialized"]["message"] == refused

    again = cycle(PT, {}, first.ledger, now=NOW + 10)
    assert acts(again) == creates(*ALL)
    second = cycle(PT, gated(PT, "j-worker-1"), again.ledger, World(refused=("j-worker-1", DENIED)), now=NOW + 10)
    assert (second.ledger.refusals, second.ledger.gang_not_before) == (2, NOW + 30)

    started = cycle(PT, gated(PT), second.ledger, now=NOW + 30)
    assert acts(started) == releases(*ALL)
    assert (started.ledger.refused, started.ledger.refusals, started.ledger.gang_not_before) == (None, 0, None)
    assert started.ledger.to_dict().keys().isdisjoint({"refused", "refusals", "gangNotBefore"})


# --- run-local's back-off scale -------------------------------------------------------------------

@pytest.mark.parametrize(
    ("scale", "gang_not_before"),
    [(1.0, NOW + 10), (0.1, NOW + 1), (0.0, NOW)],
)
def test_scale_backoff_shortens_the_back_off_this_cycle_set(scale: float, gang_not_before: float) -> None:
    before = running_ledger(DS)
    c = cycle(DS, {**all_running(DS), "j-worker-1": pod("j-worker-1", "Failed", exit=1)}, before)
    scaled = scale_backoff(c, before, NOW, scale)
    assert scaled.ledger.gang_not_before == gang_not_before
    assert scaled.status["runtime"] == scaled.ledger.to_dict()
    assert scale_backoff(scaled, scaled.ledger, NOW, scale).ledger == scaled.ledger  # older back-offs are left alone


# --- a failure that would end the job settles (restart.SETTLE) ----------------------------------


def test_a_settling_failure_of_an_attempt_that_ended_never_holds_success_back() -> None:
    """A worker fails for good and settles; an edit starts attempt 2 within SETTLE, whose master
    succeeds: the old entry must not wait for ever (it kept the job Running)."""
    from dataclasses import replace

    from flatjob.runtime.model import RestartRule

    job = job_view("PyTorchTrainingJob", rules={"master": RestartRule("OnFailure"), "worker": RestartRule("Never")})
    pods = {**all_running(job), "j-worker-1": pod("j-worker-1", "Failed", exit=1, started_at=NOW - 90)}
    first = cycle(job, pods, running_ledger(job), now=NOW)
    assert first.ledger.settling == {"j-worker-1": NOW} and first.wake_at == NOW + SETTLE
    edited = replace(job, pods=tuple(replace(p, spec_hash="new-" + p.name) for p in job.pods), generation=2)
    led = cycle(edited, pods, first.ledger, now=NOW + 5).ledger
    led = led.evolve(released=tuple(p.name for p in edited.pods), start_time=NOW)
    now_pods = {p.name: pod(p.name, "Running", attempt=led.attempt, spec_hash="new-" + p.name) for p in edited.pods}
    now_pods["j-master-0"] = pod("j-master-0", "Succeeded", attempt=led.attempt, spec_hash="new-j-master-0")
    done = cycle(edited, now_pods, led, now=NOW + 100)
    assert done.ledger.outcome == "Succeeded" and not done.ledger.settling


def test_a_gangs_failure_that_ends_the_job_is_not_hidden_by_a_later_restart() -> None:
    """DeepSpeed, ExitCode: worker-1 exits 1 (permanent) and settles; deepspeed on worker-0 then
    exits 255 (a kill, retryable). The group restart must not drop the permanent failure."""
    from flatjob.runtime.model import RestartRule

    job = job_view("DeepSpeedJob", rules={"worker": RestartRule("ExitCode")})
    pods = {**all_running(job), "j-worker-1": pod("j-worker-1", "Failed", exit=1, started_at=NOW - 90)}
    c = cycle(job, pods, running_ledger(job), now=NOW)
    pods["j-worker-0"] = pod("j-worker-0", "Failed", exit=255, started_at=NOW - 90)
    c = cycle(job, pods, c.ledger, now=NOW + 2)
    assert c.ledger.attempt == 1 and c.ledger.backoff_count == 0 and set(c.ledger.settling) == {"j-worker-0", "j-worker-1"}
    c = cycle(job, pods, c.ledger, now=NOW + SETTLE)
    assert (c.ledger.outcome, c.ledger.attempt) == ("Failed", 1) and "j-worker-1 failed with exit code 1" in (c.ledger.message or "")


@pytest.mark.parametrize(("types", "settles"), [({"master": 1}, False), ({"master": 1, "worker": 1}, True)], ids=["one-pod", "two-pods"])
def test_a_failure_for_good_settles_only_where_a_peer_could_explain_it(types: dict[str, int], settles: bool) -> None:
    """A job of one pod fails at once (T9k's timing): nothing but its own status, which shows its
    own disruption with the failure, can explain it.  With a peer it waits SETTLE for one."""
    from flatjob.runtime.model import RestartRule

    job = job_view("PyTorchTrainingJob", types=types, rules={t: RestartRule("Never") for t in types})
    pods = {**all_running(job), "j-master-0": pod("j-master-0", "Failed", exit=1, started_at=NOW - 90)}
    c = cycle(job, pods, running_ledger(job), now=NOW)
    assert (c.ledger.outcome, bool(c.ledger.settling)) == ((None, True) if settles else ("Failed", False))
    if settles:
        assert cycle(job, pods, c.ledger, now=NOW + SETTLE).ledger.outcome == "Failed"
