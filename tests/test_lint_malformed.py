"""Malformed input: broken YAML, files that are not jobs, and the model's error classes.

Covers: YAML problems (FJ100-FJ104), named files without a job (FJ102), unreadable and
non-UTF-8 files (FJ103), folders (other YAML skipped), and each class of model error:
unknown kind and field with "did you mean" (FJ200, FJ201), wrong type (FJ202), missing
field (FJ203), bad enum and range (FJ204), apiVersion (FJ205), deprecated field (FJ206).
Each case's YAML shows where its findings are: a comment `# ^ CODE` under the line, with
the caret at the column (lintkit.marked). The other rule families have their own modules:
test_lint_rules.py, test_lint_pod_templates.py, test_lint_references.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lintkit import (
    Case,
    case_ids,
    check_case,
    deepspeed,
    edit,
    findings,
    generic,
    lint_text,
    pytorch,
    run_cli,
    write,
)

CASES = [
    # --- YAML and input (FJ100-FJ104) ------------------------------------------------------
    Case(
        "yaml-syntax",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata: {name: [job}
        #                    ^ FJ100
        """,
        message="YAML syntax error: while parsing a flow sequence",
    ),
    Case(
        "yaml-bad-indent",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
          metadata: x
        #         ^ FJ100
        """,
        message="mapping values are not allowed in this context",
    ),
    Case(
        "yaml-control-character",
        "apiVersion: batch.tensorstack.dev/v1beta1\nkind: Generic\x07Job\n#            ^ FJ100\n",
        message="unacceptable character #x0007",
    ),
    Case(
        "duplicate-key",
        pytorch("""
          runPolicy: {}
          runPolicy: {backoffLimit: 1}
        # ^ FJ101
        """),
        message="duplicate key 'runPolicy' (first defined at line 6)",
    ),
    Case(
        "unknown-tag",
        pytorch("""
          runPolicy: {cleanUpPolicy: !upper All}
        #                            ^ FJ104
        """),
        message="unsupported YAML tag '!upper'",
    ),
    Case(
        # go-yaml decodes !!binary: the cluster would run 'hello' where the review shows aGVsbG8= (attacker, round 3)
        "binary-tag",
        pytorch("""
          runPolicy: {cleanUpPolicy: !!binary All}
        #                            ^ FJ104
        """),
        message="Kubernetes decodes !!binary (base64), so the cluster would get other text than this file shows",
    ),
    Case(
        "complex-key",
        pytorch("""
          ? [runPolicy]
        #   ^ FJ104
          : {}
        """),
        message="a mapping key must be a plain scalar",
    ),
    Case(
        "bad-explicit-tag",
        pytorch("""
          torchrunConfig: {enabled: !!bool maybe}
        #                           ^ FJ104
        #                           ^ FJ202
        """),
        message="'maybe' is not a valid !!bool value",
    ),
    Case(
        "no-job-in-named-file",
        """
        apiVersion: v1
        kind: ConfigMap
        """,
        also=((1, 1, "FJ102"),),
        message="no T9k job in this file",
    ),
    # --- document shape (FJ200-FJ206) ------------------------------------------------------
    Case(
        "unknown-kind",
        edit(pytorch(), "PyTorchTrainingJob", "PytorchTrainingJob"),
        also=((2, 7, "FJ200"),),
        message="unknown kind 'PytorchTrainingJob'",
        hint="did you mean 'PyTorchTrainingJob'?",
    ),
    Case(
        "unknown-kind-no-guess",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: TrainingThing
        #     ^ FJ200
        metadata: {name: job}
        spec: {}
        """,
        message="unknown kind 'TrainingThing'; flatjob handles GenericJob, PyTorchTrainingJob",
    ),
    Case(
        "unknown-field",
        pytorch("""
          torchrunConfg: {enabled: true}
        # ^ FJ201
        """),
        message="unknown field 'torchrunConfg' in spec",
        hint="did you mean 'torchrunConfig'?",
    ),
    Case(
        "unknown-field-nested",
        pytorch("""
          runPolicy: {backofLimit: 1}
        #             ^ FJ201
        """),
        message="unknown field 'backofLimit' in spec.runPolicy",
        hint="did you mean 'backoffLimit'?",
    ),
    Case(
        "wrong-type-string-for-int",
        pytorch("""
          runPolicy: {backoffLimit: '3'}
        #                           ^ FJ202
        """),
        message="spec.runPolicy.backoffLimit: expected an integer, got a string ('3')",
    ),
    Case(
        "wrong-type-int-for-string",
        pytorch("""
          torchrunConfig: {enabled: true, procPerNode: 4}
        #                                              ^ FJ202
        """),
        message="expected a string, got an integer (4)",
        hint='quote it: "4"',
    ),
    Case(
        "wrong-type-string-for-list",
        deepspeed("""
          config:
            run:
              python: train.py
        #             ^ FJ202
        """),
        message="expected a list, got a string ('train.py')",
        hint="write it as a list: [train.py]",
    ),
    Case(
        "wrong-type-int-or-string",
        generic("""
          successRules: [{worker: [true]}]
        #                          ^ FJ202
        """),
        message="expected an integer or a string, got a boolean (true)",
    ),
    Case(
        "missing-field",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata:
          name: job
        spec:
          replicaSpecs:
            - type: worker
        #     ^ FJ203
        """,
        message="missing required field 'template' in spec.replicaSpecs[0]",
    ),
    Case(
        "missing-kind",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        metadata: {name: job}
        spec: {}
        """,
        also=((1, 1, "FJ203"),),
        message="missing required field 'kind'",
    ),
    Case(
        "bad-enum",
        pytorch("""
          torchrunConfig: {enabled: true, rdzvBackend: etc}
        #                                              ^ FJ204
        """),
        message="a string ('etc') is not one of 'c10d', 'etcd' or 'etcd-v2'",
        hint="did you mean 'etcd'?",
    ),
    Case(
        "bad-enum-case",
        pytorch("""
          runPolicy: {cleanUpPolicy: unfinished}
        #                            ^ FJ204
        """),
        message="spec.runPolicy.cleanUpPolicy",
        hint="did you mean 'Unfinished'?",
    ),
    Case(
        "range-priority-above-100",
        pytorch("""
          scheduler: {t9kScheduler: {queue: q, priority: 101}}
        #                                                ^ FJ204
        """),
        message="spec.scheduler.t9kScheduler.priority: must be <= 100, got 101",
    ),
    Case(
        "range-priority-negative",
        pytorch("""
          scheduler: {t9kScheduler: {queue: q, priority: -1}}
        #                                                ^ FJ204
        """),
        message="must be >= 0, got -1",
    ),
    Case(
        "range-negative-replicas",
        edit(deepspeed(), "replicas: 2", "replicas: -1"),
        also=((8, 15, "FJ204"),),
        message="spec.worker.replicas: must be >= 0, got -1",
    ),
    Case(
        "range-negative-limit",
        edit(generic(), "replicas: 2", "restartPolicy: {limit: -2}"),
        also=((9, 30, "FJ204"),),
        message="spec.replicaSpecs[0].restartPolicy.limit: must be >= 0, got -2",
    ),
    Case(
        "bad-api-version",
        edit(pytorch(), "v1beta1", "v1"),
        also=((1, 13, "FJ205"),),
        message="apiVersion 'batch.tensorstack.dev/v1' is not supported",
        hint="did you mean 'batch.tensorstack.dev/v1beta1'?",
    ),
    Case(
        "misspelt-api-group-is-still-a-job",
        edit(pytorch(), "tensorstack", "tensorstak"),
        also=((1, 13, "FJ205"),),
        hint="did you mean 'batch.tensorstack.dev/v1beta1'?",
    ),
    Case(
        "deprecated-field-warning",
        pytorch("""
          torchrunConfig: {enabled: true, minNodes: 1}
        #                                 ^ FJ206
        """),
        message="torchrunConfig.minNodes is not used",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_lint_finds_exactly(tmp_path: Path, case: Case) -> None:
    check_case(tmp_path, case)


def test_not_utf8_points_at_the_byte(tmp_path: Path) -> None:
    (d,) = lint_text(tmp_path, pytorch().replace("name: job", "name: caf\xe9").encode("latin-1"))
    assert (d.line, d.col, d.code) == (4, 12, "FJ103")
    assert d.message == "not UTF-8 text: byte 0xe9 cannot be decoded (save the file as UTF-8)"
    assert d.source_line == "  name: caf\ufffd"


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    assert lint_text(tmp_path, b"\xef\xbb\xbf" + pytorch().encode()) == []


def test_unreadable_file_in_a_folder(tmp_path: Path) -> None:
    write(tmp_path, pytorch(), "good.yaml")
    os.symlink(tmp_path / "missing.yaml", tmp_path / "dangling.yaml")
    result = run_cli("lint", str(tmp_path))
    assert result.exit_code == 1
    assert (
        f"{tmp_path / 'dangling.yaml'}: error: cannot read: No such file or directory [FJ103]"
        in result.output
    )


def test_folder_skips_yaml_that_is_not_a_job(tmp_path: Path) -> None:
    write(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "configmap.yaml")
    write(tmp_path, "just: [data]\n", "values.yml")
    write(tmp_path, pytorch(), "job.yaml")
    write(tmp_path, "not: [yaml\n", "notes.txt")
    result = run_cli("lint", str(tmp_path))
    assert (result.exit_code, result.stdout) == (0, "")
    assert "(1 job in 3 files checked)" in result.stderr


def test_folder_still_reports_syntax_errors(tmp_path: Path) -> None:
    write(tmp_path, "a: [1\n", "broken.yaml")
    result = run_cli("lint", str(tmp_path))
    assert result.exit_code == 1
    assert f"{tmp_path / 'broken.yaml'}:2:1: error: YAML syntax error" in result.output


@pytest.mark.parametrize(
    "text", ["", "# only a comment\n", "---\n...\n"], ids=["empty", "comment", "empty-doc"]
)
def test_named_file_without_documents(tmp_path: Path, text: str) -> None:
    assert findings(lint_text(tmp_path, text)) == [(1, 1, "FJ102")]


def test_job_among_other_documents(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\n---\n" + edit(pytorch(), "replicas: 2", "replicas: -2")
    assert findings(lint_text(tmp_path, text)) == [(12, 17, "FJ204")]
