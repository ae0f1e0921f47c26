"""Elastic resizing: runtime.decisions.elastic.decide_scale and forget_stopped.

- torchrun (scope pod): shrinking stops the highest released seats; growing is left to the
  release step; stopped seats come back once their old incarnation is gone;
- group-scoped kinds (DeepSpeed): any change of size is a new attempt, never a restart;
- no change when the job is not elastic or already at its size.
"""

from __future__ import annotations

from typing import Any

import pytest

from flatjob.runtime.decisions.elastic import decide_scale, forget_stopped
from flatjob.runtime.model import JobView, Ledger

from .builders import NOW, job_view, observed, pod, uid

NODES = ("j-node-0", "j-node-1", "j-node-2", "j-node-3")


def torchrun(target: int) -> JobView:
    return job_view("PyTorchTrainingJob", types={"node": 4}, scope="pod", launcher_kind="torchrun", elastic=True, target=target)


def deepspeed(target: int) -> JobView:
    return job_view("DeepSpeedJob", types={"worker": 4}, elastic=True, target=target)


def running(*names: str) -> dict[str, Any]:
    return observed(*(pod(n, "Running") for n in names))


def released(*names: str) -> dict[str, str]:
    return {n: uid(n) for n in names}


def test_not_elastic_is_no_change() -> None:
    job = job_view("PyTorchTrainingJob")
    led = Ledger(released=released("j-master-0"))
    assert decide_scale(job, running("j-master-0"), led).ledger is led


@pytest.mark.parametrize(
    ("target", "stopped"),
    [
        pytest.param(4, (), id="at-max"),
        pytest.param(3, ("j-node-3",), id="shrink-by-one"),
        pytest.param(1, ("j-node-1", "j-node-2", "j-node-3"), id="shrink-to-one"),
    ],
)
def test_torchrun_shrink_stops_the_highest_seats(target: int, stopped: tuple[str, ...]) -> None:
    led = Ledger(released=released(*NODES), start_time=NOW)
    d = decide_scale(torchrun(target), running(*NODES), led)
    assert d.stopped == stopped
    assert d.ledger.stopped == released(*stopped)
    assert set(d.ledger.released) == set(NODES) - set(stopped)
    assert d.ledger.attempt == 1 and d.ledger.backoff_count == 0
    if stopped:
        assert d.events == (("Normal", "ScaledDown", f"stopped {', '.join(stopped)} (target {target})"),)


def test_torchrun_growth_is_left_to_the_release_step() -> None:
    led = Ledger(released=released("j-node-0", "j-node-1"), start_time=NOW)
    pods = {**running("j-node-0", "j-node-1"), **observed(pod("j-node-2"), pod("j-node-3"))}
    d = decide_scale(torchrun(4), pods, led)
    assert d.ledger is led and d.stopped == ()


@pytest.mark.parametrize(
    ("target", "pods_running"),
    [
        pytest.param(2, 3, id="shrink"),
        pytest.param(4, 3, id="grow"),
    ],
)
def test_group_scope_resizes_as_a_new_attempt_without_a_restart(target: int, pods_running: int) -> None:
    names = tuple(f"j-worker-{i}" for i in range(pods_running))
    led = Ledger(released=released(*names), start_time=NOW, backoff_count=1, restarts={"worker": 1}, size=pods_running)
    d = decide_scale(deepspeed(target), running(*names), led)
    assert d.ledger.attempt == 2
    assert set(d.ledger.draining) == {uid(n) for n in names}
    assert d.ledger.released == {}
    assert (d.ledger.backoff_count, d.ledger.restarts) == (1, {"worker": 1})
    assert d.events == (("Normal", "Rescaling", f"restarting the job at {target} node(s) (was {pods_running})"),)


def test_group_scope_at_its_size_is_no_change() -> None:
    names = ("j-worker-0", "j-worker-1", "j-worker-2")
    led = Ledger(released=released(*names), start_time=NOW, size=3)
    assert decide_scale(deepspeed(3), running(*names), led).ledger is led


def test_group_scope_gang_start_waiting_for_its_launcher_is_not_a_resize() -> None:
    # Wave 0 (worker-1, worker-2) released; worker-0 (the launcher) waits for their sshd.
    job = deepspeed(3)
    pods = {**running("j-worker-1", "j-worker-2"), **observed(pod("j-worker-0"), pod("j-worker-3"))}
    led = Ledger(released=released("j-worker-1", "j-worker-2"), start_time=NOW)
    d = decide_scale(job, pods, led)
    assert d.ledger == led


def test_succeeded_seats_are_not_missing() -> None:
    names = ("j-worker-0", "j-worker-1")
    led = Ledger(released=released("j-worker-0"), succeeded=("j-worker-1",), start_time=NOW)
    assert decide_scale(deepspeed(2), running(*names), led).ledger is led


# --- forget_stopped -----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("target", "present", "kept"),
    [
        pytest.param(2, True, True, id="still-beyond-target-kept"),
        pytest.param(4, True, True, id="back-in-target-old-incarnation-still-there"),
        pytest.param(4, False, False, id="back-in-target-old-incarnation-gone"),
        pytest.param(2, False, True, id="beyond-target-and-gone-kept"),
    ],
)
def test_forget_stopped(target: int, present: bool, kept: bool) -> None:
    led = Ledger(released=released("j-node-0", "j-node-1"), stopped=released("j-node-3"))
    pods = running("j-node-0", "j-node-1")
    if present:
        pods["j-node-3"] = pod("j-node-3", "Running", deleting=True)
    out = forget_stopped(torchrun(target), pods, led)
    assert ("j-node-3" in out.stopped) is kept


def test_a_new_incarnation_of_a_stopped_seat_does_not_keep_it_stopped() -> None:
    led = Ledger(stopped=released("j-node-3"))
    pods = observed(pod("j-node-3", incarnation=2))  # git recreated it, gated
    assert forget_stopped(torchrun(4), pods, led).stopped == {}
