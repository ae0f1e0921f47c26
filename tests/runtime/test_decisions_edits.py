"""Spec edits in git while the job runs: runtime.decisions.edits.decide_edit.

A released pod whose spec-hash differs from the record's rendering (or that the record no
longer renders) starts a new attempt: every released pod is drained; nothing is counted.
Gated pods with an old hash are the release step's business (stale), not an edit.
"""

from __future__ import annotations

import pytest

from flatjob.runtime.decisions.edits import decide_edit
from flatjob.runtime.model import JobView, Ledger

from .builders import NOW, job_view, observed, pod, uid

NAMES = ("j-master-0", "j-worker-0", "j-worker-1")


def ledger() -> Ledger:
    return Ledger(
        released={n: uid(n) for n in NAMES},
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
        pytest.param(job_view(types={"master": 1, "worker": 1}), "j-worker-1", id="pod-no-longer-rendered"),
    ],
)
def test_an_edit_is_a_new_attempt_and_not_a_restart(job: JobView, changed: str) -> None:
    pods = observed(*(pod(n, "Running") for n in NAMES))
    d = decide_edit(job, pods, ledger())
    assert d.replaced == NAMES
    assert d.ledger.attempt == 2
    assert set(d.ledger.draining) == {uid(n) for n in NAMES}
    assert (d.ledger.released, d.ledger.succeeded, d.ledger.not_before, d.ledger.spec_hashes) == ({}, (), {}, {})
    assert (d.ledger.backoff_count, d.ledger.restarts) == (1, {"master": 1})
    assert d.events == (("Normal", "SpecChanged", f"the job spec changed ({changed} differ); starting a new attempt"),)


def test_no_edit_is_no_change() -> None:
    pods = observed(*(pod(n, "Running") for n in NAMES))
    led = ledger()
    assert decide_edit(job_view(), pods, led).ledger is led


def test_a_gated_pod_with_an_old_hash_is_not_an_edit() -> None:
    job = job_view(hashes={"j-worker-0": "h-new"})
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", incarnation=2), pod("j-worker-1", "Running"))
    led = ledger().evolve(released={"j-master-0": uid("j-master-0"), "j-worker-1": uid("j-worker-1")})
    assert decide_edit(job, pods, led).ledger is led


def test_an_old_hash_on_another_incarnation_is_not_an_edit() -> None:
    job = job_view(hashes={"j-worker-0": "h-new"})
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running", incarnation=2, spec_hash="h-j-worker-0"))
    led = ledger()  # released j-worker-0 is incarnation 1, which is gone
    assert decide_edit(job, pods, led).ledger is led


def test_pods_already_draining_are_not_drained_twice() -> None:
    job = job_view(hashes={"j-worker-0": "h-new"})
    pods = observed(*(pod(n, "Running") for n in NAMES))
    led = ledger().evolve(draining=(uid("j-master-0"),))
    d = decide_edit(job, pods, led)
    assert sorted(d.ledger.draining) == sorted(uid(n) for n in NAMES)
