"""Properties of run modes and scheduling over random jobs of every kind.

- Debug output never runs the training command: every pod's training container runs the
  debug command (the replicaSpecs override, else the kind's default) and nothing else.
- A T9k PodGroup's minMember matches the pods the runtime releases first: all pods, or for
  an elastic job the first minReplicas seats (which the runtime releases with the rest of
  the first expectedReplicas), with per-role minimums summing to minMember.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from manifestkit import objects_of, pods_of
from propertykit import examples
from strategies import pytorch_jobs

from flatjob.compiler.loader import Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents
from flatjob.runtime.decisions import World, reconcile
from flatjob.runtime.job import job_view
from flatjob.runtime.model import Ledger, PodState

API = "batch.tensorstack.dev/v1beta1"
TRAIN = ["python", "train.py"]


def _manifests(job: dict[str, Any]) -> list[dict[str, Any]]:
    docs, problems = parse(yaml.safe_dump(job), "job.yaml")
    assert not problems
    result = compile_documents(Loaded(jobs=docs), CompileOptions())
    assert not result.failed, [d.message for d in result.diagnostics]
    return objects_of(result.jobs[0].files)


def _container(name: str, image: str = "img") -> dict[str, Any]:
    return {"name": name, "image": image, "command": TRAIN[:1], "args": TRAIN[1:]}


@st.composite
def debug_jobs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A job of any kind in debug mode, and the debug command expected per replica type."""
    kind = draw(st.sampled_from(["PyTorchTrainingJob", "GenericJob", "DeepSpeedJob", "ColossalAIJob"]))
    override = draw(st.lists(st.sampled_from(["sleep", "3600", "/bin/bash", "-c", "x y"]), min_size=1, max_size=3))
    use_override = draw(st.booleans())
    if kind == "DeepSpeedJob":
        types, default = ["worker"], ["/bin/sh", "/flatjob/sshd.sh"]
        spec: dict[str, Any] = {"config": {"run": {"python": TRAIN[1:]}}, "worker": {"replicas": draw(st.integers(1, 3)), "template": {"spec": {"containers": [_container("worker")]}}}}
    elif kind == "ColossalAIJob":
        types, default = ["launcher", "worker"], ["sleep", "inf"]
        spec = {"torchConfig": {"script": TRAIN[1:]}, "replicaSpecs": [{"type": "worker", "replicas": draw(st.integers(1, 3)), "template": {"spec": {"containers": [_container("worker")]}}}]}
    else:
        types = draw(st.lists(st.sampled_from(["master", "worker", "ps"]), min_size=1, max_size=3, unique=True))
        default = ["sleep", "inf"]
        name = "python" if kind == "PyTorchTrainingJob" else "main"
        spec = {"replicaSpecs": [{"type": t, "replicas": draw(st.integers(1, 2)), "template": {"spec": {"containers": [_container(name)]}}} for t in types]}
        if kind == "PyTorchTrainingJob" and draw(st.booleans()):
            spec["torchrunConfig"] = {"enabled": True}
    chosen = draw(st.sampled_from(types)) if use_override else None
    debug: dict[str, Any] = {"enabled": True}
    if chosen is not None:
        debug["replicaSpecs"] = [{"type": chosen, "command": override}]
    spec["runMode"] = {"debug": debug}
    expected = {t: (override if t == chosen else default) for t in types}
    return {"apiVersion": API, "kind": kind, "metadata": {"name": "dbg"}, "spec": spec}, expected


@settings(max_examples=examples(60), deadline=None, derandomize=True)
@given(debug_jobs())
def test_debug_output_never_runs_the_training_command(case: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    job, expected = case
    pods = pods_of(_manifests(job))
    assert pods
    for pod in pods:
        rtype = pod["metadata"]["labels"]["flatjob.dev/replica-type"]
        for c in pod["spec"]["containers"]:
            argv = [*c.get("command", []), *c.get("args", [])]
            assert argv != TRAIN and "/flatjob/launch.sh" not in argv and argv[:1] != ["torchrun"], (pod["metadata"]["name"], argv)
        training = [c for c in pod["spec"]["containers"] if c["name"] in ("python", "main", "worker", "launcher")]
        assert training[0]["command"] == expected[rtype] and "args" not in training[0]


@st.composite
def scheduled_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """A PyTorchTrainingJob (elastic or not) or GenericJob with a T9k Scheduler queue."""
    if draw(st.booleans()):
        job = draw(pytorch_jobs())
    else:
        types = draw(st.lists(st.sampled_from(["master", "worker", "ps"]), min_size=1, max_size=3, unique=True))
        job = {
            "apiVersion": API,
            "kind": "GenericJob",
            "metadata": {"name": "gen"},
            "spec": {"replicaSpecs": [{"type": t, "replicas": draw(st.integers(1, 4)), "template": {"spec": {"containers": [_container("main")]}}} for t in types]},
        }
    job["spec"]["scheduler"] = {"t9kScheduler": {"queue": "q", "priority": draw(st.integers(0, 100))}}
    return job


@settings(max_examples=examples(60), deadline=None, derandomize=True)
@given(scheduled_jobs())
def test_podgroup_min_member_matches_the_first_release(job: dict[str, Any]) -> None:
    manifests = _manifests(job)
    groups = [m for m in manifests if m["kind"] == "PodGroup"]
    pods = pods_of(manifests)
    record = next(m for m in manifests if m["apiVersion"] == "flatjob.dev/v1beta1")
    if not pods:
        return
    group = groups[0]["spec"]
    assert "roles" not in group  # a T9k job's PodGroup has none (UM use-podgroup.md)
    templates = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "PodTemplate"}
    view = job_view({**record, "metadata": {**record["metadata"], "generation": 1}}, templates)
    observed = {p["metadata"]["name"]: PodState(p["metadata"]["name"], f"uid-{i}", spec_hash=p["metadata"]["annotations"]["flatjob.dev/spec-hash"], attempt=1) for i, p in enumerate(pods)}
    released = {a.name for a in reconcile(view, observed, Ledger(), World(), None, 0.0).actions if a.kind == "release"}
    elastic = (record["spec"].get("elastic") or {}).get("enabled")
    if not elastic:
        assert group["minMember"] == len(pods) == len(released)
        return
    e = record["spec"]["elastic"]
    assert group["minMember"] == e["minReplicas"]
    assert len(released) == max(e["minReplicas"], min(e["expectedReplicas"], e["maxReplicas"]))
    first_seats = {p.name for p in view.pods if p.seat is not None and p.seat < e["minReplicas"]}
    assert first_seats <= released


# --- debug mode: a startup probe only where its command serves ssh ---

COLOSSAL_DEBUG = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: ColossalAIJob
metadata:
  name: cai
spec:
  torchConfig: {procPerWorker: 1, script: [train.py]}
  runMode:
    debug:
      enabled: true
  replicaSpecs:
    - type: worker
      replicas: 2
      template:
        spec:
          containers:
            - {name: worker, image: "hpcaitech/colossalai:0.3.0"}
"""

DEEPSPEED_DEBUG = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata:
  name: ds
spec:
  config: {slotsPerWorker: 1, run: {python: [train.py]}}
  runMode:
    debug:
      enabled: true
      replicaSpecs:
        - {type: worker, command: [sleep, inf]}
  worker:
    replicas: 2
    template:
      spec:
        containers:
          - {name: worker, image: "deepspeed:latest"}
"""


@pytest.mark.parametrize("text", [COLOSSAL_DEBUG, DEEPSPEED_DEBUG], ids=["colossalai-default", "deepspeed-user-command"])
def test_a_debug_pod_that_runs_no_sshd_has_no_ssh_startup_probe(text: str) -> None:
    """T9k's debug mode keeps the environment up, running `sleep inf` (ColossalAI's default, UC
    colossalaijob.md 调试模式) or the user's command. A TCP startup probe on 22 that nothing
    answers fails after 300 x 2 s: the kubelet kills the container and, restartPolicy Never, the
    pod fails: the debug session died after 10 minutes (review of round 14). DeepSpeed's default
    debug command, flatjob's sshd script, keeps it (golden debug-deepspeed-default-sshd)."""
    objs = _manifests(yaml.safe_load(text))
    assert [o for o in objs if o["kind"] == "PodTemplate"]
    for t in (o for o in objs if o["kind"] == "PodTemplate"):
        for c in t["template"]["spec"]["containers"]:
            if c.get("command") == ["sleep", "inf"]:
                assert "startupProbe" not in c, (t["metadata"]["name"], c["startupProbe"])
