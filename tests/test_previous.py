"""Fields T9k makes immutable (FJ322): compile compares the new record with the one in OUT.

A decision table over compiler.previous.changed_fields, and the CLI end to end: compile, edit
the spec, compile again (and --check, and diff); the warning names the field at its line and
is exactly what docs/diagnostics.md shows.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from lintkit import run_cli

from flatjob.compiler.previous import changed_fields

RESUME = {"runMode": {"pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "command": ["a"]}]}}}
ELASTIC = {"elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 2}}


def record(**spec: object) -> dict:
    return {"apiVersion": "flatjob.dev/v1beta1", "kind": "GenericJob", "spec": spec}


CASES = [
    ("same", record(**RESUME), record(**RESUME), []),
    ("resume-command", record(**RESUME), record(runMode={"pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "command": ["b"]}]}}), ["runMode.pause.resumeSpecs"]),
    ("resume-removed", record(**RESUME), record(runMode={"pause": {"enabled": True, "resumeSpecs": []}}), ["runMode.pause.resumeSpecs"]),
    ("resume-added-later-is-not-a-change", record(), record(**RESUME), []),
    ("pause-toggled-is-fine", record(**RESUME), record(runMode={"pause": {**RESUME["runMode"]["pause"], "enabled": True}}), []),
    ("elastic-expected-may-change", record(**ELASTIC), record(elastic={**ELASTIC["elastic"], "expectedReplicas": 4}), []),
    ("elastic-min", record(**ELASTIC), record(elastic={**ELASTIC["elastic"], "minReplicas": 2}), ["elastic.minReplicas"]),
    ("elastic-max", record(**ELASTIC), record(elastic={**ELASTIC["elastic"], "maxReplicas": 8}), ["elastic.maxReplicas"]),
]


@pytest.mark.parametrize(("previous", "current", "changed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_changed_fields(previous: dict, current: dict, changed: list[str]) -> None:
    assert [".".join(p) for p, _ in changed_fields(previous, current)] == changed


JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: train
spec:
  runMode:
    pause:
      enabled: false
      resumeSpecs:
        - type: worker
          command: [python, train.py, --resume]
  replicaSpecs:
    - type: worker
      replicas: 2
      template:
        spec:
          containers:
            - name: main
              image: python:3.12
              command: [python, train.py]
"""

WARNING = textwrap.dedent("""\
    jobs/train.yaml:10:9: warning: spec.runMode.pause.resumeSpecs differs from the record in rendered/train/job.yaml: T9k does not allow resumeSpecs to change; flatjob applies it, and a running job starts a new attempt; to start afresh, rename the job [FJ322]
     10 |         - type: worker
        |         ^
""")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.yaml").write_text(JOB)
    monkeypatch.chdir(tmp_path)
    assert run_cli("compile", "jobs/", "-o", "rendered/").exit_code == 0
    return tmp_path


@pytest.mark.parametrize("command", [["compile", "--check"], ["diff"], ["compile"]])
def test_compile_warns_when_resume_specs_change(repo: Path, command: list[str]) -> None:
    (repo / "jobs" / "train.yaml").write_text(JOB.replace("--resume]", "--resume, --from-last]"))
    result = run_cli(command[0], "jobs/", "-o", "rendered/", *command[1:])
    assert result.stderr.startswith(WARNING)
    assert (result.exit_code == 1) is ("--check" in command)  # a warning never fails by itself


def test_no_warning_when_unchanged_or_only_pause_toggles(repo: Path) -> None:
    (repo / "jobs" / "train.yaml").write_text(JOB.replace("enabled: false", "enabled: true"))
    result = run_cli("compile", "jobs/", "-o", "rendered/")
    assert result.exit_code == 0 and "FJ322" not in result.stderr


def test_doc_shows_this_warning() -> None:
    from conftest import ROOT

    assert WARNING in (ROOT / "docs" / "diagnostics.md").read_text(encoding="utf-8")
