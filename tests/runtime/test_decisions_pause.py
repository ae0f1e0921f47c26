"""Pause and resume: runtime.decisions.pause.decide_pause.

- pausing drains every pod (gated or running), forgets releases and back-offs, counts nothing;
- pods that appear while paused (a tool that does not prune) are drained too;
- resuming is a new attempt marked as resuming; neither counts as a restart.
"""

from __future__ import annotations

import pytest

from flatjob.runtime.decisions.pause import decide_pause
from flatjob.runtime.model import Ledger

from .builders import NOW, job_view, observed, pod, uid

RUNNING = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running"), pod("j-worker-1"))
LEDGER = Ledger(
    attempt=2,
    backoff_count=1,
    restarts={"worker": 1},
    released={"j-master-0": uid("j-master-0"), "j-worker-0": uid("j-worker-0")},
    not_before={"j-worker-1": NOW + 10},
    start_time=NOW - 100,
)


def test_pausing_drains_every_pod_and_forgets_releases() -> None:
    d = decide_pause(job_view(run_mode="pause"), RUNNING, LEDGER)
    assert d.ledger.paused and not d.ledger.resuming
    assert set(d.ledger.draining) == {uid(n) for n in RUNNING}
    assert d.delete == tuple(RUNNING)
    assert d.ledger.released == {} and d.ledger.not_before == {}
    assert (d.ledger.attempt, d.ledger.backoff_count, d.ledger.restarts) == (2, 1, {"worker": 1})
    assert d.events == (("Normal", "Pausing", "deleting 3 pod(s)"),)


def test_paused_with_every_pod_gone_is_no_change() -> None:
    led = LEDGER.evolve(paused=True, released={})
    d = decide_pause(job_view(run_mode="pause"), {}, led)
    assert d.ledger is led and d.delete == () and d.events == ()


def test_paused_with_pods_still_terminating_is_no_change() -> None:
    led = LEDGER.evolve(paused=True, released={}, draining=(uid("j-master-0"),))
    pods = observed(pod("j-master-0", "Running", deleting=True))
    assert decide_pause(job_view(run_mode="pause"), pods, led).ledger is led


def test_a_pod_recreated_while_paused_is_drained_too() -> None:
    led = LEDGER.evolve(paused=True, released={}, draining=(uid("j-master-0"),))
    pods = observed(pod("j-master-0", "Running", deleting=True), pod("j-worker-0", incarnation=2))
    d = decide_pause(job_view(run_mode="pause"), pods, led)
    assert d.delete == ("j-worker-0",)
    assert set(d.ledger.draining) == {uid("j-master-0"), uid("j-worker-0", 2)}


def test_resuming_is_a_new_attempt_that_is_not_a_restart() -> None:
    led = LEDGER.evolve(paused=True, released={}, succeeded=("j-worker-0",), failed=("j-worker-1",), spec_hashes={"j-master-0": "h"})
    d = decide_pause(job_view(run_mode="immediate"), {}, led)
    assert (d.ledger.paused, d.ledger.resuming, d.ledger.attempt) == (False, True, 3)
    assert (d.ledger.succeeded, d.ledger.failed, d.ledger.spec_hashes) == ((), (), {})
    assert (d.ledger.backoff_count, d.ledger.restarts) == (1, {"worker": 1})
    assert d.events == (("Normal", "Resuming", "the job resumes as a new attempt"),)


@pytest.mark.parametrize("mode", ["immediate", "debug"])
def test_not_paused_is_no_change(mode: str) -> None:
    assert decide_pause(job_view(run_mode=mode), RUNNING, LEDGER).ledger is LEDGER
