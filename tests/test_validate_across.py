"""Checks across jobs (compiler/validate/across.py): lint reports what compile refuses.

Covers: object_names names exactly the Pods and Services the renderers write, for every
golden case and real T9k spec, and template_runs the same PodTemplates as runs; two jobs that render one pod name (job `a` type `b-c`, job
`a-b` type `c`) or one Service name, and one job name in two files, fail lint and compile
alike at the same line, and kubectl kustomize confirms the collision is real; jobs in
different namespaces do not collide; too many pods in one run is FJ105.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, corpus_files
from lintkit import check_text_output, run_cli

from flatjob.compiler.loader import load_paths
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents
from flatjob.compiler.podset import template_runs
from flatjob.compiler.validate import validate_document
from flatjob.compiler.validate.across import object_names
from flatjob.runtime.nameset import PodNames

GOLDEN = sorted((ROOT / "tests" / "golden").glob("*/job.yaml"))

JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: {name}{namespace}
spec:
  replicaSpecs:
    - type: {type}
      replicas: 1
      template:
        spec:
          containers:
            - name: python
              image: pytorch/pytorch:2.4.0
              command: [python, train.py]
"""


def job(name: str, rtype: str = "worker", namespace: str | None = None) -> str:
    return JOB.format(name=name, type=rtype, namespace=f"\n  namespace: {namespace}" if namespace else "")


@pytest.mark.parametrize("path", [*GOLDEN, *corpus_files("t9k")], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_object_names_are_what_is_rendered(path: Path) -> None:
    loaded = load_paths([str(path)])
    for doc in loaded.jobs:
        v = validate_document(doc)
        if v.job is None:
            continue
        compiled = compile_documents(type(loaded)(jobs=[doc]), CompileOptions())
        (out,) = compiled.jobs
        rendered = {
            (d["kind"], d["metadata"]["name"])
            for name, text in out.files.items()
            for d in yaml.safe_load_all(text)
            if isinstance(d, dict) and d.get("kind") in ("PodTemplate", "Service")
        }
        predicted = {(kind, name) for kind, name, _ in object_names(v.job)}
        paused = out.plan.run_mode == "pause"
        assert rendered <= predicted if paused else rendered == predicted
        runs, singles = template_runs(v.job)  # what the runtime keeps for a record: the same names, as runs
        assert set(PodNames.of(runs, singles)) == {name for kind, name in predicted if kind == "PodTemplate"}


def run_both(folder: Path) -> tuple[list[tuple[str, int, int, str]], list[tuple[str, int, int, str]]]:
    """(lint's errors, compile's errors), each as (file, line, col, code)."""
    linted = run_cli("lint", str(folder))
    compiled = run_cli("compile", str(folder), "-o", str(folder.parent / "rendered"))
    assert linted.exit_code == compiled.exit_code == 1, (linted.output, compiled.output)
    assert not (folder.parent / "rendered").exists()
    pick = lambda out: sorted((Path(m["path"]).name, int(m["line"]), int(m["col"]), m["code"]) for m in check_text_output(out) if m["severity"] == "error")  # noqa: E731
    return pick(linted.output), pick(compiled.output.rsplit("flatjob: ", 1)[0])


def test_two_jobs_rendering_one_pod_fail_lint_and_compile(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "a.yaml").write_text(job("a", "b-c"))
    (jobs / "ab.yaml").write_text(job("a-b", "c"))
    linted, compiled = run_both(jobs)
    assert linted == compiled == [("ab.yaml", 7, 13, "FJ323")]
    assert "PodTemplate 'a-b-c-0' is also rendered by job 'a'" in run_cli("lint", str(jobs)).output


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_the_collision_is_real(tmp_path: Path) -> None:
    """Compiled apart, the two jobs' output cannot be built together: kustomize refuses it.
    (Per-job runtimes: two namespace runtimes, one per compile, would collide first.)"""
    for name, rtype in (("a", "b-c"), ("a-b", "c")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "job.yaml").write_text(job(name, rtype))
        assert run_cli("compile", str(tmp_path / name), "-o", str(tmp_path / "out" / name), "--runtime", "job").exit_code == 0
    (tmp_path / "out" / "kustomization.yaml").write_text("resources: [a, a-b]\n")
    built = subprocess.run(["kubectl", "kustomize", str(tmp_path / "out")], capture_output=True, text=True, timeout=120, check=False)
    assert built.returncode != 0 and "a-b-c-0" in built.stderr


def test_a_job_named_like_another_jobs_tensorboard(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    tb = job("a").replace("spec:\n  replicaSpecs:", "spec:\n  tensorboardSpec:\n    trainingLogFilesets: [t9k://pvc/logs/a]\n    image: tensorflow/tensorflow:2.14.0\n  replicaSpecs:", 1)
    (jobs / "a.yaml").write_text(tb)
    (jobs / "b.yaml").write_text(job("a-tensorboard"))
    linted, compiled = run_both(jobs)
    assert linted == compiled == [("b.yaml", 4, 9, "FJ323")]


def test_one_job_name_in_two_files(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "one.yaml").write_text(job("train"))
    (jobs / "two.yaml").write_text(job("train", "master"))
    linted, compiled = run_both(jobs)
    assert linted == compiled == [("two.yaml", 4, 9, "FJ315")]


def test_namespaces_keep_names_apart(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "a.yaml").write_text(job("a", "b-c", namespace="team-a"))
    (jobs / "ab.yaml").write_text(job("a-b", "c", namespace="team-b"))
    (jobs / "c.yaml").write_text(job("train", namespace="team-a"))
    (jobs / "d.yaml").write_text(job("train", namespace="team-b"))
    assert run_cli("lint", str(jobs)).exit_code == 0


def test_too_many_pods_in_one_run(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for i in range(6):  # limits.run_pods is 50 000: the sixth job of 10 000 crosses it
        (jobs / f"j{i:02d}.yaml").write_text(job(f"j{i:02d}").replace("replicas: 1", "replicas: 10000"))
    linted, compiled = run_both(jobs)
    assert linted == compiled == [("j05.yaml", 4, 9, "FJ105")]


@pytest.mark.parametrize(("args", "errors"), [
    ((), [("a.yaml", 4, 9, "FJ345"), ("c.yaml", 4, 9, "FJ345")]),
    (("-n", "default"), []),  # the jobs without one join namespace default: one runtime
    (("--runtime", "job"), []),  # a runtime per job, named after it
])
def test_jobs_without_a_namespace_beside_jobs_in_default_would_get_two_namespace_runtimes(tmp_path: Path, args: tuple[str, ...], errors: list) -> None:
    """Each set got a runtime `flatjob`, both in namespace default once applied: kustomize
    refused the whole folder (review 24, round 5); compile says so and what to pass instead."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "a.yaml").write_text(job("a"))
    (jobs / "b.yaml").write_text(job("b", namespace="default"))
    (jobs / "c.yaml").write_text(job("c"))
    out = tmp_path / "rendered"
    compiled = run_cli("compile", str(jobs), "-o", str(out), *args)
    assert compiled.exit_code == (1 if errors else 0) and out.exists() != bool(errors), compiled.output
    if errors:
        assert sorted((Path(m["path"]).name, int(m["line"]), int(m["col"]), m["code"]) for m in check_text_output(compiled.output.rsplit("flatjob: ", 1)[0]) if m["severity"] == "error") == errors
    if not errors and shutil.which("kubectl"):
        assert subprocess.run(["kubectl", "kustomize", str(out)], capture_output=True).returncode == 0
    assert run_cli("lint", str(jobs)).exit_code == 0  # lint does not know the runtime mode
