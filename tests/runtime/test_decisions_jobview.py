"""runtime.job.job_view against what the compiler renders: a record and its PodTemplates.

The decision tables build JobViews by hand (tests/runtime/builders.py); this module compiles
one small job of each kind with compile_documents, feeds the record and its PodTemplates to
job_view, and checks that scope, decider, launcher, limits, clean-up, waves and restart
rules are what the builders assume, that each pod is read from its own PodTemplate, and that
PodTemplates out of step with the record (missing, extra, renamed, edited out of shape) set
`problem`, under which the runtime creates nothing and deletes nothing that runs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flatjob.compiler import keys
from flatjob.runtime.job import job_view
from flatjob.runtime.model import JobView, Ledger, RestartRule

from .builders import KIND_DEFAULTS, NOW, acts, compiled, cycle, gated, observed, pod

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
    "elastic": f"""
kind: PyTorchTrainingJob
spec:
  torchrunConfig: {{enabled: true, procPerNode: "1"}}
  elastic: {{enabled: true, minReplicas: 2, maxReplicas: 4, expectedReplicas: 3}}
  scheduler: {{t9kScheduler: {{queue: research}}}}
  replicaSpecs:
    - {{type: node, replicas: 4, restartPolicy: OnFailure, template: {TORCHRUN}}}
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


def source(kind: str) -> str:
    return "apiVersion: batch.tensorstack.dev/v1beta1\nmetadata: {name: j}\n" + SPECS[kind]


def view(kind: str) -> JobView:
    return job_view(*compiled(source(kind)))


# --- the builders' defaults are the compiled kinds' ------------------------------------------

@pytest.mark.parametrize("kind", list(KIND_DEFAULTS))
def test_builder_defaults_match_compiled_records(kind: str) -> None:
    job = view(kind)
    d = KIND_DEFAULTS[kind]
    assert job.problem is None
    assert (job.scope, job.decider, job.backoff_limit, job.cleanup, job.launcher_kind) == (
        d["scope"], d["decider"], d["backoff_limit"], d["cleanup"], d["launcher_kind"],
    )
    types: dict[str, int] = {}
    for p in job.pods:
        types[p.type] = types.get(p.type, 0) + 1
    assert types == d["types"]
    assert tuple(p.name for p in job.pods if p.wave == 1) == d["wave1"]
    assert [p.rank for p in job.pods] == list(range(len(job.pods)))
    assert {r.policy for r in job.rules.values()} == {d["policy"]}


@pytest.mark.parametrize("kind", list(KIND_DEFAULTS))
def test_each_pod_is_read_from_its_own_podtemplate(kind: str) -> None:
    """Name, type, index, rank, wave, training container and spec-hash come from the
    PodTemplate git holds (the runtime never renders a pod)."""
    record, templates = compiled(source(kind))
    job = job_view(record, templates)
    assert {p.name for p in job.pods} == set(templates)
    for p in job.pods:
        t = templates[p.name]
        notes, labels = t["metadata"]["annotations"], t["metadata"]["labels"]
        assert p.spec_hash == t["template"]["metadata"]["annotations"][keys.SPEC_HASH]
        assert (p.type, str(p.index)) == (labels[keys.REPLICA_TYPE], labels[keys.REPLICA_INDEX])
        assert (str(p.rank), str(p.wave)) == (notes[keys.RANK], notes[keys.WAVE])
        assert p.container == notes.get(keys.TRAINING_CONTAINER)
        assert p.seat is None


@pytest.mark.parametrize(
    ("spec", "scope", "launcher"),
    [
        pytest.param("torchrun", "pod", "torchrun", id="torchrun-is-pod-scoped"),
        pytest.param("PyTorchTrainingJob", "pod", None, id="plain-ddp-restarts-replicas-by-their-own-policy"),
    ],
)
def test_pytorch_scope_follows_torchrun(spec: str, scope: str, launcher: str | None) -> None:
    job = view(spec)
    assert (job.scope, job.launcher_kind) == (scope, launcher)


def test_generic_rules_carry_the_type_limit() -> None:
    job = view("GenericJob")
    assert job.rules == {"worker": RestartRule("OnFailure", 0)}
    assert job.success_rules == () and job.failure_rules == ()


@pytest.mark.parametrize(("kind", "secret"), [("DeepSpeedJob", "j-ssh"), ("ColossalAIJob", "j-ssh"), ("PyTorchTrainingJob", None), ("GenericJob", None)])
def test_ssh_kinds_wait_for_their_secret(kind: str, secret: str | None) -> None:
    assert view(kind).ssh_secret == secret


def test_colossalai_launcher_is_first_and_named_without_index() -> None:
    job = view("ColossalAIJob")
    assert job.pods[0].name == "j-launcher" and job.pods[0].type == "launcher"


def test_elastic_seats_target_and_podgroup_come_from_the_record_and_templates() -> None:
    """Seats from each PodTemplate's annotation; the target is expectedReplicas clamped to
    [minReplicas, maxReplicas]; a PodGroup is waited for when the templates name one."""
    job = view("elastic")
    assert (job.target, job.min_nodes, job.elastic, job.podgroup) == (3, 2, True, True)
    assert [p.seat for p in job.pods] == [0, 1, 2, 3]
    assert [p.name for p in job.wanted()] == ["j-node-0", "j-node-1", "j-node-2"]


def test_elastic_without_torchrun_is_ignored_as_t9k_ignores_it() -> None:
    """T9k API reference: elastic "is effective only in torchrun mode" (lint warns, FJ302):
    the job renders and runs its replicas, not maxReplicas, and is not resized."""
    text = source("PyTorchTrainingJob").replace("spec:\n", "spec:\n  elastic: {enabled: true, minReplicas: 1, maxReplicas: 6, expectedReplicas: 5}\n", 1)
    record, templates = compiled(text)
    assert sorted(templates) == ["j-master-0", "j-worker-0", "j-worker-1"]
    job = job_view(record, templates)
    assert (job.target, job.min_nodes, job.elastic, job.problem) == (None, None, False, None)
    assert [p.seat for p in job.pods] == [None, None, None]


# --- PodTemplates out of step with the record: `problem` ----------------------------------------

Templates = dict[str, dict[str, Any]]


def _without(name: str) -> Callable[[Templates], None]:
    def edit(ts: Templates) -> None:
        del ts[name]
    return edit


def _extra(ts: Templates) -> None:
    copy_ = copy.deepcopy(ts["j-worker-1"])
    copy_["metadata"]["name"] = "j-worker-3"
    ts["j-worker-3"] = copy_


def _renamed(ts: Templates) -> None:
    t = ts.pop("j-worker-1")
    t["metadata"]["name"] = "j-worker-9"
    ts["j-worker-9"] = t


def _note(name: str, key: str, value: str | None, where: str = "metadata") -> Callable[[Templates], None]:
    """Set (or with None remove) an annotation or label of one PodTemplate."""
    def edit(ts: Templates) -> None:
        meta = ts[name]["template"]["metadata"] if where == "pod" else ts[name]["metadata"]
        section = meta.setdefault("labels" if key.startswith("flatjob.dev/replica-") else "annotations", {})
        if value is None:
            section.pop(key, None)
        else:
            section[key] = value
    return edit


OUT_OF_STEP = "waiting for the job's PodTemplates to match the record"


def missing(*names: str, kind: str = "DeepSpeedJob") -> str:
    """What the problem adds: the first missing templates, and what may have become of them."""
    return f"; not found with its labels ({keys.JOB_KIND}={kind}): {', '.join(names)} (not applied yet, deleted, or rendered by a job of another kind named j, from another folder)"
SHAPE = "waiting for the job's PodTemplates: PodTemplate j-worker-1:"

# edit of the compiled DeepSpeedJob's three PodTemplates: problem, pods still seen
PROBLEMS = [
    pytest.param(lambda ts: None, None, 3, id="as-compiled"),
    pytest.param(_without("j-worker-1"), f"{OUT_OF_STEP} (2 present, 3 expected){missing('j-worker-1')}", 2, id="one-missing"),
    pytest.param(lambda ts: ts.clear(), f"{OUT_OF_STEP} (0 present, 3 expected){missing('j-worker-0', 'j-worker-1', 'j-worker-2')}", 0, id="none-yet"),
    # A PodTemplate of a name the record does not render is not the job's: anyone who may write
    # in the namespace can make one with its labels (before issue 21, it stalled the job).
    pytest.param(_extra, None, 3, id="one-extra-is-ignored"),
    pytest.param(_renamed, f"{OUT_OF_STEP} (2 present, 3 expected){missing('j-worker-1')}", 2, id="one-renamed-is-missing"),
    pytest.param(_note("j-worker-1", keys.RANK, "x"), f"{SHAPE} annotation {keys.RANK} is 'x', not a number", 0, id="rank-not-a-number"),
    pytest.param(_note("j-worker-1", keys.WAVE, None), f"{SHAPE} annotation {keys.WAVE} is None, not a number", 0, id="wave-missing"),
    pytest.param(_note("j-worker-1", keys.SEAT, "-1"), f"{SHAPE} annotation {keys.SEAT} is '-1', not a number", 0, id="seat-negative"),
    pytest.param(_note("j-worker-1", keys.RANK, "\u0661"), f"{SHAPE} annotation {keys.RANK} is '\u0661', not a number", 0, id="rank-non-ascii-digit"),
    pytest.param(_note("j-worker-1", keys.REPLICA_INDEX, "one"), f"{SHAPE} annotation {keys.REPLICA_INDEX} is 'one', not a number", 0, id="index-not-a-number"),
    pytest.param(_note("j-worker-1", keys.SPEC_HASH, None, where="pod"),
                 f"{SHAPE} no {keys.REPLICA_TYPE} label or {keys.SPEC_HASH} annotation", 0, id="spec-hash-missing"),
    pytest.param(_note("j-worker-1", keys.REPLICA_TYPE, None),
                 f"{SHAPE} no {keys.REPLICA_TYPE} label or {keys.SPEC_HASH} annotation", 0, id="type-missing"),
    pytest.param(lambda ts: ts["j-worker-1"]["template"]["spec"].pop("schedulingGates"),
                 f"{SHAPE} its pod has no {keys.RELEASE_GATE} scheduling gate, so it would run before its gang exists", 0, id="gate-removed"),
    # A kubelet restarts an OnFailure or Always pod's program in place: the phase stays Running,
    # the crash loop unseen by ExitCode, backoffLimit and the record (review 23, round 15).
    *(pytest.param(lambda ts, p=p: ts["j-worker-1"]["template"]["spec"].update(restartPolicy=p) if p else ts["j-worker-1"]["template"]["spec"].pop("restartPolicy"),
                   f"{SHAPE} its pod's restartPolicy is {p or 'Always'!r}, not 'Never', so its kubelet would restart the program in place, "
                   "unseen by the job's restart policy, its limits and its status", 0, id=f"restart-policy-{p or 'unset'}")
      for p in ("OnFailure", "Always", None)),
    pytest.param(lambda ts: ts["j-worker-1"]["template"]["metadata"]["labels"].pop(keys.JOB_NAME),
                 f"{SHAPE} its pod is not labelled {keys.JOB_NAME}=j, so the runtime could not watch it", 0, id="pod-job-label-removed"),
    pytest.param(lambda ts: ts["j-worker-1"]["template"]["metadata"]["labels"].update({keys.JOB_NAME: "other"}),
                 f"{SHAPE} its pod is not labelled {keys.JOB_NAME}=j, so the runtime could not watch it", 0, id="pod-job-label-changed"),
]


@pytest.mark.parametrize(("edit", "problem", "seen"), PROBLEMS)
def test_podtemplates_out_of_step_with_the_record_are_a_problem(edit: Callable[[Templates], None], problem: str | None, seen: int) -> None:
    record, templates = compiled(source("DeepSpeedJob"))
    edit(templates)
    job = job_view(record, templates)
    assert job.problem == problem
    assert len(job.pods) == seen


@pytest.mark.parametrize("policy", ["OnFailure", "Always", None, "Never"])
def test_a_template_restart_policy_other_than_never_is_a_problem_also_as_cached(policy: str | None) -> None:
    """The runtime's cache keeps a template's pod spec as bytes, its restartPolicy beside them."""
    from flatjob.runtime import trim

    record, templates = compiled(source("DeepSpeedJob"))
    spec = templates["j-worker-1"]["template"]["spec"]
    spec.pop("restartPolicy")
    if policy is not None:
        spec["restartPolicy"] = policy
    job = job_view(record, {n: trim.template(t) for n, t in templates.items()})
    assert (job.problem or "").startswith(f"{SHAPE} its pod's restartPolicy is {policy or 'Always'!r}") == (policy != "Never")
    assert (job.problem is None) == (policy == "Never")


def test_a_record_revision_ahead_of_its_templates_is_a_problem() -> None:
    """A commit that adds a replica: the record arrives before the new PodTemplate."""
    record, _ = compiled(source("DeepSpeedJob").replace("replicas: 3", "replicas: 4"))
    _, templates = compiled(source("DeepSpeedJob"))
    assert job_view(record, templates).problem == f"{OUT_OF_STEP} (3 present, 4 expected){missing('j-worker-3')}"


@pytest.mark.parametrize(("edit", "problem", "seen"), [p for p in PROBLEMS if p.values[1] is not None])
def test_a_problem_creates_nothing_and_stops_nothing_that_runs(edit: Callable[[Templates], None], problem: str, seen: int) -> None:
    """While the templates are out of step the runtime waits, saying why: it creates no pod
    and neither deletes running pods nor starts a new attempt for templates it cannot see."""
    record, templates = compiled(source("DeepSpeedJob"))
    edit(templates)
    job = job_view(record, templates)
    names = ("j-worker-0", "j-worker-1", "j-worker-2")

    fresh = cycle(job, gated(job, *(p.name for p in job.pods)))
    assert acts(fresh, "create", "release") == ()
    assert fresh.wait == problem

    pods = observed(*(pod(n, "Running", spec_hash=_hash(templates, n)) for n in names))
    led = Ledger(released=names, start_time=NOW - 60, size=None)
    running = cycle(job, pods, led)
    assert acts(running) == ()
    assert (running.ledger.attempt, running.ledger.released) == (1, names)


@pytest.mark.parametrize(("edit", "problem", "seen"), [p for p in PROBLEMS if p.values[1] is not None])
def test_a_problem_leaves_the_pods_the_record_owns_counted_and_listed(edit: Callable[[Templates], None], problem: str, seen: int) -> None:
    """A pod the record names and owns still runs as the job's while its PodTemplate is gone or
    unusable (a namesake of another kind applied over it): the status counts and lists it, where
    two of three running pods said `running: 1` (or 0) and their type was not listed; a pod of
    that name the record does not own (the namesake's) is neither."""
    from flatjob.runtime.decisions.status import build_status
    from flatjob.runtime.model import NamedPod

    record, templates = compiled(source("DeepSpeedJob"))
    edit(templates)
    job = job_view(record, templates)
    names = ("j-worker-0", "j-worker-1", "j-worker-2")
    assert {n.name for n in job.unplanned} | {p.name for p in job.pods} == set(names)
    assert all(n == NamedPod(n.name, "worker", int(n.name[-1])) for n in job.unplanned)
    led = Ledger(released=names, start_time=NOW - 60, size=None)
    status = build_status(job, observed(*(pod(n, "Running") for n in names)), led, None, NOW)
    assert status["aggregate"]["running"] == 3
    assert [(t["type"], [r["name"] for r in t["replicas"]]) for t in status["tasks"]] == [("worker", list(names))]
    theirs = observed(*(pod(n, "Running", ours=n in {p.name for p in job.pods}) for n in names))
    assert build_status(job, theirs, led, None, NOW)["aggregate"]["running"] == seen


def test_a_job_whose_templates_are_whole_names_no_unplanned_pod() -> None:
    record, templates = compiled(source("DeepSpeedJob"))
    assert job_view(record, templates).unplanned == ()


def _hash(templates: Templates, name: str) -> str | None:
    t = templates.get(name)
    return t["template"]["metadata"]["annotations"].get(keys.SPEC_HASH) if t else None


@pytest.mark.parametrize("case", sorted(p.name for p in (Path(__file__).resolve().parents[1] / "golden").iterdir() if (p / "job.yaml").is_file()))
def test_a_job_view_never_reads_what_the_record_keeps_of_anyones(case: str) -> None:
    """A dense record's spec is read without the fields where the CRD keeps unknown fields
    (trim.UNREAD: its pod templates, the launcher's env and resources, the Service's ports,
    trim.spec_of: runtime.sieve), so 1.3 MB of junk a tenant put under one costs nothing kept,
    not ~47 MiB parsed and typed. That is sound only if the job's view never depends on them
    (its pods come from the PodTemplates): for every golden job, the view is the same with
    them emptied."""
    from flatjob.compiler.options import CompileOptions
    from flatjob.runtime.trim import UNREAD, template

    from .harness import NAMESPACE, compile_text

    text = (Path(__file__).resolve().parents[1] / "golden" / case / "job.yaml").read_text(encoding="utf-8")
    manifests = compile_text(text, CompileOptions(namespace=NAMESPACE, runtime="namespace"))  # type: ignore[arg-type]
    for record in [o for o in manifests if o["apiVersion"] == keys.RECORD_API_VERSION]:
        name = record["metadata"]["name"]
        templates = {o["metadata"]["name"]: template(o) for o in manifests if o["kind"] == "PodTemplate" and (o["metadata"].get("labels") or {}).get(keys.JOB_NAME) == name}
        emptied = copy.deepcopy(record)
        spec = emptied["spec"]
        for group in [*(spec.get("replicaSpecs") or []), *(spec.get(k) or {} for k in ("worker", "launcher", "service", "tensorboardSpec"))]:
            for key in UNREAD:
                if key in group:
                    group[key] = {} if isinstance(group[key], dict) else []
        assert emptied != record or not any(k in json.dumps(record["spec"]) for k in UNREAD), case
        assert job_view(emptied, templates) == job_view(record, templates), case
