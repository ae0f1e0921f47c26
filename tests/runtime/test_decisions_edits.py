"""Spec edits in git while the job runs: runtime.decisions.edits.decide_edit.

A released pod of this attempt whose spec-hash differs from its PodTemplate's (or whose
PodTemplate left git) starts a new attempt: `released`, `succeeded` and the back-offs are
forgotten, nothing is counted, and the old attempt's pods are deleted by the cycle before the
new gang is created.  Gated pods with an old hash are the release step's business (deleted,
never run), and a pod of another attempt or of another owner is no edit.
"""

from __future__ import annotations

import pytest

from flatjob.runtime.decisions.edits import decide_edit
from flatjob.runtime.model import JobView, Ledger, PodState

from .builders import NOW, acts, cycle, job_view, observed, pod

NAMES = ("j-master-0", "j-worker-0", "j-worker-1")
RUNNING = observed(*(pod(n, "Running") for n in NAMES))


def ledger() -> Ledger:
    return Ledger(
        released=NAMES,
        backoff_count=1,
        restarts={"master": 1},
        not_before={"j-worker-0": NOW},
        succeeded=("j-worker-1",),
        start_time=NOW - 60,
    )


@pytest.mark.parametrize(
    ("job", "changed"),
    [
        pytest.param(job_view(hashes={"j-worker-0": "h-new"}), "j-worker-0", id="hash-changed"),
        pytest.param(job_view(hashes=dict.fromkeys(NAMES, "h-new")), "j-master-0, j-worker-0, j-worker-1", id="every-hash-changed"),
        pytest.param(job_view(types={"master": 1, "worker": 1}), "j-worker-1", id="podtemplate-left-git"),
    ],
)
def test_an_edit_is_a_new_attempt_and_not_a_restart(job: JobView, changed: str) -> None:
    d = decide_edit(job, RUNNING, ledger())
    assert d.replaced == NAMES
    assert d.ledger.attempt == 2
    assert (d.ledger.released, d.ledger.succeeded, d.ledger.failed, d.ledger.not_before, d.ledger.gang_not_before) == ((), (), (), {}, None)
    assert (d.ledger.backoff_count, d.ledger.restarts, d.ledger.start_time) == (1, {"master": 1}, NOW - 60)
    assert d.events == (("Normal", "SpecChanged", f"the job's PodTemplates changed ({changed} differ); starting a new attempt"),)


def test_the_edit_is_decided_once_and_its_old_pods_are_deleted_before_the_new_gang() -> None:
    job = job_view(hashes={"j-worker-0": "h-new"})
    first = cycle(job, RUNNING, ledger())
    assert acts(first) == tuple(("delete", n) for n in NAMES)
    assert first.ledger.attempt == 2
    again = cycle(job, {n: pod(n, "Running", deleting=True) for n in NAMES}, first.ledger, now=NOW + 1)
    assert (acts(again), again.ledger.attempt) == ((), 2)
    assert again.wait == "waiting for 3 pod(s) of the previous attempt to terminate"
    assert acts(cycle(job, {}, first.ledger, now=NOW + 2)) == tuple(("create", n) for n in NAMES)


def test_no_edit_is_no_change() -> None:
    led = ledger()
    assert decide_edit(job_view(), RUNNING, led).ledger is led


# j-worker-0 is released in the ledger (attempt 2) and its PodTemplate now says h-new; the pod seen is:
NO_EDIT = [
    pytest.param(pod("j-worker-0", attempt=2), id="gated-old-hash-not-released"),
    pytest.param(pod("j-worker-0", "Running", attempt=1), id="another-attempts-pod"),
    pytest.param(pod("j-worker-0", "Running", attempt=2, ours=False), id="not-ours"),
    pytest.param(None, id="gone"),
]


@pytest.mark.parametrize("seen", NO_EDIT)
def test_only_a_released_pod_of_ours_in_this_attempt_is_judged(seen: PodState | None) -> None:
    job = job_view(hashes={"j-worker-0": "h-new"})
    pods = {"j-master-0": pod("j-master-0", "Running", attempt=2), **({"j-worker-0": seen} if seen else {})}
    released = ("j-master-0",) if seen is not None and seen.gated else ("j-master-0", "j-worker-0")
    led = ledger().evolve(attempt=2, released=released)
    assert decide_edit(job, pods, led).ledger is led


def test_a_paused_job_is_not_edited() -> None:
    """Pause (and the resume's new attempt) come first: an edit while paused is not a second attempt."""
    job = job_view(hashes={"j-worker-0": "h-new"}, run_mode="pause")
    c = cycle(job, RUNNING, ledger())
    assert (c.ledger.attempt, c.ledger.paused) == (1, True)
    assert [e[1] for e in c.events][:1] == ["Pausing"]
