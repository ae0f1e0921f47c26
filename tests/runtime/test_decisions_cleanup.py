"""Clean-up after the finish: runtime.decisions.cleanup.decide_cleanup.

- cleanUpPolicy All / Unfinished / None, and ColossalAI's cleanUpWorkers (Workers) x pod phase;
- a deadline or restart-limit failure stops unfinished pods whatever the policy says;
- a ColossalAIJob failed by a worker stops its other unfinished workers, keeps the launcher;
- GenericJob's default is None (T9k's API reference): a replica still running after the
  success rule was met keeps running, with its logs;
- clean-up happens once: pods recreated later (by a GitOps tool) are never cleaned.
"""

from __future__ import annotations

import pytest

from flatjob.runtime.decisions.cleanup import decide_cleanup
from flatjob.runtime.model import Ledger, PodState

from .builders import job_view, observed, pod, uid

# One pod per phase; for the Workers policy the launcher is a running pod that must stay.
PODS = observed(
    pod("j-launcher", "Succeeded"),
    pod("j-worker-0", "Pending"),
    pod("j-worker-1", "Running"),
    pod("j-worker-2", "Succeeded"),
    pod("j-worker-3", "Failed", exit=1),
    pod("j-worker-4", "Unknown"),
)
JOB_TYPES = {"launcher": 1, "worker": 5}

# policy, outcome reason: pods deleted
CASES = [
    ("All", "Succeeded", ("j-launcher", "j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4")),
    ("Unfinished", "Succeeded", ("j-worker-0", "j-worker-1", "j-worker-4")),
    ("None", "Succeeded", ()),
    ("Workers", "Succeeded", ("j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4")),
    ("All", "Failed", ("j-launcher", "j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4")),
    ("None", "Failed", ()),
    # A deadline or restart limit must stop what still runs: None and Workers become Unfinished.
    ("None", "DeadlineExceeded", ("j-worker-0", "j-worker-1", "j-worker-4")),
    ("None", "BackoffLimitExceeded", ("j-worker-0", "j-worker-1", "j-worker-4")),
    ("Workers", "DeadlineExceeded", ("j-worker-0", "j-worker-1", "j-worker-4")),
    ("Unfinished", "DeadlineExceeded", ("j-worker-0", "j-worker-1", "j-worker-4")),
    ("All", "BackoffLimitExceeded", ("j-launcher", "j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4")),
]


@pytest.mark.parametrize(("policy", "reason", "deleted"), [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in CASES])
def test_cleanup_policy(policy: str, reason: str, deleted: tuple[str, ...]) -> None:
    job = job_view("ColossalAIJob", types=JOB_TYPES, cleanup=policy)
    outcome = "Succeeded" if reason == "Succeeded" else "Failed"
    d = decide_cleanup(job, PODS, Ledger(outcome=outcome, reason=reason))
    assert tuple(sorted(d.delete)) == deleted
    assert d.ledger.cleaned == tuple(uid(n) for n in deleted)
    assert d.ledger.cleaned_up


def test_cleanup_happens_once() -> None:
    job = job_view("ColossalAIJob", types=JOB_TYPES, cleanup="All")
    first = decide_cleanup(job, PODS, Ledger(outcome="Succeeded", reason="Succeeded"))
    recreated = observed(*(pod(n, incarnation=2) for n in PODS))  # git brings them back, gated
    again = decide_cleanup(job, recreated, first.ledger)
    assert again.delete == () and again.ledger is first.ledger


def test_pods_already_deleting_or_draining_are_left_alone() -> None:
    job = job_view("ColossalAIJob", types=JOB_TYPES, cleanup="All")
    pods: dict[str, PodState] = {
        "j-worker-0": pod("j-worker-0", "Running", deleting=True),
        "j-worker-1": pod("j-worker-1", "Running"),
        "j-worker-2": pod("j-worker-2", "Running"),
    }
    d = decide_cleanup(job, pods, Ledger(outcome="Failed", reason="Failed", draining=(uid("j-worker-1"),)))
    assert d.delete == ("j-worker-2",)


def test_nothing_present_still_marks_cleanup_done() -> None:
    job = job_view("PyTorchTrainingJob", cleanup="All")
    d = decide_cleanup(job, {}, Ledger(outcome="Succeeded", reason="Succeeded"))
    assert d.delete == () and d.ledger.cleaned_up


# --- ColossalAI: a failed worker fails the job; the other workers stop (T9k fidelity, row 4) ----

# failed pods (ledger.failed), policy: pods deleted
COLOSSAL = [
    (("j-worker-3",), "None", ("j-worker-0", "j-worker-1", "j-worker-4")),  # unfinished workers; launcher kept
    (("j-worker-3",), "Workers", ("j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4")),  # cleanUpWorkers: all workers
    (("j-launcher",), "None", ()),  # the launcher decided: T9k's cleanUpWorkers false keeps the workers
]


@pytest.mark.parametrize(("failed", "policy", "deleted"), COLOSSAL, ids=["worker-failed", "worker-failed-cleanUpWorkers", "launcher-failed"])
def test_colossalai_worker_failure_stops_the_other_workers(failed: tuple[str, ...], policy: str, deleted: tuple[str, ...]) -> None:
    job = job_view("ColossalAIJob", types=JOB_TYPES, cleanup=policy)
    pods = {**PODS, "j-launcher": pod("j-launcher", "Running")}
    d = decide_cleanup(job, pods, Ledger(outcome="Failed", reason="Failed", failed=failed))
    assert tuple(sorted(d.delete)) == deleted
    assert "j-launcher" not in d.delete  # its log says how the run ended


def test_only_colossalai_stops_the_others_when_a_member_fails() -> None:
    """A GenericJob under None keeps every pod after a failure rule (T9k's documented None)."""
    job = job_view("GenericJob", types={"worker": 2})
    assert job.cleanup == "None"
    pods = observed(pod("j-worker-0", "Failed", exit=1), pod("j-worker-1", "Running"))
    d = decide_cleanup(job, pods, Ledger(outcome="Failed", reason="Failed", failed=("j-worker-0",)))
    assert d.delete == ()


def test_generic_default_keeps_a_replica_running_after_success() -> None:
    """T9k GenericJob API reference: "None: (default) no resources reclamation"."""
    job = job_view("GenericJob", types={"worker": 2})
    pods = observed(pod("j-worker-0", "Succeeded"), pod("j-worker-1", "Running"))
    d = decide_cleanup(job, pods, Ledger(outcome="Succeeded", reason="Succeeded"))
    assert d.delete == () and d.ledger.cleaned_up
