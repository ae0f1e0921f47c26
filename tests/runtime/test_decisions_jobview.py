"""The builders' kind defaults agree with what runtime.job.job_view derives from real records.

The decision tables build JobViews by hand (tests/runtime/builders.py); this module compiles
one small job of each kind and checks that scope, decider, launcher, limits, clean-up, waves
and restart rules are what the builders assume, so the tables test the real configurations.
"""

from __future__ import annotations

import pytest

from flatjob.runtime.job import job_view as record_job_view
from flatjob.runtime.model import JobView, RestartRule

from .builders import KIND_DEFAULTS
from .harness import compile_text

CONTAINER = "{spec: {containers: [{name: %s, image: busybox, command: [sh, -c, 'exit 0']}]}}"
TORCHRUN = "{spec: {containers: [{name: python, image: busybox, command: [python], args: [train.py]}]}}"

SPECS = {
    "PyTorchTrainingJob": f"""
kind: PyTorchTrainingJob
spec:
  replicaSpecs:
    - {{type: master, replicas: 1, restartPolicy: OnFailure, template: {CONTAINER % "pytorch"}}}
    - {{type: worker, replicas: 2, restartPolicy: OnFailure, template: {CONTAINER % "pytorch"}}}
""",
    "torchrun": f"""
kind: PyTorchTrainingJob
spec:
  torchrunConfig: {{enabled: true, procPerNode: "1"}}
  replicaSpecs:
    - {{type: node, replicas: 2, restartPolicy: OnFailure, template: {TORCHRUN}}}
""",
    "GenericJob": f"""
kind: GenericJob
spec:
  replicaSpecs:
    - {{type: worker, replicas: 2, template: {CONTAINER % "c"}}}
""",
    "DeepSpeedJob": f"""
kind: DeepSpeedJob
spec:
  config: {{slotsPerWorker: 1, run: {{python: [train.py]}}}}
  worker: {{replicas: 3, restartPolicy: OnFailure, template: {CONTAINER % "worker"}}}
""",
    "ColossalAIJob": f"""
kind: ColossalAIJob
spec:
  torchConfig: {{procPerWorker: 1, script: [train.py]}}
  replicaSpecs:
    - {{type: worker, replicas: 2, template: {CONTAINER % "worker"}}}
""",
}


def compiled(kind: str) -> JobView:
    text = "apiVersion: batch.tensorstack.dev/v1beta1\nmetadata: {name: j}\n" + SPECS[kind]
    record = next(o for o in compile_text(text) if o["apiVersion"].startswith("flatjob.dev/"))
    return record_job_view(record)


@pytest.mark.parametrize("kind", list(KIND_DEFAULTS))
def test_builder_defaults_match_compiled_records(kind: str) -> None:
    job = compiled(kind)
    d = KIND_DEFAULTS[kind]
    assert (job.scope, job.decider, job.backoff_limit, job.cleanup, job.launcher_kind) == (
        d["scope"], d["decider"], d["backoff_limit"], d["cleanup"], d["launcher_kind"],
    )
    types: dict[str, int] = {}
    for p in job.pods:
        types[p.type] = types.get(p.type, 0) + 1
    assert types == d["types"]
    assert tuple(p.name for p in job.pods if p.wave == 1) == d["wave1"]
    assert job.pods[0].rank == 0
    assert {r.policy for r in job.rules.values()} == {d["policy"]}


@pytest.mark.parametrize(
    ("spec", "scope", "launcher"),
    [
        pytest.param("torchrun", "pod", "torchrun", id="torchrun-is-pod-scoped"),
        pytest.param("PyTorchTrainingJob", "pod", None, id="plain-ddp-restarts-replicas-by-their-own-policy"),
    ],
)
def test_pytorch_scope_follows_torchrun(spec: str, scope: str, launcher: str | None) -> None:
    job = compiled(spec)
    assert (job.scope, job.launcher_kind) == (scope, launcher)


def test_generic_rules_carry_the_type_limit() -> None:
    job = compiled("GenericJob")
    assert job.rules == {"worker": RestartRule("OnFailure", 0)}
    assert job.success_rules == () and job.failure_rules == ()


def test_colossalai_launcher_is_first_and_named_without_index() -> None:
    job = compiled("ColossalAIJob")
    assert job.pods[0].name == "j-launcher" and job.pods[0].type == "launcher"


def test_elastic_without_torchrun_is_ignored_as_t9k_ignores_it() -> None:
    """T9k API reference: elastic "is effective only in torchrun mode" (lint warns, FJ302):
    the job renders and runs its replicas, not maxReplicas, and is not resized."""
    text = "apiVersion: batch.tensorstack.dev/v1beta1\nmetadata: {name: j}\n" + SPECS["PyTorchTrainingJob"].replace(
        "spec:\n", "spec:\n  elastic: {enabled: true, minReplicas: 1, maxReplicas: 6, expectedReplicas: 5}\n", 1
    )
    objects = compile_text(text)
    assert sorted(o["metadata"]["name"] for o in objects if o["kind"] == "Pod") == ["j-master-0", "j-worker-0", "j-worker-1"]
    job = record_job_view(next(o for o in objects if o["apiVersion"].startswith("flatjob.dev/")))
    assert (job.target, job.min_nodes, job.elastic) == (None, None, False)
    assert [p.seat for p in job.pods] == [None, None, None]
