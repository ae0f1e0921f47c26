"""The real T9k corpus (../shared/corpus/t9k): every valid job compiles on its own.

Covers:
- each valid file compiles with no errors, and every rendered object passes the strict
  Kubernetes validator; each record passes its own CRD schema;
- no output holds private key material (SSH keys are made in the cluster by the runtime);
- the files with real mistakes fail to compile, and `flatjob compile` then writes nothing.

Skipped when the corpus is not beside the project (set FLATJOB_CORPUS to point at it).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import corpus_dir, corpus_files, corpus_params
from manifestkit import name_problems, objects_of, record_problems, secret_problems

from flatjob.compiler import kube
from flatjob.compiler.cli import cli
from flatjob.compiler.pipeline import compile_paths

# Files with real errors (a wrong kind, a misspelt field, $(service...) without a service,
# an unknown field in a Secret volume): they must fail, with their diagnostics.
BROKEN = {
    "deepspeedjob--user-manuals-src-modules-jobs-deepspeedjob-block1.yaml": "FJ200",
    "genericjob--user-manuals-src-modules-jobs-genericjob-block5.yaml": "FJ501",
    "genericjob--examples-dcu-llama3-job-finetune.yaml": "FJ400",
    "pytorchtrainingjob--user-manuals-src-modules-auxiliary-secret-block1.yaml": "FJ400",
}
ROOT = Path(__file__).resolve().parents[1]
FILES = corpus_files("t9k")
VALID = [f for f in FILES if f.name not in BROKEN]


def _id(path: Path) -> str:
    return path.stem


def compiled(path: Path) -> dict[str, str]:
    result = compile_paths([str(path)])
    errors = [f"{d.line}:{d.col}: {d.message} [{d.code}]" for d in result.diagnostics if d.is_error]
    assert not errors, "\n".join(errors)
    assert result.jobs, "no job compiled"
    return result.tree()


@pytest.mark.parametrize("path", corpus_params(VALID), ids=_id)
def test_valid_job_compiles_to_valid_manifests(path: Path) -> None:
    files = compiled(path)
    objects = objects_of(files)
    problems = [
        f"{o['kind']} {o['metadata']['name']}: {v}"
        for o in objects
        for v in kube.validate_manifest(o)
    ]
    problems += [p for o in objects for p in name_problems(o)]
    problems += [
        p for o in objects if o["apiVersion"] == "flatjob.dev/v1beta1" for p in record_problems(o)
    ]
    assert not problems, "\n".join(problems)
    assert any(o["kind"] == "PodTemplate" for o in objects)
    assert not [o for o in objects if o["kind"] == "Pod"]  # the runtime creates pods; git holds PodTemplates


@pytest.mark.parametrize("path", corpus_params(VALID), ids=_id)
def test_no_private_key_is_rendered(path: Path) -> None:
    assert secret_problems(compiled(path)) == []


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_job_fails_and_writes_nothing(name: str, tmp_path: Path) -> None:
    path = corpus_dir("t9k") / name
    result = compile_paths([str(path)])
    assert result.failed and not result.jobs
    assert BROKEN[name] in {d.code for d in result.diagnostics if d.is_error}
    out = tmp_path / "out"
    run = CliRunner().invoke(cli, ["compile", str(path), "-o", str(out)])
    assert run.exit_code == 1, run.output
    assert "nothing was written" in run.output
    assert not out.exists()


def test_corpus_is_complete() -> None:
    corpus_dir("t9k")
    assert len(FILES) >= 90 and set(BROKEN) <= {f.name for f in FILES}


def test_secret_check_catches_key_material() -> None:
    pem = "kind: ConfigMap\ndata:\n  key: |\n    -----BEGIN OPENSSH " + "PRIVATE KEY-----\n"
    secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  ssh-privatekey: QUFB\n"
    items = "items:\n- key: ssh-privatekey\n  path: id_rsa\n"
    assert secret_problems({"a/config.yaml": pem})
    assert len(secret_problems({"a/secret.yaml": secret})) == 2
    assert secret_problems({"a/notes.txt": items}) == []


EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
NO_VALIDATOR = pytest.mark.skipif(shutil.which("kubernetes-validate") is None, reason="kubernetes-validate is not installed (pip install -e '.[test]')")


def _strict(paths: list[Path], tmp_path: Path) -> int:
    """Run the real validator (not flatjob's own) over every PodTemplate these files compile
    to, against Kubernetes 1.32, unknown fields refused; the number of PodTemplates checked."""
    objects = [o for p in paths for o in objects_of(compile_paths([str(p)]).tree()) if o["kind"] in ("PodTemplate", "Pod")]
    assert not [o for o in objects if o["kind"] == "Pod"]
    manifest = tmp_path / "all.yaml"
    manifest.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    done = subprocess.run(["kubernetes-validate", "--strict", "--quiet", "-k", "1.32.0", str(manifest)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return len(objects)


@NO_VALIDATOR
def test_every_example_pod_template_passes_kubernetes_validate_strict(tmp_path: Path) -> None:
    """The examples' PodTemplates, whether or not the corpus is beside the project (the other
    objects are few and the same for every job: flatjob's validator checks them above)."""
    assert _strict(EXAMPLES, tmp_path) > 10


@NO_VALIDATOR
@pytest.mark.slow
def test_every_corpus_pod_template_passes_kubernetes_validate_strict(tmp_path: Path) -> None:
    """Every PodTemplate the real corpus compiles to (over a hundred; a slow run)."""
    corpus_dir("t9k")
    assert _strict(VALID, tmp_path) > 100
