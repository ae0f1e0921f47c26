"""Releasing gated pods: runtime.decisions.release.decide_release.

- gang start waits for every pod, the SSH Secret and the PodGroup, and creates what is missing;
- pods whose spec-hash differs from the record's rendering are stale: never released, listed;
- back-off: nothing before not_before, and a wake-up time is returned;
- wave 1 (launchers) only after every wave-0 pod is released and Ready;
- elastic jobs release only the seats below the target;
- pods that succeeded or failed for good in this attempt are never released again;
- draining pods of the previous attempt block a group-scoped job entirely.
"""

from __future__ import annotations

from typing import Any

import pytest

from flatjob.runtime.decisions.release import Deps, decide_release
from flatjob.runtime.model import JobView, Ledger

from .builders import NOW, job_view, observed, pod, uid


def gated(job: JobView, *skip: str, **overrides: Any) -> dict[str, Any]:
    """Every pod of the job present and gated (as git created them), except `skip`."""
    return observed(*(overrides.get(p.name) or pod(p.name) for p in job.pods if p.name not in skip))


def release(job: JobView, pods: dict[str, Any], led: Ledger | None = None, deps: Deps | None = None, now: float = NOW) -> Any:
    return decide_release(job, pods, led or Ledger(), deps or Deps(), now)


# --- gang start ---------------------------------------------------------------------------

def test_gang_start_releases_every_pod_at_once() -> None:
    job = job_view("PyTorchTrainingJob")
    d = release(job, gated(job))
    assert d.release == ("j-master-0", "j-worker-0", "j-worker-1")
    assert d.ledger.released == {p.name: uid(p.name) for p in job.pods}
    assert d.ledger.spec_hashes == {p.name: p.spec_hash for p in job.pods}
    assert d.ledger.start_time == NOW
    assert d.wait is None and d.create == () and d.stale == ()
    assert d.events == (("Normal", "Released", "released 3 pod(s): j-master-0, j-worker-0, j-worker-1"),)


@pytest.mark.parametrize("missing", ["j-master-0", "j-worker-1"])
def test_gang_start_waits_for_every_pod_and_creates_the_missing(missing: str) -> None:
    job = job_view("PyTorchTrainingJob")
    d = release(job, gated(job, missing))
    assert d.release == () and d.ledger.released == {}
    assert d.create == (missing,)
    assert d.wait == "waiting for 1 of 3 pod(s) to exist before starting them together"
    assert d.ledger.start_time is None


@pytest.mark.parametrize(
    ("deps", "wait"),
    [
        pytest.param(Deps(secret_ready=False), "waiting for the SSH Secret j-ssh", id="secret"),
        pytest.param(Deps(podgroup_ready=False), "waiting for the PodGroup j", id="podgroup"),
    ],
)
def test_gang_start_waits_for_the_secret_and_the_podgroup(deps: Deps, wait: str) -> None:
    job = job_view("DeepSpeedJob", ssh_secret="j-ssh", podgroup=True)
    d = release(job, gated(job, "j-worker-2"), deps=deps)
    assert d.release == () and d.wait == wait
    assert d.create == ("j-worker-2",)  # creating missing pods does not wait


def test_a_deleting_pod_is_not_usable() -> None:
    job = job_view("PyTorchTrainingJob")
    d = release(job, gated(job, **{"j-worker-0": pod("j-worker-0", deleting=True)}))
    assert d.release == ()
    assert d.wait == "waiting for 1 of 3 pod(s) to exist before starting them together"


# --- stale pods ---------------------------------------------------------------------------

def test_stale_pods_are_listed_and_never_released() -> None:
    job = job_view("PyTorchTrainingJob")
    old = pod("j-worker-1", spec_hash="h-old")
    d = release(job, gated(job, **{"j-worker-1": old}))
    assert d.stale == ("j-worker-1",)
    assert d.release == ()
    assert "j-worker-1" not in d.ledger.released


def test_a_stale_replacement_is_not_released_after_the_gang_start() -> None:
    job = job_view("PyTorchTrainingJob", scope="pod")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running"), pod("j-worker-1", incarnation=2, spec_hash="h-old"))
    led = Ledger(released={"j-master-0": uid("j-master-0"), "j-worker-0": uid("j-worker-0")}, start_time=NOW - 50)
    d = release(job, pods, led)
    assert d.stale == ("j-worker-1",) and d.release == ()


def test_a_stale_pod_being_deleted_is_not_listed_again() -> None:
    job = job_view("PyTorchTrainingJob")
    d = release(job, gated(job, **{"j-worker-1": pod("j-worker-1", spec_hash="h-old", deleting=True)}))
    assert d.stale == ()


# --- back-off ------------------------------------------------------------------------------

def test_gang_restart_waits_for_the_back_off_and_says_when() -> None:
    job = job_view("PyTorchTrainingJob")
    led = Ledger(attempt=2, backoff_count=1, not_before={p.name: NOW + 10 for p in job.pods})
    d = release(job, gated(job), led)
    assert d.release == ()
    assert d.wait == "backing off before the restart"
    assert d.wake_at == NOW + 10


@pytest.mark.parametrize("now", [NOW + 10, NOW + 11], ids=["at-not-before", "after-not-before"])
def test_gang_restart_releases_once_the_back_off_passed(now: float) -> None:
    job = job_view("PyTorchTrainingJob")
    led = Ledger(attempt=2, backoff_count=1, not_before={p.name: NOW + 10 for p in job.pods}, start_time=NOW - 100)
    d = release(job, gated(job), led, now=now)
    assert d.release == ("j-master-0", "j-worker-0", "j-worker-1")
    assert d.ledger.start_time == NOW - 100  # the job's start does not move on a restart


def test_a_pod_restart_waits_for_its_back_off_while_others_run() -> None:
    job = job_view("PyTorchTrainingJob", scope="pod")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running"), pod("j-worker-1", incarnation=2))
    led = Ledger(released={"j-master-0": uid("j-master-0"), "j-worker-0": uid("j-worker-0")}, not_before={"j-worker-1": NOW + 20})
    d = release(job, pods, led)
    assert d.release == () and d.wake_at == NOW + 20
    d = release(job, pods, led, now=NOW + 20)
    assert d.release == ("j-worker-1",)
    assert d.ledger.released["j-worker-1"] == uid("j-worker-1", 2)


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


def test_colossalai_launcher_goes_last() -> None:
    job = job_view("ColossalAIJob")
    d = release(job, gated(job))
    assert d.release == ("j-worker-0", "j-worker-1")
    ready = observed(pod("j-launcher"), pod("j-worker-0", "Running"), pod("j-worker-1", "Running"))
    assert release(job, ready, d.ledger).release == ("j-launcher",)


# --- elastic ---------------------------------------------------------------------------------

def test_elastic_releases_only_seats_below_the_target() -> None:
    job = job_view("PyTorchTrainingJob", types={"node": 4}, scope="pod", elastic=True, target=2)
    d = release(job, gated(job))
    assert d.release == ("j-node-0", "j-node-1")
    assert d.create == ()


def test_elastic_growth_releases_the_next_seat() -> None:
    job = job_view("PyTorchTrainingJob", types={"node": 4}, scope="pod", elastic=True, target=3)
    pods = observed(pod("j-node-0", "Running"), pod("j-node-1", "Running"), pod("j-node-2"), pod("j-node-3"))
    led = Ledger(released={"j-node-0": uid("j-node-0"), "j-node-1": uid("j-node-1")}, start_time=NOW - 10)
    assert release(job, pods, led).release == ("j-node-2",)


def test_elastic_creates_only_wanted_seats() -> None:
    job = job_view("PyTorchTrainingJob", types={"node": 4}, scope="pod", elastic=True, target=2)
    d = release(job, gated(job, "j-node-1", "j-node-3"))
    assert d.create == ("j-node-1",)


# --- settled pods and draining ----------------------------------------------------------------

@pytest.mark.parametrize("settled", ["succeeded", "failed"])
def test_settled_pods_are_never_released_again(settled: str) -> None:
    job = job_view("GenericJob")
    pods = observed(pod("j-worker-0", incarnation=2), pod("j-worker-1", "Running"))  # worker-0 recreated by git
    led = Ledger(released={"j-worker-1": uid("j-worker-1")}, start_time=NOW - 10, **{settled: ("j-worker-0",)})
    d = release(job, pods, led)
    assert d.release == () and "j-worker-0" not in d.ledger.released
    d = release(job, {"j-worker-1": pods["j-worker-1"]}, led)
    assert d.create == ()  # and never recreated either


def test_draining_blocks_a_group_scoped_job() -> None:
    job = job_view("DeepSpeedJob", wave1=())
    pods = observed(pod("j-worker-0", "Running", deleting=True), pod("j-worker-1"), pod("j-worker-2"))
    led = Ledger(attempt=2, draining=(uid("j-worker-0"),))
    d = release(job, pods, led)
    assert d.release == ()
    assert d.wait == "waiting for 1 pod(s) of the previous attempt to terminate"


def test_draining_blocks_only_that_pod_in_a_pod_scoped_job() -> None:
    job = job_view("PyTorchTrainingJob", scope="pod")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running", deleting=True), pod("j-worker-1", incarnation=2))
    led = Ledger(released={"j-master-0": uid("j-master-0")}, draining=(uid("j-worker-0"),), start_time=NOW - 5)
    d = release(job, pods, led)
    assert d.release == ("j-worker-1",)


def test_counted_or_cleaned_incarnations_are_never_released() -> None:
    job = job_view("GenericJob", types={"worker": 1})
    for field in ("counted", "draining", "cleaned"):
        d = release(job, gated(job), Ledger(**{field: (uid("j-worker-0"),)}))
        assert d.release == (), field


def test_nothing_to_release_once_everything_runs() -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(*(pod(p.name, "Running") for p in job.pods))
    led = Ledger(released={p.name: uid(p.name) for p in job.pods}, start_time=NOW - 5)
    d = release(job, pods, led)
    assert d.ledger is led and d.release == () and d.wait is None and d.wake_at is None
