"""What the released pods did: runtime.decisions.outcomes.observe.

- success, failure with its effective code, a pod that vanished or was replaced (lost);
- incarnations already counted are never reported again;
- a launcher's exit translation applies where the launcher runs: every torchrun pod, only
  rank 0 (worker-0, the launcher) for DeepSpeed and ColossalAI.
"""

from __future__ import annotations

import pytest

from flatjob.runtime.decisions.exitcodes import LOST
from flatjob.runtime.decisions.outcomes import observe
from flatjob.runtime.model import Ledger

from .builders import job_view, observed, pod, released_from, uid


def test_success_and_failure_are_reported_once() -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Succeeded"), pod("j-worker-1", "Failed", exit=1))
    out = observe(job, pods, Ledger(released=released_from(pods)))
    assert out.succeeded == ("j-worker-0",)
    assert [(f.name, f.uid, f.type, f.code, f.reason) for f in out.failures] == [
        ("j-worker-1", uid("j-worker-1"), "worker", 1, "failed with exit code 1"),
    ]


@pytest.mark.parametrize(
    ("observed_pod", "reason"),
    [
        pytest.param(None, "was deleted before it finished", id="vanished"),
        pytest.param(pod("j-worker-0", "Pending", incarnation=2), "was deleted before it finished", id="replaced-by-new-incarnation"),
        pytest.param(pod("j-worker-0", "Failed", reason="Evicted"), "was lost (Evicted)", id="evicted"),
    ],
)
def test_lost_pods_fail_with_sigkill(observed_pod: object, reason: str) -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Running"), *([observed_pod] if observed_pod else []))
    led = Ledger(released={"j-master-0": uid("j-master-0"), "j-worker-0": uid("j-worker-0")})
    (f,) = observe(job, pods, led).failures
    assert (f.name, f.uid, f.code, f.reason) == ("j-worker-0", uid("j-worker-0"), LOST, reason)


def test_counted_incarnations_are_not_reported_again() -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Failed", exit=1))
    led = Ledger(released=released_from(pods), counted=(uid("j-worker-0"),))
    assert observe(job, pods, led).failures == ()


def test_pods_not_released_are_not_outcomes() -> None:
    job = job_view("PyTorchTrainingJob")
    pods = observed(pod("j-master-0", "Succeeded"), pod("j-worker-0", "Failed", exit=1))
    out = observe(job, pods, Ledger())
    assert out.succeeded == () and out.failures == ()


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
