"""What the released pods did: runtime.decisions.outcomes.observe.

- success, failure with its effective code;
- a disruption, whatever the pod's phase and exit code: the DisruptionTarget condition (each
  reason Kubernetes writes), a deletion the runtime did not make, a pod that vanished, or a
  name now held by a pod of another attempt or of another owner; never a success or failure;
- only released pods are outcomes: a counted failure leaves `released` in the cycle that
  counts it (runtime.decisions.restart), so it is never reported twice;
- a launcher's exit translation applies where the launcher runs: every torchrun pod, only
  rank 0 (worker-0, the launcher) for DeepSpeed and ColossalAI.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from flatjob.runtime import trim
from flatjob.runtime.decisions.outcomes import observe
from flatjob.runtime.decisions.restart import decide_restart
from flatjob.runtime.model import Ledger, PodState
from flatjob.runtime.observe import pod_state
from flatjob.runtime.sim import podstatus

from .builders import DISRUPTION_MESSAGES, NOW, job_view, observed, pod, released_from, uid


def test_success_and_failure_are_reported_once() -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Succeeded"), pod("j-worker-1", "Failed", exit=1))
    out = observe(job, pods, Ledger(released=released_from(pods)))
    assert out.succeeded == ("j-worker-0",)
    assert [(f.name, f.uid, f.type, f.code, f.reason) for f in out.failures] == [
        ("j-worker-1", uid("j-worker-1"), "worker", 1, "failed with exit code 1"),
    ]


@pytest.mark.parametrize(("phase", "code"), [("Failed", 143), ("Failed", 137), ("Succeeded", 0)])
def test_a_probe_kill_is_judged_by_the_programs_exit_code(phase: str, code: int) -> None:
    """A liveness or startup probe's kill under the pod's restartPolicy Never leaves on the pod
    only its phase and exit code (no DisruptionTarget; the kubelet's "Liveness probe failed" is
    an Event): the replica ended as a program that ended by itself, a success when it exits 0
    on SIGTERM, as T9k's controller, which reads the same pod status, judges it (FJ348)."""
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", phase, exit=code))
    out = observe(job, pods, Ledger(released=released_from(pods)))
    assert out.disruptions == ()
    assert (out.succeeded, [(f.name, f.code) for f in out.failures]) == (
        (("j-worker-0",), []) if code == 0 else ((), [("j-worker-0", code)])
    )


REPLACED = "was replaced by a pod this attempt did not create"
NEVER_SEEN = "is gone and its end was never seen (deleted while the runtime was not watching)"
OTHERS = "was deleted by someone else before it finished"


@pytest.mark.parametrize(
    ("observed_pod", "reason", "the_uid"),
    [
        pytest.param(None, NEVER_SEEN, "", id="vanished"),  # no DELETED event held: deleted while the watch was down
        pytest.param(pod("j-worker-0", "Running", attempt=1), REPLACED, uid("j-worker-0"), id="held-by-the-previous-attempt"),
        pytest.param(pod("j-worker-0", attempt=3), REPLACED, uid("j-worker-0"), id="held-by-a-later-attempt"),
        pytest.param(pod("j-worker-0", "Running", attempt=None), REPLACED, uid("j-worker-0"), id="held-by-a-pod-without-attempt"),
        pytest.param(pod("j-worker-0", "Succeeded", attempt=2, ours=False), REPLACED, uid("j-worker-0"), id="held-by-a-pod-not-ours"),
        # kubectl delete pod, a namespace being deleted: graceful, no condition; however the program answered SIGTERM
        pytest.param(pod("j-worker-0", "Running", attempt=2, deleting=True), OTHERS, uid("j-worker-0"), id="deleted-still-running"),
        pytest.param(pod("j-worker-0", "Succeeded", attempt=2, deleting=True), OTHERS, uid("j-worker-0"), id="deleted-exit-0-on-sigterm"),
        pytest.param(pod("j-worker-0", "Failed", exit=1, attempt=2, deleting=True), OTHERS, uid("j-worker-0"), id="deleted-exit-1-on-sigterm"),
        # the DisruptionTarget condition, set before the deletion or the kill, with each reason Kubernetes writes
        *(pytest.param(pod("j-worker-0", phase, exit=code, attempt=2, deleting=deleting, disruption=why), f"was disrupted ({why}: {DISRUPTION_MESSAGES[why]})",
                       uid("j-worker-0"), id=f"{why}-{phase}-{code}")
          for why, phase, code, deleting in [
              ("EvictionByEvictionAPI", "Running", None, True),  # kubectl drain, before SIGTERM ends it
              ("EvictionByEvictionAPI", "Succeeded", 0, True),  # a checkpoint and exit 0 on SIGTERM
              ("EvictionByEvictionAPI", "Failed", 1, True),  # exit 1 on SIGTERM
              ("PreemptionByScheduler", "Failed", 143, True),
              ("DeletionByTaintManager", "Running", None, True),  # a lost node: terminating with no kubelet
              ("DeletionByPodGC", "Failed", None, False),
              ("TerminationByKubelet", "Failed", 137, False),  # node-pressure eviction: the pod stays
          ]),
        # the node lost the program: a reboot (containerd's CRI restore: 255, Unknown), a container its kubelet cannot find
        pytest.param(replace(pod("j-worker-0", "Failed", exit=255, attempt=2), reason="Unknown"),
                     "was lost with its node: the container runtime found its program gone (a node restart) (exit code 255, reason Unknown)",
                     uid("j-worker-0"), id="node-rebooted-255-Unknown"),
        pytest.param(replace(pod("j-worker-0", "Failed", exit=137, attempt=2), reason="ContainerStatusUnknown"),
                     "was lost with its node: its kubelet could not find its container (exit code 137, reason ContainerStatusUnknown)",
                     uid("j-worker-0"), id="container-status-unknown"),
    ],
)
def test_disruptions_are_never_successes_or_failures(observed_pod: PodState | None, reason: str, the_uid: str) -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Running", attempt=2), *([observed_pod] if observed_pod else []))
    led = Ledger(attempt=2, released=("j-master-0", "j-worker-0"))
    out = observe(job, pods, led)
    assert (out.succeeded, out.failures) == ((), ())
    (d,) = out.disruptions
    assert (d.name, d.uid, d.reason) == ("j-worker-0", the_uid, reason)


@pytest.mark.parametrize(("ended", "reason"), [
    pytest.param(False, NEVER_SEEN, id="gone-unseen"),  # a relist after the watch was down: nothing held
    pytest.param(True, "was deleted before it finished", id="deleted-as-it-ended"),  # its DELETED held, ended within CLOCK_SLACK of the deletion
])
def test_a_gone_pod_says_whether_its_deletion_was_seen(ended: bool, reason: str) -> None:
    """A pod gone from the cache is a disruption either way; the words say whether the runtime
    saw it deleted (the informer holds its DELETED event's object) or never saw its end."""
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Running", attempt=2))
    last = replace(pod("j-worker-0", "Succeeded", exit=0, attempt=2, deleting=True), finished_at=NOW - 2, deletion_began=NOW)
    led = Ledger(attempt=2, released=("j-master-0", "j-worker-0"))
    out = observe(job, pods, led, NOW, {"j-worker-0": last} if ended else {})
    (d,) = out.disruptions
    assert (d.name, d.uid, d.reason, out.succeeded) == ("j-worker-0", "", reason, ())


def _init_failed_behind_a_sidecar() -> dict:
    """A pod as the kubelet writes it when `fetch-data` exits 1 behind a native sidecar: the
    pod fails (restartPolicy Never, kubelet_pods.go getPhase), the kubelet kills the sidecar
    (143), and lists init statuses in spec order (status_manager.go SortInitContainerStatuses)."""
    t = "2026-01-01T00:00:0{}Z"
    return {
        "metadata": {"name": "j-worker-0", "uid": "u1", "annotations": {"flatjob.dev/attempt": "1"}},
        "spec": {"initContainers": [{"name": "log-shipper", "restartPolicy": "Always"}, {"name": "fetch-data"}], "containers": [{"name": "pytorch"}]},
        "status": {
            "phase": "Failed",
            "initContainerStatuses": [
                {"name": "log-shipper", "state": {"terminated": {"exitCode": 143, "reason": "Error", "startedAt": t.format(1)}}},
                {"name": "fetch-data", "state": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": t.format(2)}}},
            ],
            "containerStatuses": [{"name": "pytorch", "state": {"waiting": {"reason": "PodInitializing"}}}],
        },
    }


@pytest.mark.parametrize("trimmed", [False, True], ids=["as-listed", "as-cached"])
def test_an_init_failure_behind_a_native_sidecar_has_the_init_containers_code(trimmed: bool) -> None:
    """The sidecar's kill code (143, retryable under ExitCode) is never the pod's: the failed
    init container's 1 is (permanent under ExitCode), as without a sidecar."""
    obj = _init_failed_behind_a_sidecar()
    state = pod_state(trim.pod(obj) if trimmed else obj, "pytorch")
    assert (state.exit_code, state.reason) == (1, "Init:Error")


def test_run_locals_kubelet_lists_init_statuses_in_spec_order() -> None:
    """run-local's status builder puts sidecars where the spec has them, as the kubelet does."""
    how = podstatus.Ended((), init=(podstatus.Exited("fetch-data", 1, "Error"),), sidecars=(podstatus.Exited("log-shipper", 143, "Error"),))
    status = podstatus.ended(_init_failed_behind_a_sidecar(), "10.0.0.1", how, 0.0, 1.0)
    assert [s["name"] for s in status["initContainerStatuses"]] == ["log-shipper", "fetch-data"]
    assert pod_state({**_init_failed_behind_a_sidecar(), "status": status}, "pytorch").exit_code == 1


def test_a_failed_init_container_is_a_failure_with_its_exit_code() -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Failed", exit=1, reason="Init:Error"))
    (f,) = observe(job, pods, Ledger(released=released_from(pods))).failures
    assert (f.code, f.exit_code, f.reason) == (1, 1, "failed with exit code 1 in an init container (Init:Error)")


def test_a_counted_failure_leaves_released_so_it_is_never_counted_twice() -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Failed", exit=1), pod("j-worker-1", "Running"))
    led = Ledger(released=released_from(pods))
    counted = decide_restart(job, pods, led, observe(job, pods, led).failures, NOW).ledger
    assert counted.released == ("j-master-0", "j-worker-1")
    assert observe(job, pods, counted).failures == ()


@pytest.mark.parametrize(
    "ledger",
    [
        pytest.param(Ledger(), id="nothing-released"),
        pytest.param(Ledger(succeeded=("j-master-0",), failed=("j-worker-0",)), id="already-settled"),
    ],
)
def test_pods_not_released_are_not_outcomes(ledger: Ledger) -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Succeeded"), pod("j-worker-0", "Failed", exit=1))
    out = observe(job, pods, ledger)
    assert out.succeeded == () and out.failures == ()


def test_a_released_pod_whose_template_left_is_not_judged() -> None:
    """Its PodTemplate left git: an edit (runtime.decisions.edits), not a failure."""
    job = job_view("PyTorchTrainingJob", types={"master": 1, "worker": 1})
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Running"), pod("j-worker-1", "Failed", exit=1))
    assert observe(job, pods, Ledger(released=released_from(pods))).failures == ()


@pytest.mark.parametrize(
    ("kind", "scope", "launcher", "pod_name", "expected"),
    [
        pytest.param("PyTorchTrainingJob", "pod", "torchrun", "j-master-0", 137, id="torchrun-rank0"),
        pytest.param("PyTorchTrainingJob", "pod", "torchrun", "j-worker-1", 137, id="torchrun-every-pod"),
        pytest.param("PyTorchTrainingJob", "group", None, "j-master-0", 247, id="plain-ddp-no-translation"),
        pytest.param("DeepSpeedJob", "group", "deepspeed", "j-worker-0", 137, id="deepspeed-launcher-pod"),
        pytest.param("DeepSpeedJob", "group", "deepspeed", "j-worker-1", 247, id="deepspeed-worker-runs-no-launcher"),
        pytest.param("ColossalAIJob", "none", "colossalai", "j-launcher", 137, id="colossalai-launcher"),
        pytest.param("ColossalAIJob", "none", "colossalai", "j-worker-0", 247, id="colossalai-worker"),
    ],
)
def test_launcher_translation_applies_where_the_launcher_runs(kind: str, scope: str, launcher: str | None, pod_name: str, expected: int) -> None:
    job = job_view(kind, scope=scope, launcher_kind=launcher)
    pods = observed(pod(pod_name, "Failed", exit=247))
    (f,) = observe(job, pods, Ledger(released=released_from(pods))).failures
    assert f.code == expected
    if expected != 247:
        assert f.reason == f"failed with exit code 247 (effective {expected})"


def test_how_long_a_program_ran_counts_from_its_container_not_its_pod() -> None:
    """A pod that pulled and initialised for 10 min and crashed at once has not run for a while:
    its back-off must not start over (restart.RESET_AFTER)."""
    from flatjob.runtime.observe import pod_state, seconds

    obj = {
        "metadata": {"name": "p", "uid": "u"},
        "spec": {},
        "status": {
            "phase": "Failed", "startTime": "2026-01-01T00:00:00Z",
            "containerStatuses": [{"name": "main", "state": {"terminated": {"exitCode": 1, "startedAt": "2026-01-01T00:10:00Z", "finishedAt": "2026-01-01T00:10:01Z"}}}],
        },
    }
    assert pod_state(obj, "main").started_at == seconds("2026-01-01T00:10:00Z")
    del obj["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"]
    assert pod_state(obj, "main").started_at == seconds("2026-01-01T00:00:00Z")  # a kubelet that did not say: the pod's


@pytest.mark.parametrize(("reason", "dated", "deleted", "since"), [
    pytest.param("EvictionByEvictionAPI", "00:01:00", "00:01:30", 60, id="written-with-its-delete"),
    pytest.param("EvictionByEvictionAPI", "00:00:00", "00:01:30", 60, id="reused-from-a-refused-eviction"),
    pytest.param("DeletionByTaintManager", "00:00:00", "00:01:30", 60, id="taint-eviction-reusing-it"),
    pytest.param("PreemptionByScheduler", "00:00:58", "00:01:30", 58, id="two-clocks-within-the-slack"),
    pytest.param("TerminationByKubelet", "00:01:00", None, 30, id="the-kubelets-own-less-its-grace"),
])
def test_a_disruption_is_dated_no_earlier_than_its_deletion(reason: str, dated: str, deleted: str | None, since: float) -> None:
    """Every writer of DisruptionTarget keeps the lastTransitionTime of a True one already there
    (apipod.UpdatePodCondition): a disruption after an eviction whose delete was refused reads
    the refused one's date.  A disrupter's condition comes with its deletion, so the disruption
    began then (deletionTimestamp less its grace), give or take CLOCK_SLACK."""
    from flatjob.runtime.observe import pod_state, seconds

    base = seconds("2026-01-01T00:00:00Z")
    meta: dict = {"name": "p", "uid": "u"}
    if deleted is not None:
        meta.update(deletionTimestamp=f"2026-01-01T{deleted}Z", deletionGracePeriodSeconds=30)
    condition = {"type": "DisruptionTarget", "status": "True", "reason": reason, "lastTransitionTime": f"2026-01-01T{dated}Z"}
    obj = {"metadata": meta, "spec": {"terminationGracePeriodSeconds": 30},
           "status": {"phase": "Failed" if deleted is None else "Running", "conditions": [condition]}}
    state = pod_state(obj, "main")
    assert state.disrupted_since == base + since


UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.mark.parametrize("tolerations, grace", [
    pytest.param([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}], 300.0, id="admission-default"),
    pytest.param([{"operator": "Exists"}], None, id="every-taint-forever"),
    pytest.param([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}], None, id="unreachable-forever"),
    pytest.param([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}, {"operator": "Exists", "tolerationSeconds": 60}], 60.0, id="least-seconds-win-over-forever"),
    pytest.param([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 60}], 0.0, id="other-effect-does-not-match"),
    pytest.param([{"key": "gpu", "operator": "Exists"}], 0.0, id="other-key-evicted-at-once"),
    pytest.param([{"key": UNREACHABLE, "operator": "Equal", "value": "x"}], 0.0, id="a-value-the-taint-lacks"),
    pytest.param([{"key": UNREACHABLE, "effect": "NoExecute", "tolerationSeconds": -5}], 0.0, id="negative-is-at-once"),
    pytest.param("junk", 0.0, id="not-a-list"),
    # getMinTolerationTime starts from the int64 maximum and reads it back as "never" (hx22)
    pytest.param([{"key": UNREACHABLE, "effect": "NoExecute", "tolerationSeconds": 2**63 - 1}], None, id="int64-max-is-forever"),
])
def test_how_long_a_pod_stays_on_an_unreachable_node(tolerations: object, grace: float | None) -> None:
    """taint_eviction.go getMinTolerationTime over the tolerations that match the unreachable
    NoExecute taint (core/v1 Toleration.ToleratesTaint), read through the runtime's trim."""
    from flatjob.runtime.observe import pod_state
    from flatjob.runtime.trim import pod as trimmed

    obj = {"metadata": {"name": "p", "uid": "u"}, "spec": {"tolerations": tolerations}, "status": {"phase": "Running"}}
    assert pod_state(obj).unreachable_grace == grace
    assert pod_state(trimmed(obj)).unreachable_grace == grace


DRAINED = pod("j-worker-1", "Running", deleting=True, disruption="EvictionByEvictionAPI")
REPLACEMENT = pod("j-worker-1", "Running", incarnation=2, started_at=NOW - 1)


@pytest.mark.parametrize("worker_1, until, excused", [
    pytest.param(DRAINED, None, True, id="drained-pod-still-stopping-100s-on"),
    pytest.param(pod("j-worker-1", "Running", deleting=True), None, True, id="deleted-by-someone-still-stopping"),
    pytest.param(pod("j-worker-1", "Succeeded", deleting=True, disruption="EvictionByEvictionAPI"), NOW - 10, True, id="stopped-10s-ago"),
    pytest.param(None, NOW - 29, True, id="gone-29s-ago"),
    pytest.param(None, NOW - 31, False, id="gone-31s-ago"),
    pytest.param(REPLACEMENT, NOW - 40, False, id="replaced-40s-ago"),
    pytest.param(DRAINED, NOW + 500, True, id="an-edited-future-end-while-it-still-runs"),
    pytest.param(None, NOW + 500, False, id="an-edited-future-end-excuses-nothing"),
    pytest.param(None, None, True, id="gone-its-replacement-not-running-yet"),  # a preempted pod's replacement Unschedulable
    pytest.param(pod("j-worker-1", "Pending", incarnation=2, gated=False), None, True, id="its-replacement-pending"),
])
def test_a_peer_is_excused_until_the_disrupted_pods_replacement_runs_and_30s_after(worker_1: PodState | None, until: float | None, excused: bool) -> None:
    """The master fails 100 s after worker-1 was seen disrupted (a drain with a long grace
    period, a lost node, a preemption whose replacement cannot be scheduled): what decides is
    when worker-1 ran again (`until`: its replacement first seen running), not when it was marked."""
    job = job_view("PyTorchTrainingJob")
    master = pod("j-master-0", "Failed", exit=1, started_at=NOW - 3600)
    pods = observed(master, pod("j-worker-0", "Running"), *([worker_1] if worker_1 else []))
    led = Ledger(released=("j-master-0", "j-worker-0"), disrupted={"j-worker-1": NOW - 100}, disrupted_end={} if until is None else {"j-worker-1": until})
    out = observe(job, pods, led, NOW)
    assert ([d.name for d in out.disruptions], [f.name for f in out.failures]) == ((["j-master-0"], []) if excused else ([], ["j-master-0"]))


# --- a restart counted just before a late-seen eviction (restart._taken_back) -------------------


@pytest.mark.parametrize("began, taken_back", [
    pytest.param(NOW - 25, True, id="the-eviction-began-before-the-counted-failure"),
    pytest.param(NOW - 5, False, id="the-eviction-began-after-it"),
    pytest.param(None, False, id="no-disruption-time-a-kubelet-older-than-disruption-target"),
])
def test_a_restart_is_taken_back_only_when_the_eviction_began_before_it(began: float | None, taken_back: bool) -> None:
    """worker-0's exit 1 was counted at NOW-20; at NOW the kubelet reports worker-1 evicted (late:
    its pod already stopped). Only an eviction that began before the failure can have caused
    it: a crash loop beside a node under pressure is still counted."""
    import dataclasses

    job = job_view("PyTorchTrainingJob", types={"worker": 3})
    counted = Ledger(released=("j-worker-1", "j-worker-2"), backoff_count=1, restarts={"worker": 1},
                     incident_at=NOW - 20, incident=("j-worker-0",), levels={"j-worker-0": 1}, not_before={"j-worker-0": NOW - 10})
    evicted = pod("j-worker-1", "Failed", exit=137, reason="Evicted", started_at=NOW - 3600, disruption=None if began is None else "TerminationByKubelet")
    evicted = dataclasses.replace(evicted, disrupted_since=began, evicted="The node was low on resource: memory. ")
    pods = observed(evicted, pod("j-worker-2", "Running", started_at=NOW - 3600))
    out = observe(job, pods, counted, NOW)
    assert [d.name for d in out.disruptions] == ["j-worker-1"] and out.disruptions[0].late
    rd = decide_restart(job, pods, counted, out.failures, NOW, out.disruptions)
    assert (rd.ledger.backoff_count, rd.ledger.restarts["worker"]) == ((0, 0) if taken_back else (1, 1))
    assert any(e[1] == "RestartNotCounted" for e in rd.events) == taken_back


def test_a_replacement_that_never_runs_excuses_its_peers_for_15_minutes_at_most() -> None:
    """worker-1 was preempted three hours ago and its replacement is still Unschedulable;
    worker-0, running all along, now fails on its own: counted, not excused for hours."""
    job = job_view("GenericJob", policy="Never")
    for ago, excused in ((600, True), (3 * 3600, False)):
        led = Ledger(released=("j-worker-0", "j-worker-1"), start_time=NOW - 4 * 3600, disrupted={"j-worker-1": NOW - ago})
        pods = observed(pod("j-worker-0", "Failed", exit=1, started_at=NOW - 4 * 3600),
                        pod("j-worker-1", "Pending", gated=False, incarnation=2, unschedulable="0/8 nodes are available"))
        out = observe(job, pods, led, NOW)
        assert ([d.name for d in out.disruptions] == ["j-worker-0"]) == excused, (ago, out)


@pytest.mark.parametrize("reason, grace, began", [
    pytest.param("TerminationByKubelet", None, 70.0, id="kubelet-dated-when-stopped-less-the-default-30s"),
    pytest.param("TerminationByKubelet", 5, 95.0, id="kubelet-less-the-pods-own-grace"),
    pytest.param("EvictionByEvictionAPI", 5, 100.0, id="api-server-dated-when-it-began"),
])
def test_when_a_disruption_began_at_the_earliest(reason: str, grace: int | None, began: float) -> None:
    """mergePodStatus dates the kubelet's own DisruptionTarget when the pod stopped (review 23, round 7)."""
    from flatjob.runtime.observe import disruption_began

    spec = {} if grace is None else {"terminationGracePeriodSeconds": grace}
    assert disruption_began({"reason": reason, "lastTransitionTime": "1970-01-01T00:01:40Z"}, spec) == began


@pytest.mark.parametrize(("written", "read"), [("2", 2), ("\u0663", None), (" 1_0 ", None), ("-1", None), ("9" * 4400, None), (None, None)])
def test_an_attempt_annotation_is_read_as_ascii_digits_or_not_at_all(written: str | None, read: int | None) -> None:
    """int() reads "٣" and " 1_0 " as numbers and raises past 4 300 digits: a pod edited so is
    not any attempt's (review of issue 21, round 4)."""
    notes = {} if written is None else {"flatjob.dev/attempt": written}
    obj = {"metadata": {"name": "j-worker-0", "uid": "u1", "annotations": notes}, "spec": {"containers": [{"name": "pytorch"}]}, "status": {"phase": "Running"}}
    assert pod_state(obj, "pytorch").attempt == read


@pytest.mark.parametrize(("reason", "evicted", "disruption"), [
    ("Unknown", None, True),  # a node restart (containerd's CRI restore)
    ("Init:Unknown", None, True),  # ... while an init container ran (review of round 15: not matched)
    ("ContainerStatusUnknown", None, True),
    ("ContainerStatusUnknown", "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi.", False),  # its own storage limit: counted
    ("Error", None, False),  # a program's own exit 255
])
def test_a_program_its_node_lost_is_a_disruption_that_waits_its_back_off(reason: str, evicted: str | None, disruption: bool) -> None:
    """A lost program may be lost every time (a program that crashes its machine): it is replaced
    uncounted but after the pod's back-off, as a node's refusal is (review of round 15)."""
    job = job_view("PyTorchTrainingJob")
    lost = replace(pod("j-worker-0", "Failed", exit=255, attempt=2), reason=reason, evicted=evicted)
    out = observe(job, observed(pod("j-master-0", "Running", attempt=2), lost), Ledger(attempt=2, released=("j-master-0", "j-worker-0")))
    assert (len(out.disruptions), len(out.failures)) == ((1, 0) if disruption else (0, 1))
    assert all(d.rejected for d in out.disruptions)


def test_a_rebooted_pod_excuses_only_peers_that_ran_while_it_did() -> None:
    """Its trouble began after it started, and by when its runtime reported it: a peer that had
    failed before it started fails on its own account (review of round 15: every peer was excused)."""
    job = job_view("PyTorchTrainingJob")
    lost = replace(pod("j-worker-0", "Failed", exit=255, attempt=2), reason="Unknown", started_at=3000.0, finished_at=4000.0)
    early = replace(pod("j-worker-1", "Failed", exit=1, attempt=2), started_at=100.0, finished_at=1000.0)
    during = replace(pod("j-master-0", "Failed", exit=1, attempt=2), started_at=100.0, finished_at=3500.0)
    out = observe(job, observed(lost, early, during), Ledger(attempt=2, released=("j-master-0", "j-worker-0", "j-worker-1")))
    assert [f.name for f in out.failures] == ["j-worker-1"]
    assert sorted(d.name for d in out.disruptions) == ["j-master-0", "j-worker-0"]
