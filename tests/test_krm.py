"""`flatjob krm`: the KRM function (kustomize exec plugins, kpt).

Covers: a ResourceList piped through the command: T9k jobs replaced in place by their
rendered manifests, other items passed through untouched (comments, internal annotations);
functionConfig options; the generator form (the job as functionConfig); problems in
results[] with resourceRef, field path, file path and index, exit 1 and the items unchanged;
then kpt (source | krm | sink, and a Kptfile pipeline) and kustomize's exec transformer where
the tools exist (kubectl's built-in kustomize cannot run exec functions: skipped).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from overlaykit import DDP, write

from flatjob.compiler.krm import PLAIN_WRITE_BYTES, run

BIN = Path(sys.executable).parent
FLATJOB = BIN / "flatjob"


def resource_list(*items: str, config: str | None = None) -> str:
    body = "".join("- " + textwrap.indent(textwrap.dedent(i), "  ")[2:] for i in items)
    text = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n"
    if config:
        text += "functionConfig:\n" + textwrap.indent(textwrap.dedent(config), "  ")
    return text + "items:\n" + body


KEEP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: keep-me  # a comment kpt writes back
  annotations:
    internal.config.kubernetes.io/path: other.yaml
    internal.config.kubernetes.io/index: '0'
data: {a: b}
"""


def job_item(job: str = DDP, path: str = "jobs/ddp.yaml", index: str = "0") -> str:
    data = yaml.safe_load(job)
    data["metadata"]["annotations"] = {"internal.config.kubernetes.io/path": path, "internal.config.kubernetes.io/index": index, "config.kubernetes.io/index": index}
    return yaml.safe_dump(data, sort_keys=False)


def parse(text: str) -> dict[str, Any]:
    out = yaml.safe_load(text)
    assert out["apiVersion"] == "config.kubernetes.io/v1" and out["kind"] == "ResourceList"
    return out


def test_pipe_a_resource_list_through_the_command() -> None:
    text = resource_list(KEEP, job_item(), KEEP.replace("keep-me", "after"), config="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fc}\ndata: {namespace: team-a}\n")
    done = subprocess.run([str(FLATJOB), "krm"], input=text, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "name: keep-me  # a comment kpt writes back" in done.stdout
    items = parse(done.stdout)["items"]
    assert [i["metadata"]["name"] for i in (items[0], items[-1])] == ["keep-me", "after"]
    assert items[0] == yaml.safe_load(KEEP)  # untouched, internal annotations included
    generated = items[1:-1]
    assert {i["kind"] for i in generated} >= {"PyTorchTrainingJob", "Service", "PodTemplate", "Deployment"}
    assert all(i["metadata"]["namespace"] == "team-a" for i in generated)
    paths = [i["metadata"]["annotations"]["internal.config.kubernetes.io/path"] for i in generated]
    assert "jobs/ddp/podtemplates.yaml" in paths  # where kpt sink writes
    assert set(paths[-4:]) == {"jobs/runtime.yaml"} and all(p.startswith("jobs/ddp/") for p in paths[:-4])  # then the namespace's runtime
    record = next(i for i in generated if i["apiVersion"] == "flatjob.dev/v1beta1")
    assert not any(k.startswith("config.kubernetes.io/") for k in record["metadata"]["annotations"])


def test_generator_form_renders_the_function_config() -> None:
    out, status = run("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n" + textwrap.indent(DDP, "  "))
    assert status == 0
    assert sum(i["kind"] == "PodTemplate" for i in parse(out)["items"]) == 4


def test_problems_are_results_with_references() -> None:
    text = resource_list(KEEP, job_item(DDP.replace("replicas: 3", "replicas: -3"), "jobs/ddp.yaml", "2"))
    out, status = run(text)
    assert status == 1
    parsed = parse(out)
    assert [i["metadata"]["name"] for i in parsed["items"]] == ["keep-me", "ddp"]  # unchanged
    (problem,) = parsed["results"]
    assert problem == {
        "message": "spec.replicaSpecs[1].replicas: must be >= 0, got -3 [FJ204]",
        "severity": "error",
        "resourceRef": {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob", "name": "ddp"},
        "file": {"path": "jobs/ddp.yaml", "index": 2},
        "field": {"path": "spec.replicaSpecs[1].replicas"},
        "tags": {"code": "FJ204", "name": "bad-value"},
    }


def test_an_item_of_a_t9k_kind_under_another_group_is_fj102() -> None:
    """As lint and compile say of a file (loader.foreign_group_job): passed through, the job a
    newcomer copied with another apiVersion would vanish from the output unsaid. A Kubeflow
    PyTorchJob beside the jobs is not one of ours and still passes."""
    copied = "apiVersion: kubeflow.org/v1\nkind: GenericJob\nmetadata:\n  name: copied\n  annotations:\n    internal.config.kubernetes.io/path: copied.yaml\n"
    out, status = run(resource_list(job_item(), copied))
    assert status == 1
    parsed = parse(out)
    assert [i["metadata"]["name"] for i in parsed["items"]] == ["ddp", "copied"]  # unchanged
    (problem,) = parsed["results"]
    assert problem["resourceRef"] == {"apiVersion": "kubeflow.org/v1", "kind": "GenericJob", "name": "copied"}
    assert problem["file"] == {"path": "copied.yaml"} and problem["field"] == {"path": "apiVersion"}
    assert problem["tags"] == {"code": "FJ102", "name": "no-job"}
    assert "did you mean apiVersion: batch.tensorstack.dev/v1beta1?" in problem["message"]
    kubeflow = copied.replace("kind: GenericJob", "kind: PyTorchJob")
    assert run(resource_list(job_item(), kubeflow))[1] == 0


@pytest.mark.parametrize("kind, name", [("Service", "ddp"), ("PodTemplate", "ddp-worker-0"), ("ServiceAccount", "flatjob")])
def test_an_item_passed_through_that_a_job_also_renders_is_an_error(kind: str, name: str) -> None:
    """hx22: an item of the list that is one of the objects a job renders (its Service, a pod's
    PodTemplate, the namespace runtime's ServiceAccount) went out beside the job's own, exit 0:
    kustomize refuses two resources of one id, and applied, one would replace the other."""
    mine = f"apiVersion: v1\nkind: {kind}\nmetadata:\n  name: {name}\n  annotations:\n    internal.config.kubernetes.io/path: mine.yaml\n"
    out, status = run(resource_list(job_item(), mine))
    assert status == 1
    parsed = parse(out)
    assert [i["metadata"]["name"] for i in parsed["items"]] == ["ddp", name]  # unchanged
    (problem,) = parsed["results"]
    assert problem["resourceRef"] == {"apiVersion": "v1", "kind": kind, "name": name} and problem["file"] == {"path": "mine.yaml"}
    assert problem["tags"]["code"] == "FJ323" and "also rendered by the job of items[0]" in problem["message"]
    other = mine.replace(f"name: {name}\n", f"name: {name}\n  namespace: elsewhere\n")  # another namespace: no collision
    assert run(resource_list(job_item(), other))[1] == 0


def test_a_large_failing_input_gets_its_items_back_as_data_without_comments() -> None:
    """Past PLAIN_WRITE_BYTES a failing run writes the items back with PyYAML (kpt and kustomize
    discard a failing function's items; ruamel's round trip of a 1 MiB value cost 0.65 s)."""
    pad = "x" * PLAIN_WRITE_BYTES
    bad = DDP.replace("replicas: 3", "replicas: -3")
    for size, comment_kept in ((0, True), (len(pad), False)):
        keep = KEEP.replace("data: {a: b}", f"data: {{a: b, pad: '{pad[:size]}'}}")
        text = resource_list(keep, job_item(bad))
        out, status = run(text)
        assert status == 1 and ("# a comment kpt writes back" in out) == comment_kept
        assert parse(out)["items"] == parse(text)["items"]
        assert [r["tags"]["code"] for r in parse(out)["results"]] == ["FJ204"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: v1\nkind: List\nitems: []\n", "stdin must hold one ResourceList"),
        ("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig: {kind: ConfigMap, data: {namspace: x}}\n", "unknown functionConfig option 'namspace'"),
        ("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig: {kind: ConfigMap, data: {scheduler: slurm}}\n", "scheduler must be one of auto, t9k, kueue, default"),
        ("items: [", "YAML syntax error"),
    ],
    ids=["not-a-resource-list", "unknown-option", "bad-scheduler", "not-yaml"],
)
def test_bad_input_is_reported_in_results(text: str, message: str) -> None:
    out, status = run(text)
    assert status == 1
    (problem,) = parse(out)["results"]
    assert message in problem["message"] and problem["severity"] == "error"


def tool_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.skipif(shutil.which("kpt") is None, reason="kpt not installed")
def test_kpt_source_krm_sink(tmp_path: Path) -> None:
    write(tmp_path / "jobs", {"ddp.yaml": DDP})
    pipeline = "kpt fn source jobs | flatjob krm | kpt fn sink rendered"
    done = subprocess.run(["sh", "-c", pipeline], cwd=tmp_path, env=tool_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    files = sorted(p.relative_to(tmp_path / "rendered").as_posix() for p in (tmp_path / "rendered").rglob("*.yaml"))
    assert files == ["ddp/job.yaml", "ddp/podtemplates.yaml", "ddp/service.yaml", "runtime.yaml"]  # runtime.yaml: the namespace's
    pods = list(yaml.safe_load_all((tmp_path / "rendered" / "ddp" / "podtemplates.yaml").read_text(encoding="utf-8")))
    assert len(pods) == 4 and not any("internal.config.kubernetes.io/path" in p["metadata"]["annotations"] for p in pods)


@pytest.mark.skipif(shutil.which("kpt") is None, reason="kpt not installed")
def test_kptfile_pipeline(tmp_path: Path) -> None:
    kptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: training\npipeline:\n  mutators:\n    - exec: flatjob krm\n"
    write(tmp_path / "pkg", {"Kptfile": kptfile, "ddp.yaml": DDP})
    done = subprocess.run(["kpt", "fn", "render", "pkg", "--allow-exec"], cwd=tmp_path, env=tool_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pkg" / "ddp" / "podtemplates.yaml").is_file() and not (tmp_path / "pkg" / "ddp.yaml").exists()


def kustomize_exec() -> list[str] | None:
    """A kustomize that runs exec functions: the standalone binary, or a kubectl that has the flag."""
    if shutil.which("kustomize"):
        return ["kustomize", "build", "--enable-alpha-plugins", "--enable-exec"]
    if shutil.which("kubectl"):
        helptext = subprocess.run(["kubectl", "kustomize", "--help"], capture_output=True, text=True, timeout=30, check=False).stdout
        if "--enable-exec" in helptext:
            return ["kubectl", "kustomize", "--enable-alpha-plugins", "--enable-exec"]
    return None


@pytest.mark.skipif(kustomize_exec() is None, reason="no kustomize that runs exec functions (kubectl's has no --enable-exec)")
def test_kustomize_exec_transformer_and_generator(tmp_path: Path) -> None:
    wrapper = f"#!/bin/sh\nexec {FLATJOB} krm \"$@\"\n"
    config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flatjob\n  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: ./flatjob-krm\ndata:\n  namespace: team-a\n"
    generator = DDP.replace("name: ddp", "name: gen").replace("  labels: {team: vision}\n", "  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: ./flatjob-krm\n")
    write(tmp_path, {
        "job.yaml": DDP, "flatjob.yaml": config, "gen.yaml": generator, "flatjob-krm": wrapper,
        "kustomization.yaml": "resources: [job.yaml]\ntransformers: [flatjob.yaml]\ngenerators: [gen.yaml]\n",
    })
    (tmp_path / "flatjob-krm").chmod(0o755)
    done = subprocess.run([*kustomize_exec(), str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)  # type: ignore[misc]
    assert done.returncode == 0, done.stderr
    docs = list(yaml.safe_load_all(done.stdout))
    owners = {d["metadata"]["labels"].get("flatjob.dev/job-name") for d in docs if d["kind"] == "PodTemplate"}
    assert owners == {"ddp", "gen"}
