"""Pause and resume: runtime.decisions.pause.decide_pause, and what the cycle then does.

- pausing forgets releases, back-offs and refusals, counts nothing; the cycle deletes every
  pod of ours (gated or running, of any attempt) and creates none;
- a pod that appears while paused (created just before the pause was seen) is deleted too;
- resuming is a new attempt marked as resuming, created with flatjob.dev/resuming "true";
  neither counts as a restart.
"""

from __future__ import annotations

import pytest

from flatjob.compiler import keys
from flatjob.runtime.decisions.pause import decide_pause
from flatjob.runtime.model import Ledger

from .builders import NOW, acts, cycle, job_view, observed, pod

RUNNING = observed(pod("j-master-0", "Running", attempt=2), pod("j-worker-0", "Running", attempt=2), pod("j-worker-1", attempt=2))
LEDGER = Ledger(
    attempt=2,
    backoff_count=1,
    restarts={"worker": 1},
    released=("j-master-0", "j-worker-0"),
    not_before={"j-worker-1": NOW + 10},
    refused="the API server refused pod j-worker-1: exceeded quota",
    refusals=2,
    gang_not_before=NOW + 20,
    start_time=NOW - 100,
)
PAUSE = job_view(run_mode="pause")


def test_pausing_forgets_releases_and_counts_nothing() -> None:
    d = decide_pause(PAUSE, RUNNING, LEDGER)
    assert d.ledger.paused and not d.ledger.resuming
    assert (d.ledger.released, d.ledger.not_before, d.ledger.gang_not_before, d.ledger.refused, d.ledger.refusals) == ((), {}, None, None, 0)
    assert (d.ledger.attempt, d.ledger.backoff_count, d.ledger.restarts, d.ledger.start_time) == (2, 1, {"worker": 1}, NOW - 100)
    assert d.events == (("Normal", "Pausing", "deleting 3 pod(s)"),)


@pytest.mark.parametrize(
    ("pods", "deleted"),
    [
        pytest.param(RUNNING, ("j-master-0", "j-worker-0", "j-worker-1"), id="running-and-gated"),
        pytest.param({**RUNNING, "j-master-0": pod("j-master-0", "Running", attempt=2, deleting=True)}, ("j-worker-0", "j-worker-1"), id="one-terminating"),
        pytest.param(observed(pod("j-worker-0", attempt=3)), ("j-worker-0",), id="another-attempts-pod"),
        pytest.param(observed(pod("j-worker-0", "Running", attempt=2, ours=False)), (), id="not-ours"),
        pytest.param({}, (), id="all-gone"),
    ],
)
def test_a_paused_job_has_no_pods_of_ours(pods: dict, deleted: tuple[str, ...]) -> None:
    for led in (LEDGER, LEDGER.evolve(paused=True, released=())):
        c = cycle(PAUSE, pods, led)
        assert acts(c) == tuple(("delete", n) for n in deleted)
        assert c.status["phase"] == "Paused" and c.wait == "paused"


def test_paused_again_is_no_change() -> None:
    led = LEDGER.evolve(paused=True, released=())
    d = decide_pause(PAUSE, {}, led)
    assert d.ledger is led and d.events == ()


def test_resuming_is_a_new_attempt_that_is_not_a_restart() -> None:
    led = LEDGER.evolve(paused=True, released=(), succeeded=("j-worker-0",), failed=("j-worker-1",))
    d = decide_pause(job_view(run_mode="immediate"), {}, led)
    assert (d.ledger.paused, d.ledger.resuming, d.ledger.attempt) == (False, True, 3)
    assert (d.ledger.succeeded, d.ledger.failed) == ((), ())
    assert (d.ledger.backoff_count, d.ledger.restarts) == (1, {"worker": 1})
    assert d.events == (("Normal", "Resuming", "the job resumes as a new attempt"),)


def test_a_resumed_gang_is_created_resuming_and_stops_resuming_once_running() -> None:
    job = job_view()
    led = LEDGER.evolve(paused=True, released=(), gang_not_before=None)
    c = cycle(job, {}, led)
    assert c.status["phase"] == "Resuming"
    assert {a.annotations[keys.RESUMING] for a in c.actions} == {"true"}
    assert {a.annotations[keys.ATTEMPT] for a in c.actions} == {"3"}
    running = observed(*(pod(p.name, "Running", attempt=3) for p in job.pods))
    done = cycle(job, running, c.ledger.evolve(released=tuple(running)))
    assert (done.ledger.resuming, done.status["phase"]) == (False, "Running")


@pytest.mark.parametrize("mode", ["immediate", "debug"])
def test_not_paused_is_no_change(mode: str) -> None:
    assert decide_pause(job_view(run_mode=mode), RUNNING, LEDGER).ledger is LEDGER
