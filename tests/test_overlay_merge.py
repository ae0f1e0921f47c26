"""Environment overlays: merges with T9k's list keys, JSON patches, whole-job fields, targets.

Covers the cases kustomize gets wrong on custom resources (kustomize#1027): one replicaSpec
patched by type, one env var in one container, a replica count; then the strategic-merge
directives, JSON 6902 operations, images/labels/annotations/namespace, target selection, and
that every problem (and every value an overlay sets) points at the overlay file's line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from overlaykit import DDP, container, env, overlay_run, replica, write
from propertykit import examples

from flatjob.compiler.overlay import load_overlays
from flatjob.compiler.overlay.target import MAX_SUBJECT, compile_target
from flatjob.compiler.pipeline import compile_paths

WORKER_PATCH = """\
patches:
  - patch:
      kind: PyTorchTrainingJob
      metadata: {name: ddp}
      spec:
        replicaSpecs:
          - type: worker
            replicas: 7
"""


# --- what kustomize gets wrong ----------------------------------------------------------


def test_one_replica_spec_is_patched_by_type(tmp_path: Path) -> None:
    (job,), problems = overlay_run(tmp_path, DDP, WORKER_PATCH)
    assert problems == []
    assert [r["type"] for r in job["spec"]["replicaSpecs"]] == ["master", "worker"]  # order kept
    assert replica(job, "worker")["replicas"] == 7
    assert replica(job, "master")["replicas"] == 1
    assert [c["name"] for c in replica(job, "worker")["template"]["spec"]["containers"]] == ["pytorch", "sidecar"]


def test_one_env_var_in_one_container(tmp_path: Path) -> None:
    overlay = """\
    patches:
      - patch:
          spec:
            replicaSpecs:
              - type: worker
                template:
                  spec:
                    containers:
                      - name: pytorch
                        env:
                          - {name: B, value: "20"}
                          - {name: C, value: "3"}
    """
    (job,), problems = overlay_run(tmp_path, DDP, overlay)
    assert problems == []
    assert env(job, "worker", "pytorch") == {"A": "1", "B": "20", "C": "3"}
    assert env(job, "worker", "sidecar") == {"A": "1"}
    assert env(job, "master", "pytorch") == {"A": "1", "B": "2"}
    assert container(job, "worker", "pytorch")["image"] == "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"


def test_replica_count_by_json_patch(tmp_path: Path) -> None:
    overlay = """\
    patches:
      - target: {kind: PyTorchTrainingJob}
        patch: |
          - {op: test, path: /spec/replicaSpecs/1/type, value: worker}
          - {op: replace, path: /spec/replicaSpecs/1/replicas, value: 5}
    """
    (job,), problems = overlay_run(tmp_path, DDP, overlay)
    assert problems == []
    assert replica(job, "worker")["replicas"] == 5


# --- keyed lists and directives ---------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "check"),
    [
        ("volumeMounts: [{name: data, readOnly: true}]", lambda c: c["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True}]),
        ("ports: [{name: metrics, containerPort: 9090}]", lambda c: c["ports"] == [{"name": "metrics", "containerPort": 9090}]),
        ("ports: [{containerPort: 8080, protocol: TCP}]", lambda c: c["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]),
        ("ports: [{containerPort: 7000}]", lambda c: [p["containerPort"] for p in c["ports"]] == [8080, 7000]),
        ("env: [{name: A, $patch: delete}]", lambda c: [e["name"] for e in c["env"]] == ["B"]),
        ("env: [{name: Z, $patch: delete}]", lambda c: [e["name"] for e in c["env"]] == ["A", "B"]),
        ("env: [{$patch: replace}, {name: Z, value: z}]", lambda c: c["env"] == [{"name": "Z", "value": "z"}]),
        ("command: [python, other.py]", lambda c: c["command"] == ["python", "other.py"]),
        ("env: null", lambda c: "env" not in c),
    ],
    ids=["volumeMounts-by-name", "ports-by-name", "ports-by-containerPort", "new-port-appended", "delete-item", "delete-missing-item", "replace-list", "atomic-list", "null-removes"],
)
def test_container_lists(tmp_path: Path, patch: str, check: object) -> None:
    overlay = f"""\
patches:
  - patch:
      spec:
        replicaSpecs:
          - type: worker
            template:
              spec:
                containers:
                  - name: pytorch
                    {patch}
"""
    (job,), problems = overlay_run(tmp_path, DDP, overlay)
    assert problems == []
    assert check(container(job, "worker", "pytorch")), container(job, "worker", "pytorch")  # type: ignore[operator]


def test_delete_a_container_and_replace_a_mapping(tmp_path: Path) -> None:
    overlay = """\
    patches:
      - patch:
          spec:
            replicaSpecs:
              - type: worker
                template:
                  spec:
                    containers:
                      - {name: sidecar, $patch: delete}
                    volumes:
                      - name: data
                        $patch: replace
                        persistentVolumeClaim: {claimName: shared}
    """
    (job,), problems = overlay_run(tmp_path, DDP, overlay)
    assert problems == []
    spec = replica(job, "worker")["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["pytorch"]
    assert spec["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}]


@pytest.mark.parametrize(
    ("item", "message", "line"),
    [
        ("- {image: x}", "a containers item in a patch needs 'name' to say which item it changes", 9),
        ("- {name: pytorch, $retainKeys: [image]}", "unsupported patch directive '$retainKeys'", 9),
        ("- {name: pytorch, $patch: merg}", "unknown $patch directive 'merg'", 9),
    ],
    ids=["no-key", "unsupported-directive", "typo-directive"],
)
def test_merge_errors_point_at_the_patch(tmp_path: Path, item: str, message: str, line: int) -> None:
    overlay = f"""\
patches:
  - patch:
      spec:
        replicaSpecs:
          - type: worker
            template:
              spec:
                containers:
                  {item}
"""
    _, problems = overlay_run(tmp_path, DDP, overlay)
    (problem,) = problems
    assert problem.code == "FJ601" and message in problem.message and "(patching job ddp)" in problem.message
    assert (problem.path, problem.line) == (str(tmp_path / "ov" / "overlay.yaml"), line)


def test_ambiguous_item_is_an_error(tmp_path: Path) -> None:
    job = DDP.replace("                - {name: data, mountPath: /data}\n", "                - {name: data, mountPath: /data}\n                - {name: data, mountPath: /ckpt, subPath: ckpt}\n")
    overlay = """\
    patches:
      - patch:
          spec:
            replicaSpecs:
              - type: worker
                template:
                  spec:
                    containers:
                      - name: pytorch
                        volumeMounts:
                          - {name: data, readOnly: true}
                          - {name: data, mountPath: /ckpt, readOnly: false}
    """
    _, problems = overlay_run(tmp_path, job, overlay)
    (problem,) = problems
    assert problem.code == "FJ601" and "2 volumeMounts items have name 'data'" in problem.message
    assert problem.line == 11 and problem.hint and "JSON 6902" in problem.hint


# --- JSON patches -----------------------------------------------------------------------


def test_json_patch_operations(tmp_path: Path) -> None:
    overlay = """\
    patches:
      - patch:
          - {op: add, path: /spec/replicaSpecs/0/template/spec/containers/0/env/0, value: {name: FIRST, value: "0"}}
          - {op: add, path: /spec/replicaSpecs/0/template/spec/containers/0/env/-, value: {name: LAST, value: "9"}}
          - {op: remove, path: /metadata/labels}
          - {op: copy, from: /spec/replicaSpecs/0/replicas, path: /spec/runPolicy}
          - {op: move, from: /spec/runPolicy, path: /spec/replicaSpecs/1/replicas}
    """
    (job,), problems = overlay_run(tmp_path, DDP, overlay)
    assert problems == []
    assert [e["name"] for e in container(job, "master", "pytorch")["env"]] == ["FIRST", "A", "B", "LAST"]
    assert "labels" not in job["metadata"] and "runPolicy" not in job["spec"]
    assert replica(job, "worker")["replicas"] == 1


@pytest.mark.parametrize(
    ("op", "message"),
    [
        ("{op: replace, path: /spec/nothing, value: 1}", "replace /spec/nothing: 'nothing' does not exist; use op: add to create it"),
        ("{op: remove, path: /spec/replicaSpecs/5}", "remove /spec/replicaSpecs/5: index 5 is out of range (the list has 2 items)"),
        ("{op: test, path: /spec/replicaSpecs/0/type, value: worker}", "test /spec/replicaSpecs/0/type: test failed: /spec/replicaSpecs/0/type is 'master'"),
        ("{op: add, path: spec, value: 1}", "is not a JSON pointer"),
    ],
    ids=["replace-missing", "index-out-of-range", "test-failed", "not-a-pointer"],
)
def test_json_patch_errors_point_at_the_operation(tmp_path: Path, op: str, message: str) -> None:
    overlay = f"""\
patches:
  - target: {{name: ddp}}
    patch:
      - {op}
"""
    _, problems = overlay_run(tmp_path, DDP, overlay)
    (problem,) = problems
    assert problem.code == "FJ601" and message in problem.message
    assert problem.line == 4 and problem.source_line is not None and "path:" in problem.source_line


# --- whole-job fields -------------------------------------------------------------------


def test_namespace_labels_annotations_images(tmp_path: Path) -> None:
    overlay = """\
    namespace: training-prod
    commonLabels: {env: prod}
    annotations: {example.com/owner: ml}
    images:
      - {name: pytorch/pytorch, newTag: "2.5"}
      - {name: busybox, newName: registry.local/busybox, digest: "sha256:abc123"}
    """
    (job,), problems = overlay_run(tmp_path, DDP, overlay)
    assert problems == []
    assert job["metadata"]["namespace"] == "training-prod"
    assert job["metadata"]["labels"] == {"team": "vision", "env": "prod"}
    assert job["metadata"]["annotations"] == {"example.com/owner": "ml"}
    for rtype in ("master", "worker"):
        template = replica(job, rtype)["template"]
        assert template["metadata"] == {"labels": {"env": "prod"}, "annotations": {"example.com/owner": "ml"}}
        assert container(job, rtype, "pytorch")["image"] == "pytorch/pytorch:2.5"
    assert container(job, "worker", "sidecar")["image"] == "registry.local/busybox@sha256:abc123"


def test_images_reach_the_colossalai_launcher(tmp_path: Path) -> None:
    job = """\
    apiVersion: batch.tensorstack.dev/v1beta1
    kind: ColossalAIJob
    metadata: {name: palm}
    spec:
      launcher: {image: hpcaitech/colossalai:0.3.0}
      worker:
        replicas: 2
        command: [train.py]
        template:
          spec:
            containers: [{name: worker, image: hpcaitech/colossalai:0.3.0}]
    """
    (out,), problems = overlay_run(tmp_path, job, "images: [{name: hpcaitech/colossalai, newTag: 0.4.0}]\n")
    assert problems == []
    assert out["spec"]["launcher"]["image"] == "hpcaitech/colossalai:0.4.0"
    assert out["spec"]["worker"]["template"]["spec"]["containers"][0]["image"] == "hpcaitech/colossalai:0.4.0"


# --- targets ----------------------------------------------------------------------------


def two_jobs() -> dict[str, str]:
    other = DDP.replace("name: ddp", "name: other").replace("labels: {team: vision}", "labels: {team: nlp}")
    return {"a.yaml": DDP, "b.yaml": other}


@pytest.mark.parametrize(
    ("target", "patched"),
    [
        ("target: {name: oth.*}", ["other"]),
        ("target: {labelSelector: 'team in (vision)'}", ["ddp"]),
        ("target: {labelSelector: '!team'}", []),
        ("target: {kind: PyTorchTrainingJob, namespace: ''}", ["ddp", "other"]),
        ("target: {annotationSelector: x=y}", []),
    ],
    ids=["name-regex", "label-in", "label-absent", "kind-and-empty-namespace", "annotation"],
)
def test_targets(tmp_path: Path, target: str, patched: list[str]) -> None:
    overlay = f"""\
patches:
  - {target}
    patch: {{spec: {{runPolicy: {{backoffLimit: 9}}}}}}
"""
    jobs, problems = overlay_run(tmp_path, two_jobs(), overlay)
    assert sorted(j["metadata"]["name"] for j in jobs if "runPolicy" in j["spec"]) == patched
    assert [p.code for p in problems] == ([] if patched else ["FJ600"])
    if not patched:
        assert problems[0].severity.value == "warning" and problems[0].line == 2


@settings(max_examples=examples(300), derandomize=True, deadline=None)
@given(
    pattern=st.text(alphabet="ab-_9.*+?", max_size=6),
    subject=st.one_of(st.none(), st.integers(), st.text(alphabet="ab-_9.", max_size=70)),
)
def test_a_target_without_special_characters_matches_as_its_expression_would(pattern: str, subject: object) -> None:
    """Plain names are compared, not parsed (5 000 kind targets cost 0.45 s of regex compiling)."""
    job = {"kind": subject, "metadata": {"name": subject}}
    for field in ("kind", "name"):
        try:
            target = compile_target({field: pattern})
        except ValueError:  # not an expression, or an unsafe one: refused either way
            continue
        expected = isinstance(subject, str) and len(subject) <= MAX_SUBJECT and re.fullmatch(pattern, subject) is not None
        assert target.matches(job) == expected


def test_a_patch_selects_by_its_own_kind_and_name(tmp_path: Path) -> None:
    jobs, problems = overlay_run(tmp_path, two_jobs(), WORKER_PATCH)
    assert problems == []
    assert {j["metadata"]["name"]: replica(j, "worker")["replicas"] for j in jobs} == {"ddp": 7, "other": 3}


# --- the overlay file -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "col", "message", "hint"),
    [
        ("namespce: x\n", 1, 1, "unknown overlay field 'namespce'", "did you mean 'namespace'?"),
        ("namePrefix: dev-\n", 1, 1, "namePrefix is not supported in a flatjob overlay", "a job's name is its identity"),
        ("patches:\n  - target: {kind: X}\n", 2, 5, "needs exactly one of path:", None),
        ("patches:\n  - patch: {}\n    targt: {}\n", 3, 5, "unknown patches field 'targt'", "did you mean 'target'?"),
        ("labels:\n  tier: 3\n", 2, 9, "the value of 'tier' must be a string", None),
        ("images:\n  - name: x\n", 2, 5, "an images entry needs newName, newTag or digest", None),
        ("kind: Kustomization\n", 1, 7, "kind must be Overlay", None),
        ("patches:\n  - patch: |\n      spec:\n        a: [\n", 4, 13, "YAML syntax error", None),  # libyaml: past the last line
        ("patches:\n  - patch:\n      - {op: mv, path: /a}\n", 3, 14, "op 'mv'; a JSON patch op is one of", None),
    ],
    ids=["typo", "kustomize-only-field", "no-patch", "typo-in-entry", "label-not-string", "image-without-change", "wrong-kind", "yaml-in-block", "bad-op"],
)
def test_overlay_file_errors(tmp_path: Path, text: str, line: int, col: int, message: str, hint: str | None) -> None:
    _, problems = overlay_run(tmp_path, DDP, text)
    assert problems, "expected a problem"
    first = problems[0]
    assert message in first.message
    assert (first.path, first.line, first.col) == (str(tmp_path / "ov" / "overlay.yaml"), line, col)
    if hint:
        assert first.hint and hint in first.hint


def test_a_folder_without_overlay_yaml(tmp_path: Path) -> None:
    write(tmp_path / "k", {"kustomization.yaml": "resources: []\n"})
    stack = load_overlays([tmp_path / "k"])
    (problem,) = stack.problems
    assert problem.code == "FJ602" and "no overlay.yaml" in problem.message
    assert problem.hint and "kustomization.yaml" in problem.hint


# --- end to end: errors after the merge point at the overlay ----------------------------


@pytest.mark.parametrize(
    ("overlay", "extra", "file", "line", "col"),
    [
        ("patches:\n  - patch:\n      spec:\n        replicaSpecs:\n          - type: worker\n            replicas: -1\n", {}, "overlay.yaml", 6, 23),
        ("patches:\n  - patch: |\n      spec:\n        replicaSpecs:\n          - type: worker\n            replicas: -1\n", {}, "overlay.yaml", 6, 23),
        ("patches:\n  - path: p.yaml\n", {"p.yaml": "spec:\n  replicaSpecs:\n    - type: worker\n      replicas: -1\n"}, "p.yaml", 4, 17),
    ],
    ids=["inline", "block-string", "patch-file"],
)
def test_validation_errors_point_at_the_overlay_line(tmp_path: Path, overlay: str, extra: dict[str, str], file: str, line: int, col: int) -> None:
    write(tmp_path / "jobs", {"job.yaml": DDP})
    write(tmp_path / "ov", {"overlay.yaml": overlay, **extra})
    result = compile_paths([str(tmp_path / "jobs")], overlay=load_overlays([tmp_path / "ov"]))
    (problem,) = [d for d in result.diagnostics if d.is_error]
    assert problem.message.startswith("spec.replicaSpecs[1].replicas: must be >= 0")
    assert (problem.path, problem.line, problem.col) == (str(tmp_path / "ov" / file), line, col)
    assert problem.source_line is not None and problem.source_line.strip().startswith("replicas: -1")


def test_stacked_overlays_and_inputs(tmp_path: Path) -> None:
    write(tmp_path / "jobs", {"job.yaml": DDP})
    write(tmp_path / "base", {"overlay.yaml": WORKER_PATCH})
    write(tmp_path / "gpu", {"overlay.yaml": "patches:\n  - patch: {spec: {replicaSpecs: [{type: worker, replicas: 8}]}}\n", "job-like.yaml": DDP})
    stack = load_overlays([tmp_path / "base", tmp_path / "gpu"])
    result = compile_paths([str(tmp_path)], overlay=stack)  # the overlay folders sit inside the source folder
    assert not result.failed, result.diagnostics
    (job,) = result.jobs  # gpu/job-like.yaml is inside an overlay folder: not a job
    assert next(r.replicas for r in job.plan.job.spec.replica_specs if r.type == "worker") == 8
    overlays = sorted(p.parent.name for p, _ in result.inputs if p.name == "overlay.yaml")
    assert overlays == ["base", "gpu"]  # overlay files are compile inputs (flatjob-meta.json)


def test_an_overlay_at_a_limit_stops_the_run_before_the_jobs_are_validated(tmp_path: Path) -> None:
    """FJ105 from an overlay ends the run, as reading does: a job's own finding (here an image
    that is not a string) is not reported from a run that never applied the overlay."""
    from flatjob.compiler.loader import load_paths
    from flatjob.compiler.overlay import load_overlays
    from flatjob.compiler.pipeline import CompileOptions, compile_documents

    write(tmp_path / "jobs", {"job.yaml": DDP.replace("image: busybox:1.36", "image: [busybox]")})
    write(tmp_path / "ov", {"overlay.yaml": "patches:\n" + "".join(f"  - {{target: {{kind: X{i}}}, patch: {{spec: {{}}}}}}\n" for i in range(1001))})
    result = compile_documents(load_paths([str(tmp_path / "jobs")]), CompileOptions(), load_overlays([tmp_path / "ov"]))
    assert [d.code for d in result.diagnostics] == ["FJ105"] and result.failed and not result.jobs
    unstopped = compile_documents(load_paths([str(tmp_path / "jobs")]), CompileOptions())
    assert any(d.code != "FJ105" and d.is_error for d in unstopped.diagnostics)  # the job's own finding, without the overlay
