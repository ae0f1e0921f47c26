"""The committed schemas/ match the models, the editor schemas work, and `flatjob explain`.

Covers: every file `flatjob schema` generates equals the committed one and nothing stale is
left beside them; `flatjob schema --check` agrees; the JSON Schemas accept the valid corpus
jobs and reject the known typos (as an editor would show them); explain for a kind, a
nested field, a typo'd field and a typo'd kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, corpus_files, corpus_params
from lintkit import run_cli

from flatjob.compiler.cli.schema import schema_files

SCHEMAS = ROOT / "schemas"

FIX = "run `flatjob schema -o schemas` from the project root and commit the result"


def test_committed_schemas_are_fresh() -> None:
    files = schema_files()
    missing = sorted(rel for rel in files if not (SCHEMAS / rel).is_file())
    stale = sorted(
        rel
        for rel in files
        if rel not in missing and (SCHEMAS / rel).read_text(encoding="utf-8") != files[rel]
    )
    assert not missing and not stale, (
        f"schemas/ is out of date (missing: {missing}, stale: {stale}); {FIX}"
    )


def test_no_leftover_generated_files() -> None:
    # the folders `flatjob schema` writes (schemas/kubernetes/ comes from compiler/kube/trim.py)
    generated_dirs = {rel.split("/", 1)[0] for rel in schema_files()}
    present = {
        p.relative_to(SCHEMAS).as_posix()
        for d in sorted(generated_dirs)
        for p in (SCHEMAS / d).rglob("*")
        if p.is_file()
    }
    extra = sorted(present - set(schema_files()))
    assert not extra, f"schemas/ holds files flatjob no longer generates: {extra}; delete them"


def test_schema_check_command(tmp_path: Path) -> None:
    fresh = run_cli("schema", "--check", "-o", str(SCHEMAS))
    assert (fresh.exit_code, fresh.stderr.startswith(f"{SCHEMAS}: up to date (")) == (0, True), fresh.stderr
    assert run_cli("schema", "-o", str(tmp_path)).exit_code == 0
    (tmp_path / "jobs" / "genericjob.json").write_text("{}\n", encoding="utf-8")
    result = run_cli("schema", "--check", "-o", str(tmp_path))
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"{tmp_path / 'jobs' / 'genericjob.json'}: stale; run `flatjob schema -o {tmp_path}`\n"
    )


# --- the JSON Schemas as an editor uses them -----------------------------------------------


@pytest.fixture(scope="module")
def validators() -> dict[str, Any]:
    """One validator per kind; the remote Kubernetes $refs resolve to 'anything'."""
    jsonschema = pytest.importorskip("jsonschema")
    referencing = pytest.importorskip("referencing")

    def retrieve(uri: str) -> Any:
        assert uri.startswith("https://raw.githubusercontent.com/yannh/kubernetes-json-schema/"), (
            uri
        )
        return referencing.Resource.from_contents(
            {}, default_specification=referencing.jsonschema.DRAFT202012
        )

    registry = referencing.Registry(retrieve=retrieve)
    out = {}
    for path in sorted((SCHEMAS / "jobs").glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        out[schema["properties"]["kind"]["const"]] = jsonschema.Draft202012Validator(
            schema, registry=registry
        )
    return out


KNOWN_BAD = {
    # kind, slotPerWorker, run.python given as a string
    "deepspeedjob--user-manuals-src-modules-jobs-deepspeedjob-block1.yaml",
}


@pytest.mark.parametrize("path", corpus_params(corpus_files("t9k")), ids=lambda p: p.name)
def test_editor_schema_flags_only_the_structural_mistakes(
    validators: dict[str, Any], path: Path
) -> None:
    job = yaml.safe_load(path.read_text(encoding="utf-8"))
    validator = validators.get(job["kind"], validators["DeepSpeedJob"])
    problems = sorted(e.message for e in validator.iter_errors(job))
    assert bool(problems) == (path.name in KNOWN_BAD), problems


def test_editor_schema_names_the_typo(validators: dict[str, Any]) -> None:
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "DeepSpeedJob",
        "metadata": {"name": "a"},
        "spec": {
            "config": {"slotPerWorker": 1, "run": {"python": ["a.py"]}},
            "worker": {"template": {}},
        },
    }
    (error,) = validators["DeepSpeedJob"].iter_errors(job)
    assert list(error.absolute_path) == ["spec", "config"]
    assert "'slotPerWorker' was unexpected" in error.message


# --- flatjob explain -----------------------------------------------------------------------


def test_explain_kind() -> None:
    result = run_cli("explain", "DeepSpeedJob")
    assert result.exit_code == 0
    assert result.stdout.startswith(
        "KIND:     DeepSpeedJob\nVERSION:  batch.tensorstack.dev/v1beta1\n"
    )
    assert "  spec\t<DeepSpeedJobSpec> -required-\n" in result.stdout


def test_explain_nested_field_case_insensitive_kind() -> None:
    result = run_cli("explain", "deepspeedjob.spec.config.run")
    assert result.exit_code == 0
    assert "FIELD:    run <RunType>\n" in result.stdout
    assert (
        "  module\t<[]string>\n    Python module and its args (deepspeed --module).\n"
        in result.stdout
    )


def test_explain_leaf_shows_default() -> None:
    result = run_cli("explain", "PyTorchTrainingJob.spec.torchrunConfig.procPerNode")
    assert result.exit_code == 0
    assert "FIELD:    procPerNode <string>" in result.stdout
    assert "Default: '1'." in result.stdout


def test_explain_takes_a_field_path_as_lint_prints_it() -> None:
    """lint names a field with its list indices (spec.replicaSpecs[0].type, the json `field`);
    pasted into explain it is that field, not 'replicaSpecs[0] does not exist' (issue 25)."""
    result = run_cli("explain", "PyTorchTrainingJob.spec.replicaSpecs[0].type")
    assert result.exit_code == 0
    assert "FIELD:    type <string>" in result.stdout


def test_explain_inside_a_pod_template_names_the_kubectl_explain_path() -> None:
    result = run_cli("explain", "PyTorchTrainingJob.spec.replicaSpecs[1].template.spec.containers")
    assert result.exit_code == 1
    assert "see `kubectl explain pod.spec.containers`" in result.output


def test_explain_pod_template_points_at_kubectl() -> None:
    result = run_cli("explain", "PyTorchTrainingJob.spec.replicaSpecs.template")
    assert result.exit_code == 0
    assert "see `kubectl explain pod.spec`" in result.stdout


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "PyTorchTrainingJob.spec.torchrunConfg",
            "field 'torchrunConfg' does not exist in PyTorchTrainingJob.spec; "
            "did you mean 'torchrunConfig'?",
        ),
        (
            "DeepspeedJobb",
            "unknown kind 'DeepspeedJobb'; kinds: GenericJob, PyTorchTrainingJob, DeepSpeedJob, "
            "ColossalAIJob; did you mean 'DeepSpeedJob'?",
        ),
        ("GenericJob.spec.replicaSpecs.template.spec", "is a Kubernetes object"),
    ],
    ids=["typo-field", "typo-kind", "inside-pod-template"],
)
def test_explain_errors(target: str, message: str) -> None:
    result = run_cli("explain", target)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("flatjob explain: ") and message in result.stderr


def _undescribed(node: dict[str, Any], path: str) -> list[str]:
    """The fields under `node` that `kubectl explain` would show without a description (a list's
    items and a map's values are explained by the list's or map's own field)."""
    found = [] if node.get("description") or not path else [path]
    for name, child in (node.get("properties") or {}).items():
        found += _undescribed(child, f"{path}.{name}")
    for sub in ("items", "additionalProperties"):
        if isinstance(node.get(sub), dict):
            found += [p for p in _undescribed({**node[sub], "description": "-"}, path + ("[]" if sub == "items" else "{}"))]
    return found


@pytest.mark.parametrize("crd", sorted(p.name for p in (SCHEMAS / "crds").glob("*.flatjob.dev.yaml")))
def test_kubectl_explain_finds_a_description_for_every_field_of_the_records(crd: str) -> None:
    """`kubectl explain pj.status.aggregate.running` (T9k's short names, tests/runtime/test_kubectl.py)
    prints the CRD's description of the field: none was empty (status.aggregate.*, apiVersion...)."""
    doc = yaml.safe_load((SCHEMAS / "crds" / crd).read_text(encoding="utf-8"))
    (version,) = doc["spec"]["versions"]
    assert _undescribed(version["schema"]["openAPIV3Schema"], doc["spec"]["names"]["kind"]) == []
