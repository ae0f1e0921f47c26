"""Clean-up after the finish: runtime.decisions.cleanup.decide_cleanup.

- cleanUpPolicy All / Unfinished / None, and ColossalAI's cleanUpWorkers (Workers) x pod phase;
- a deadline ends unfinished pods whatever the policy says: those the policy keeps (None) are
  stopped and kept for their logs (a Pending pod a kubelet admitted too: its init containers
  log), those no node admitted deleted; a restart-limit failure follows the policy, as any
  other failure (None keeps what runs running, T9k's manuals);
- a ColossalAIJob failed by a worker ends its other unfinished workers, keeps the launcher;
- GenericJob's default is None (T9k's API reference): a replica still running after the
  success rule was met keeps running, with its logs;
- a pod that never ran (still gated, or released but admitted by no node) goes whatever the
  policy says: it holds quota, has no log, and would start a replica of a finished job;
- the choice is re-derived every cycle (the runtime creates nothing after the outcome, so
  nothing comes back); pods already being deleted and pods not ours are left alone, and the
  cycle also deletes pods of other attempts.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from flatjob.runtime.decisions.cleanup import decide_cleanup
from flatjob.runtime.model import Ledger, PodState

from .builders import acts, cycle, job_view, observed, pod

# One pod per phase; for the Workers policy the launcher is a running pod that must stay.
# j-worker-0 was released but not scheduled yet (Pending, ungated); j-worker-5 never ran (gated).
PODS = observed(
    pod("j-launcher", "Succeeded"),
    pod("j-worker-0", "Pending", gated=False),
    pod("j-worker-1", "Running"),
    pod("j-worker-2", "Succeeded"),
    pod("j-worker-3", "Failed", exit=1),
    pod("j-worker-4", "Unknown"),
    pod("j-worker-5"),
    replace(pod("j-worker-6", "Pending", gated=False), node="n1", started_at=100.0),  # admitted: its init containers run, and log
)
JOB_TYPES = {"launcher": 1, "worker": 7}

# policy, outcome reason: pods deleted (j-worker-5, never run, always), pods stopped and kept
CASES = [
    ("All", "Succeeded", ("j-launcher", "j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4", "j-worker-5", "j-worker-6"), ()),
    ("Unfinished", "Succeeded", ("j-worker-0", "j-worker-1", "j-worker-4", "j-worker-5", "j-worker-6"), ()),
    ("None", "Succeeded", ("j-worker-0", "j-worker-5"), ()),  # no node admitted j-worker-0: it goes
    ("Workers", "Succeeded", ("j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4", "j-worker-5", "j-worker-6"), ()),
    ("All", "Failed", ("j-launcher", "j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4", "j-worker-5", "j-worker-6"), ()),
    ("None", "Failed", ("j-worker-0", "j-worker-5"), ()),
    # A deadline must end what still runs; what the policy keeps (None) is stopped and kept for
    # its log, also a Pending pod a kubelet admitted (its init containers log); one no node
    # admitted yet (Pending, unbound) has no log and is deleted.  A restart limit is a failure
    # like any other: None keeps everything, running (issue 20 review: T9k's None deletes nothing).
    ("None", "DeadlineExceeded", ("j-worker-0", "j-worker-5"), ("j-worker-1", "j-worker-4", "j-worker-6")),
    ("None", "BackoffLimitExceeded", ("j-worker-0", "j-worker-5"), ()),
    ("Unfinished", "BackoffLimitExceeded", ("j-worker-0", "j-worker-1", "j-worker-4", "j-worker-5", "j-worker-6"), ()),
    ("Workers", "DeadlineExceeded", ("j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4", "j-worker-5", "j-worker-6"), ()),
    ("Unfinished", "DeadlineExceeded", ("j-worker-0", "j-worker-1", "j-worker-4", "j-worker-5", "j-worker-6"), ()),
    ("All", "BackoffLimitExceeded", ("j-launcher", "j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4", "j-worker-5", "j-worker-6"), ()),
]


@pytest.mark.parametrize(("policy", "reason", "deleted", "stopped"), [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in CASES])
def test_cleanup_policy(policy: str, reason: str, deleted: tuple[str, ...], stopped: tuple[str, ...]) -> None:
    job = job_view("ColossalAIJob", types=JOB_TYPES, cleanup=policy)
    outcome = "Succeeded" if reason == "Succeeded" else "Failed"
    d = decide_cleanup(job, PODS, Ledger(outcome=outcome, reason=reason))
    assert (d.delete, d.stop) == (deleted, stopped)
    assert d.ledger.cleaned_up


def test_a_deadline_under_cleanup_none_stops_the_running_pods_once_and_keeps_them() -> None:
    """T9k: None keeps the replicas so their logs can be read (user manuals, pytorch and
    deepspeed pages), with no exception; the deadline still ends them: the cycle asks for a
    stop (a past activeDeadlineSeconds) with the pod's uid, once, and never a delete."""
    job = job_view("PyTorchTrainingJob", cleanup="None")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running"), pod("j-worker-1", "Succeeded"))
    led = Ledger(outcome="Failed", reason="DeadlineExceeded", released=("j-master-0", "j-worker-0"), start_time=1.0)
    c = cycle(job, pods, led)
    assert acts(c) == (("stop", "j-master-0"), ("stop", "j-worker-0"))
    assert {a.uid for a in c.actions} == {"uid-j-master-0", "uid-j-worker-0"}
    stopping = {**pods, **{n: replace(pods[n], stopped=True) for n in ("j-master-0", "j-worker-0")}}
    assert acts(cycle(job, stopping, c.ledger)) == ()  # asked once: the kubelet ends them
    ended = {**pods, **{n: pod(n, "Failed", exit=143) for n in ("j-master-0", "j-worker-0")}}
    assert acts(cycle(job, ended, c.ledger)) == ()  # and kept, with their logs


def test_cleanup_is_re_derived_and_settles() -> None:
    """The same pods give the same choice every cycle; once they are being deleted, or gone,
    nothing more is asked, and the ledger keeps `cleanedUp`."""
    job = job_view("ColossalAIJob", types=JOB_TYPES, cleanup="All")
    first = decide_cleanup(job, PODS, Ledger(outcome="Succeeded", reason="Succeeded"))
    assert decide_cleanup(job, PODS, first.ledger).delete == first.delete
    terminating = {n: pod(n, p.phase, gated=p.gated, exit=p.exit_code, deleting=True) for n, p in PODS.items()}
    for pods in (terminating, {}):
        again = decide_cleanup(job, pods, first.ledger)
        assert again.delete == () and again.ledger is first.ledger


def test_pods_already_deleting_or_not_ours_are_left_alone() -> None:
    job = job_view("ColossalAIJob", types=JOB_TYPES, cleanup="All")
    pods: dict[str, PodState] = {
        "j-worker-0": pod("j-worker-0", "Running", deleting=True),
        "j-worker-1": pod("j-worker-1", "Running", ours=False),
        "j-worker-2": pod("j-worker-2", "Running"),
        "j-worker-3": pod("j-worker-3", ours=False),
    }
    d = decide_cleanup(job, pods, Ledger(outcome="Failed", reason="Failed"))
    assert d.delete == ("j-worker-2",)


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        pytest.param("None", ("j-worker-1",), id="None"),
        pytest.param("All", ("j-worker-0", "j-worker-1"), id="All"),
    ],
)
def test_the_cycle_also_deletes_pods_of_other_attempts(policy: str, deleted: tuple[str, ...]) -> None:
    """A finished job keeps only what its policy keeps of its last attempt."""
    job = job_view("GenericJob", types={"worker": 2}, cleanup=policy)
    pods = observed(pod("j-worker-0", "Succeeded", attempt=2), pod("j-worker-1", "Running", attempt=1))
    c = cycle(job, pods, Ledger(attempt=2, outcome="Succeeded", reason="Succeeded", succeeded=("j-worker-0",)))
    assert acts(c) == tuple(("delete", n) for n in deleted)


def test_nothing_present_still_marks_cleanup_done() -> None:
    job = job_view("PyTorchTrainingJob", cleanup="All")
    d = decide_cleanup(job, {}, Ledger(outcome="Succeeded", reason="Succeeded"))
    assert d.delete == () and d.ledger.cleaned_up


# --- ColossalAI: a failed worker fails the job; the other workers stop (T9k fidelity, row 4) ----

# failed pods (ledger.failed), policy: pods deleted, pods stopped and kept
COLOSSAL = [
    (("j-worker-3",), "None", ("j-worker-0", "j-worker-5"), ("j-worker-1", "j-worker-4", "j-worker-6")),  # unfinished workers end, kept; launcher kept running
    (("j-worker-3",), "Workers", ("j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4", "j-worker-5", "j-worker-6"), ()),  # cleanUpWorkers: all workers
    (("j-launcher",), "None", ("j-worker-0", "j-worker-5"), ()),  # the launcher decided: T9k's cleanUpWorkers false keeps the workers that ran (j-worker-0 never did)
]


@pytest.mark.parametrize(("failed", "policy", "deleted", "stopped"), COLOSSAL, ids=["worker-failed", "worker-failed-cleanUpWorkers", "launcher-failed"])
def test_colossalai_worker_failure_stops_the_other_workers(failed: tuple[str, ...], policy: str, deleted: tuple[str, ...], stopped: tuple[str, ...]) -> None:
    job = job_view("ColossalAIJob", types=JOB_TYPES, cleanup=policy)
    pods = {**PODS, "j-launcher": pod("j-launcher", "Running")}
    d = decide_cleanup(job, pods, Ledger(outcome="Failed", reason="Failed", failed=failed))
    assert (d.delete, d.stop) == (deleted, stopped)
    assert "j-launcher" not in d.delete + d.stop  # its log says how the run ended


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
