"""Creating and releasing pods: runtime.decisions.release.decide_release.

- gang start: the missing pods are created (only once the SSH Secret and the PodGroup exist),
  and released together once every one exists gated, for this attempt, from the current
  PodTemplate;
- gated pods of another attempt or from an older template are deleted, never released; a
  pod of the previous attempt blocks the new gang until it is gone;
- back-off: a group restart's gang waits for gang_not_before, a replacement for its own
  not_before (created only then); both say when to wake;
- a refused create rolls the gang back (its gated pods deleted) with a back-off that doubles
  per refusal and is reset by the release; once the gang runs it delays only that pod;
- wave 1 (launchers) only after every wave-0 pod is released and Ready;
- elastic jobs create and release only the seats below the target;
- pods that succeeded or failed for good in this attempt are never created or released again;
- PodTemplates out of step with the record (problem): nothing is created.
"""

from __future__ import annotations

from typing import Any

import pytest

from flatjob.runtime.decisions.release import QUOTA_CATCHUP, Deps, decide_release
from flatjob.runtime.decisions.restart import backoff
from flatjob.runtime.model import JobView, Ledger, PodState

from .builders import NOW, gated, job_view, observed, pod

PT = job_view("PyTorchTrainingJob")
ALL = ("j-master-0", "j-worker-0", "j-worker-1")
QUOTA = "exceeded quota: gpu, requested: nvidia.com/gpu=8, used: nvidia.com/gpu=16, limited: nvidia.com/gpu=16"
DENIED = 'admission webhook "gpu-policy.example.com" denied the request: no GPUs for this team on weekends'


def release(job: JobView, pods: dict[str, Any], led: Ledger | None = None, deps: Deps | None = None, now: float = NOW) -> Any:
    return decide_release(job, pods, led or Ledger(), deps or Deps(), now)


# --- gang start ---------------------------------------------------------------------------

def test_gang_start_releases_every_pod_at_once() -> None:
    d = release(PT, gated(PT))
    assert d.release == ALL
    assert d.ledger.released == ALL
    assert (d.ledger.start_time, d.ledger.size) == (NOW, None)
    assert d.wait is None and d.create == () and d.delete == ()
    assert d.events == (("Normal", "Released", "released 3 pod(s): j-master-0, j-worker-0, j-worker-1"),)


@pytest.mark.parametrize(
    ("missing", "wait"),
    [
        pytest.param(ALL, "waiting for 3 of 3 pod(s) to exist before starting them together", id="none-yet"),
        pytest.param(("j-master-0",), "waiting for 1 of 3 pod(s) to exist before starting them together", id="master"),
        pytest.param(("j-worker-1",), "waiting for 1 of 3 pod(s) to exist before starting them together", id="worker"),
    ],
)
def test_gang_start_creates_the_missing_and_waits_for_every_pod(missing: tuple[str, ...], wait: str) -> None:
    d = release(PT, gated(PT, *missing))
    assert d.release == () and d.ledger.released == ()
    assert d.create == missing
    assert d.wait == wait
    assert d.ledger.start_time is None


@pytest.mark.parametrize(
    ("deps", "wait"),
    [
        pytest.param(Deps(secret_ready=False), "waiting for the SSH Secret j-ssh", id="secret"),
        pytest.param(Deps(podgroup_ready=False), "waiting for the PodGroup j", id="podgroup"),
    ],
)
def test_gang_start_creates_nothing_before_the_secret_and_the_podgroup(deps: Deps, wait: str) -> None:
    """A gated pod holds quota from its creation: none is made before the gang can start."""
    job = job_view("DeepSpeedJob", ssh_secret="j-ssh", podgroup=True)
    d = release(job, gated(job, "j-worker-2"), deps=deps)
    assert (d.release, d.create, d.wait) == ((), (), wait)


# pod that stands in for j-worker-0: whether it may be released with the gang, and whether it is deleted
USABLE = [
    pytest.param(pod("j-worker-0"), True, False, id="current"),
    pytest.param(pod("j-worker-0", deleting=True), False, False, id="being-deleted"),
    pytest.param(pod("j-worker-0", spec_hash="h-old"), False, True, id="older-template"),
    pytest.param(pod("j-worker-0", attempt=None), False, True, id="no-attempt-annotation"),
    pytest.param(pod("j-worker-0", spec_hash="h-old", deleting=True), False, False, id="older-template-being-deleted"),
    pytest.param(pod("j-worker-0", ours=False), False, False, id="not-ours"),
    pytest.param(pod("j-worker-0", ours=False, spec_hash="h-old"), False, False, id="not-ours-older-template"),
    pytest.param(pod("j-worker-0", "Running", gated=False), False, False, id="ungated"),
]


@pytest.mark.parametrize(("stand_in", "usable", "deleted"), USABLE)
def test_only_current_gated_pods_of_ours_start_a_gang(stand_in: PodState, usable: bool, deleted: bool) -> None:
    d = release(PT, gated(PT, **{"j-worker-0": stand_in}))
    assert d.release == (ALL if usable else ())
    assert d.delete == (("j-worker-0",) if deleted else ())
    assert d.create == ()  # a pod of that name exists: it is never created twice
    if not usable:
        squatter = "pod j-worker-0 exists but was not created by this job's runtime (no ownerReference to the record): delete it to let the job start"
        assert d.wait in ("waiting for 1 of 3 pod(s) to exist before starting them together", "waiting for 1 pod(s) of the previous attempt to terminate", squatter)


def test_a_stale_replacement_is_deleted_not_released_after_the_gang_start() -> None:
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running"), pod("j-worker-1", spec_hash="h-old"))
    d = release(PT, pods, Ledger(released=ALL[:2], start_time=NOW - 50))
    assert (d.release, d.delete) == ((), ("j-worker-1",))


# --- the previous attempt ---------------------------------------------------------------------

@pytest.mark.parametrize(
    "old",
    [
        pytest.param(pod("j-worker-0", "Running", attempt=1), id="running"),
        pytest.param(pod("j-worker-0", "Running", attempt=1, deleting=True), id="terminating"),
        pytest.param(pod("j-worker-0", "Failed", exit=1, attempt=1), id="failed"),
        pytest.param(pod("j-worker-0", attempt=1), id="gated"),
    ],
)
def test_a_pod_of_the_previous_attempt_blocks_the_new_gang_until_gone(old: PodState) -> None:
    """BlockingRecreate (jobset#684): no pod of attempt 2 is created or released while a pod of
    attempt 1 exists; a gated one is deleted here, the others by the cycle (test_decisions_cycle)."""
    job = job_view("DeepSpeedJob", wave1=())
    led = Ledger(attempt=2, backoff_count=1)
    d = release(job, {"j-worker-0": old, "j-worker-1": pod("j-worker-1", attempt=2)}, led)
    assert (d.release, d.create) == ((), ())
    assert d.wait == "waiting for 1 pod(s) of the previous attempt to terminate"
    assert d.delete == (("j-worker-0",) if old.gated and not old.deleting else ())
    gone = release(job, {"j-worker-1": pod("j-worker-1", attempt=2)}, led)
    assert gone.create == ("j-worker-0", "j-worker-2")


def test_a_pod_of_another_owner_does_not_block_the_gang() -> None:
    job = job_view("DeepSpeedJob", wave1=())
    d = release(job, {"j-worker-0": pod("j-worker-0", "Running", attempt=1, ours=False)}, Ledger(attempt=2))
    assert d.create == ("j-worker-1", "j-worker-2")


def test_a_replacement_waits_only_for_its_own_predecessor() -> None:
    """Pod scope: the rest of the job runs; the new pod of a name is created once the old is gone."""
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Failed", exit=1, deleting=True), pod("j-worker-1"))
    d = release(PT, pods, Ledger(released=("j-master-0",), start_time=NOW - 5))
    assert (d.release, d.create) == (("j-worker-1",), ())
    d = release(PT, observed(pod("j-master-0", "Running"), pod("j-worker-1", "Running")), d.ledger)
    assert d.create == ("j-worker-0",)


# --- back-off ------------------------------------------------------------------------------

def test_gang_restart_waits_for_the_back_off_and_says_when() -> None:
    led = Ledger(attempt=2, backoff_count=1, gang_not_before=NOW + 10, start_time=NOW - 100)
    for pods in ({}, gated(PT, attempt=2)):
        d = release(PT, pods, led)
        assert (d.release, d.create) == ((), ())
        assert (d.wait, d.wake_at) == ("backing off before the restart", NOW + 10)


@pytest.mark.parametrize("now", [NOW + 10, NOW + 11], ids=["at-not-before", "after-not-before"])
def test_gang_restart_starts_once_the_back_off_passed(now: float) -> None:
    led = Ledger(attempt=2, backoff_count=1, gang_not_before=NOW + 10, start_time=NOW - 100)
    assert release(PT, {}, led, now=now).create == ALL
    d = release(PT, gated(PT, attempt=2), led, now=now)
    assert d.release == ALL
    assert d.ledger.start_time == NOW - 100  # the job's start does not move on a restart
    assert d.ledger.gang_not_before is None


def test_a_pod_restart_is_created_after_its_back_off_while_others_run() -> None:
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running"))
    led = Ledger(released=ALL[:2], not_before={"j-worker-1": NOW + 20}, start_time=NOW - 100)
    d = release(PT, pods, led)
    assert (d.release, d.create, d.wake_at) == ((), (), NOW + 20)
    d = release(PT, pods, led, now=NOW + 20)
    assert (d.release, d.create) == ((), ("j-worker-1",))
    d = release(PT, {**pods, "j-worker-1": pod("j-worker-1")}, led, now=NOW + 20)
    assert d.release == ("j-worker-1",)
    assert d.ledger.released == ALL and d.ledger.not_before == {}


# --- a refused create ----------------------------------------------------------------------------

def refused(name: str = "j-worker-1", message: str = DENIED) -> Deps:
    return Deps(refused=(name, message))


@pytest.mark.parametrize(("refusals", "delay"), [(0, 10), (1, 20), (2, 40), (5, 300), (9, 300)])
def test_a_refused_gang_is_rolled_back_and_retried_after_a_back_off(refusals: int, delay: float) -> None:
    """403 over quota or a webhook's refusal: the gang's gated pods are deleted (they would hold
    quota for a gang that cannot start), the record says why, and the gang is retried later."""
    pods = {**gated(PT, "j-worker-1"), "j-old": pod("j-old", "Running", deleting=True), "j-theirs": pod("j-theirs", ours=False)}
    d = release(PT, pods, Ledger(refusals=refusals), refused())
    text = f"the API server refused pod j-worker-1: {DENIED}"
    assert d.delete == ("j-master-0", "j-worker-0")
    assert (d.release, d.create) == ((), ())
    assert (d.ledger.refused, d.ledger.refusals, d.ledger.gang_not_before) == (text, refusals + 1, NOW + delay)
    assert (d.wait, d.wake_at) == (f"{text}; retrying in {delay:.0f} s", NOW + delay)
    assert d.events == (("Warning", "GangRefused", f"{text}; deleted the 2 pod(s) created for this attempt, retrying in {delay:.0f} s"),)
    assert backoff(refusals + 1) == delay


@pytest.mark.parametrize("gang", [True, False], ids=["gang", "replacement"])
def test_refusals_over_quota_are_tried_again_soon_and_quietly_twice(gang: bool) -> None:
    """Admission charges a new pod at once; the quota controller takes a charge off only once it
    has seen the pod end or go, so a pod made at once in its predecessor's place is often
    refused (review 23, round 15: a false Warning and 10 s each time): the first two refusals
    over quota are tried again after 3 s and 6 s, with no Warning; the third is said."""
    pods, led = (gated(PT, "j-worker-1"), Ledger()) if gang else (observed(pod("j-master-0", "Running")), Ledger(released=ALL[:1], start_time=NOW - 100))
    now = NOW
    for count in (1, 2):
        d = release(PT, pods, led, refused(message=QUOTA), now=now)
        assert d.events == () and d.wake_at == now + QUOTA_CATCHUP * count
        assert d.wait == f"the API server refused pod j-worker-1: {QUOTA}; retrying in {QUOTA_CATCHUP * count:.0f} s (the quota controller may not have released the pods that just went)"
        led, now = d.ledger, now + QUOTA_CATCHUP * count
    said = release(PT, pods, led, refused(message=QUOTA), now=now)
    assert [e[:2] for e in said.events] == [("Warning", "GangRefused" if gang else "PodRefused")]
    assert said.wake_at == now + backoff(3)


def test_a_refused_gang_waits_saying_why_then_starts_and_forgets_the_refusal() -> None:
    led = release(PT, gated(PT, "j-worker-1"), Ledger(), refused()).ledger
    waiting = release(PT, {}, led, now=NOW + 9)
    assert (waiting.create, waiting.wait, waiting.wake_at) == ((), led.refused, NOW + 10)
    assert release(PT, {}, led, now=NOW + 10).create == ALL
    started = release(PT, gated(PT), led, now=NOW + 10)
    assert started.release == ALL
    assert (started.ledger.refused, started.ledger.refusals, started.ledger.gang_not_before) == (None, 0, None)


def test_a_refused_replacement_delays_only_that_pod() -> None:
    """Once the gang runs, a refused replacement (or elastic seat) waits alone; nothing running is deleted."""
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running"))
    led = Ledger(released=ALL[:2], start_time=NOW - 100, refusals=1)
    d = release(PT, pods, led, refused())
    assert (d.delete, d.release, d.create) == ((), (), ())
    assert (d.ledger.not_before, d.ledger.refusals, d.ledger.gang_not_before) == ({"j-worker-1": NOW + 20}, 2, None)
    assert d.events == (("Warning", "PodRefused", f"the API server refused pod j-worker-1: {DENIED}; retrying in 20 s"),)
    later = release(PT, pods, d.ledger, now=NOW + 20)
    assert later.create == ("j-worker-1",)
    done = release(PT, {**pods, "j-worker-1": pod("j-worker-1")}, d.ledger, now=NOW + 20)
    assert (done.release, done.ledger.refused, done.ledger.refusals) == (("j-worker-1",), None, 0)


def test_releasing_another_pod_keeps_a_refused_pods_back_off_growing() -> None:
    """A refused pod still backing off keeps its count when another pod is released, so a pod
    refused again and again (an elastic seat over quota) backs off to 5 min, not 10 s each time."""
    pods = observed(pod("j-master-0", "Running"))
    led = Ledger(released=ALL[:1], start_time=NOW - 100)
    first = release(PT, pods, led, refused("j-worker-1")).ledger
    other = release(PT, {**pods, "j-worker-0": pod("j-worker-0")}, first, now=NOW + 1)
    assert other.release == ("j-worker-0",)
    assert (other.ledger.refusals, other.ledger.not_before) == (1, {"j-worker-1": NOW + 10})
    again = release(PT, pods, other.ledger, refused("j-worker-1"), now=NOW + 10)
    assert again.ledger.not_before["j-worker-1"] == NOW + 10 + 20


# --- PodTemplates out of step with the record ---------------------------------------------------

def test_a_problem_creates_releases_and_deletes_nothing() -> None:
    job = job_view(problem="waiting for the job's PodTemplates to match the record (2 present, 3 expected)")
    for pods in ({}, gated(PT), gated(PT, **{"j-worker-0": pod("j-worker-0", spec_hash="h-old")})):
        d = release(job, pods)
        assert (d.create, d.release, d.delete, d.wait) == ((), (), (), job.problem)
        assert d.ledger == Ledger()


# --- waves -----------------------------------------------------------------------------------

def test_launcher_waits_until_every_worker_is_released_and_ready() -> None:
    job = job_view("DeepSpeedJob")  # worker-0 is the launcher (wave 1)
    d = release(job, gated(job))
    assert d.release == ("j-worker-1", "j-worker-2")

    released = d.ledger
    starting = observed(pod("j-worker-0"), pod("j-worker-1", "Running", ready=False), pod("j-worker-2", "Running"))
    d = release(job, starting, released)
    assert d.release == ()
    assert d.wait == "waiting for the workers' sshd to be ready"

    ready = observed(pod("j-worker-0"), pod("j-worker-1", "Running"), pod("j-worker-2", "Running"))
    d = release(job, ready, released)
    assert d.release == ("j-worker-0",)
    assert d.ledger.released == ("j-worker-1", "j-worker-2", "j-worker-0")


def test_colossalai_launcher_goes_last() -> None:
    job = job_view("ColossalAIJob")
    d = release(job, gated(job))
    assert d.release == ("j-worker-0", "j-worker-1")
    ready = observed(pod("j-launcher"), pod("j-worker-0", "Running"), pod("j-worker-1", "Running"))
    assert release(job, ready, d.ledger).release == ("j-launcher",)


# --- elastic ---------------------------------------------------------------------------------

def nodes(target: int) -> JobView:
    return job_view("PyTorchTrainingJob", types={"node": 4}, launcher_kind="torchrun", elastic=True, target=target)


def test_elastic_creates_and_releases_only_seats_below_the_target() -> None:
    job = nodes(2)
    assert release(job, {}).create == ("j-node-0", "j-node-1")
    d = release(job, gated(job, "j-node-2", "j-node-3"))
    assert (d.release, d.create) == (("j-node-0", "j-node-1"), ())
    assert d.ledger.size == 2


def test_elastic_growth_creates_then_releases_the_next_seat() -> None:
    job = nodes(3)
    running = observed(pod("j-node-0", "Running"), pod("j-node-1", "Running"))
    led = Ledger(released=("j-node-0", "j-node-1"), start_time=NOW - 10, size=2)
    assert release(job, running, led).create == ("j-node-2",)
    d = release(job, {**running, "j-node-2": pod("j-node-2")}, led)
    assert d.release == ("j-node-2",)
    assert d.ledger.size == 2  # the attempt's size is the target it started with


# --- settled pods --------------------------------------------------------------------------------

@pytest.mark.parametrize("settled", ["succeeded", "failed"])
def test_settled_pods_are_never_created_or_released_again(settled: str) -> None:
    job = job_view("GenericJob")
    led = Ledger(released=("j-worker-1",), start_time=NOW - 10, **{settled: ("j-worker-0",)})
    running = {"j-worker-1": pod("j-worker-1", "Running")}
    d = release(job, running, led)
    assert (d.release, d.create) == ((), ())
    d = release(job, {**running, "j-worker-0": pod("j-worker-0")}, led)
    assert d.release == () and "j-worker-0" not in d.ledger.released


def test_nothing_to_release_once_everything_runs() -> None:
    pods = observed(*(pod(n, "Running") for n in ALL))
    led = Ledger(released=ALL, start_time=NOW - 5)
    d = release(PT, pods, led)
    assert d.ledger is led and (d.release, d.create, d.delete, d.wait, d.wake_at) == ((), (), (), None, None)


def test_a_pod_of_another_owner_holding_a_name_is_named_in_the_wait() -> None:
    job = job_view("DeepSpeedJob", wave1=())
    d = release(job, {"j-worker-0": pod("j-worker-0", attempt=2, ours=False)}, Ledger(attempt=2))
    assert d.wait is not None and d.wait.startswith("pod j-worker-0 exists but was not created by this job's runtime")
    assert d.release == ()
