"""Elastic resizing: runtime.decisions.elastic.decide_scale, and what the cycle then does.

- torchrun (scope pod): shrinking takes the highest seats out of `released` and the cycle
  deletes their pods; growing is left to the release step, which creates the next seats;
  a seat back within the target is created again once its old pod is gone;
- group-scoped kinds (DeepSpeed): any change of size is a new attempt, never a restart;
- no change when the job is not elastic or already at its size.
"""

from __future__ import annotations

from typing import Any

import pytest

from flatjob.runtime.decisions.elastic import decide_scale
from flatjob.runtime.model import JobView, Ledger

from .builders import NOW, acts, cycle, job_view, observed, pod

NODES = ("j-node-0", "j-node-1", "j-node-2", "j-node-3")


def torchrun(target: int) -> JobView:
    return job_view("PyTorchTrainingJob", types={"node": 4}, scope="pod", launcher_kind="torchrun", elastic=True, target=target)


def deepspeed(target: int) -> JobView:
    return job_view("DeepSpeedJob", types={"worker": 4}, elastic=True, target=target)


def running(*names: str, **kw: Any) -> dict[str, Any]:
    return observed(*(pod(n, "Running", **kw) for n in names))


def test_not_elastic_is_no_change() -> None:
    job = job_view("PyTorchTrainingJob")
    led = Ledger(released=("j-master-0",))
    assert decide_scale(job, running("j-master-0"), led, NOW).ledger is led


@pytest.mark.parametrize(
    ("target", "stopped"),
    [
        pytest.param(4, (), id="at-max"),
        pytest.param(3, ("j-node-3",), id="shrink-by-one"),
        pytest.param(1, ("j-node-1", "j-node-2", "j-node-3"), id="shrink-to-one"),
    ],
)
def test_torchrun_shrink_stops_the_highest_seats(target: int, stopped: tuple[str, ...]) -> None:
    led = Ledger(released=NODES, start_time=NOW, size=4)
    d = decide_scale(torchrun(target), running(*NODES), led, NOW)
    assert d.stopped == stopped
    assert d.ledger.released == tuple(n for n in NODES if n not in stopped)
    assert (d.ledger.attempt, d.ledger.backoff_count, d.ledger.size) == (1, 0, 4)
    if stopped:
        assert d.events == (("Normal", "ScaledDown", f"stopped {', '.join(stopped)} (target {target})"),)
    c = cycle(torchrun(target), running(*NODES), led)
    assert acts(c) == tuple(("delete", n) for n in stopped)
    assert c.ledger.backoff_count == 0 and c.ledger.failed == ()  # a stopped seat is no failure


def test_torchrun_growth_is_left_to_the_release_step() -> None:
    led = Ledger(released=("j-node-0", "j-node-1"), start_time=NOW, size=2)
    pods = running("j-node-0", "j-node-1")
    d = decide_scale(torchrun(4), pods, led, NOW)
    assert d.ledger is led and d.stopped == ()
    assert acts(cycle(torchrun(4), pods, led)) == (("create", "j-node-2"), ("create", "j-node-3"))


# the pod of seat j-node-3 after a shrink to 2, when the target goes back to 4: actions for it
BACK = [
    pytest.param(pod("j-node-3", "Running"), (("delete", "j-node-3"),), id="still-running-deleted-first"),
    pytest.param(pod("j-node-3", "Running", deleting=True), (), id="terminating-waited-for"),
    pytest.param(None, (("create", "j-node-3"),), id="gone-created-again"),
    pytest.param(pod("j-node-3"), (("release", "j-node-3"),), id="created-again-released"),
]


@pytest.mark.parametrize(("old", "actions"), BACK)
def test_a_seat_back_within_the_target_is_created_again_once_its_old_pod_is_gone(old: Any, actions: tuple[tuple[str, str], ...]) -> None:
    pods = {**running("j-node-0", "j-node-1", "j-node-2"), **({"j-node-3": old} if old else {})}
    led = Ledger(released=("j-node-0", "j-node-1", "j-node-2"), start_time=NOW - 50, size=4)
    assert acts(cycle(torchrun(4), pods, led)) == actions


@pytest.mark.parametrize(
    ("target", "pods_running"),
    [
        pytest.param(2, 3, id="shrink"),
        pytest.param(4, 3, id="grow"),
    ],
)
def test_group_scope_resizes_as_a_new_attempt_without_a_restart(target: int, pods_running: int) -> None:
    names = tuple(f"j-worker-{i}" for i in range(pods_running))
    led = Ledger(released=names, start_time=NOW, backoff_count=1, restarts={"worker": 1}, size=pods_running, gang_not_before=NOW - 5)
    d = decide_scale(deepspeed(target), running(*names), led, NOW)
    assert d.stopped == names
    assert (d.ledger.attempt, d.ledger.released, d.ledger.size, d.ledger.gang_not_before) == (2, (), None, None)
    assert (d.ledger.backoff_count, d.ledger.restarts) == (1, {"worker": 1})
    assert d.events == (("Normal", "Rescaling", f"restarting the job at {target} node(s) (was {pods_running})"),)
    c = cycle(deepspeed(target), running(*names), led)
    assert acts(c) == tuple(("delete", n) for n in names)  # the old attempt goes before the new gang


def test_group_scope_at_its_size_is_no_change() -> None:
    names = ("j-worker-0", "j-worker-1", "j-worker-2")
    led = Ledger(released=names, start_time=NOW, size=3)
    assert decide_scale(deepspeed(3), running(*names), led, NOW).ledger is led


def test_group_scope_gang_start_waiting_for_its_launcher_is_not_a_resize() -> None:
    # Wave 0 (worker-1, worker-2) released; worker-0 (the launcher) waits for their sshd.
    job = deepspeed(3)
    pods = {**running("j-worker-1", "j-worker-2"), **observed(pod("j-worker-0"))}
    led = Ledger(released=("j-worker-1", "j-worker-2"), start_time=NOW, size=3)
    assert decide_scale(job, pods, led, NOW).ledger is led


def test_succeeded_seats_are_not_missing() -> None:
    led = Ledger(released=("j-worker-0",), succeeded=("j-worker-1",), start_time=NOW, size=2)
    assert decide_scale(deepspeed(2), running("j-worker-0", "j-worker-1"), led, NOW).ledger is led
