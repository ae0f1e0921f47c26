"""docs/t9k-compatibility.md stays true: every test it cites exists, and every field of the
five T9k API references has a row.

The field list is T9k's (user-manuals src/references/api-reference/*.md and ucman's
ColossalAIJob reference), written out here so a reader can check it against the manuals.
"""

from __future__ import annotations

import fnmatch
import re

import pytest
from conftest import ROOT

DOC = (ROOT / "docs" / "t9k-compatibility.md").read_text(encoding="utf-8")
TESTS = ROOT / "tests"

# Every spec field of the five API references (leaf names as they appear in the doc's rows).
API_FIELDS = {
    "GenericJob": ["replicaSpecs[].type", "restartPolicy.policy", "restartPolicy.limit", "successRules", "failureRules", "service.ports", "cleanUpPolicy"],
    "every kind": ["runMode.debug.enabled", "skipInitContainer", "runMode.pause.enabled", "resumeSpecs[].type", "t9kScheduler.queue", "priority",
                   "status.phase", "status.conditions", "status.tasks[].type", "status.aggregate"],
    "PyTorchTrainingJob": ["scalingWeight", "torchrunConfig.enabled", "torchrunConfig.maxRestarts", "torchrunConfig.procPerNode", "torchrunConfig.rdzvBackend",
                           "torchrunConfig.extraOptions", "elastic.enabled", "runPolicy.activeDeadlineSeconds", "runPolicy.backoffLimit",
                           "runPolicy.cleanUpPolicy", "tensorboardSpec.image", "trainingLogFilesets", "logDir.pvc", "logDir.s3", "suspend",
                           "scheduler.t9kScheduler.queue", "status.tensorboard", "status.backoffCount"],
    "DeepSpeedJob": ["worker.replicas", "worker.restartPolicy", "config.run.python", "config.slotsPerWorker", "config.localRank", "config.autotune",
                     "config.otherArgs", "config.customCommand", "disableCustomEnv"],
    "ColossalAIJob": ["launcher.image", "worker.replicas", "ssh.authMountPath", "runPolicy.cleanUpWorkers", "torchConfig.procPerWorker",
                      "replicaSpecs[].restartPolicy.policy"],
}


def test_every_api_reference_field_has_a_row() -> None:
    missing = [f"{kind}: {f}" for kind, fields in API_FIELDS.items() for f in fields if f not in DOC]
    assert missing == []


def _lint_case_ids() -> list[str]:
    from test_lint_rules import CASES

    return [c.id for c in CASES]


CITED = sorted(set(re.findall(r"`((?:[a-z_/0-9]+\.py)(?:::[a-z_0-9*]+)?|golden/[a-z0-9*-]+|lint_rules\[[a-z0-9*.-]+\]|scenarios_t9k::[a-z_0-9*]+)`", DOC)))


@pytest.mark.parametrize("ref", CITED)
def test_every_cited_test_exists(ref: str) -> None:
    if ref.startswith("golden/"):
        assert [p for p in (TESTS / "golden").iterdir() if fnmatch.fnmatch(p.name, ref.removeprefix("golden/"))], ref
        return
    if ref.startswith("lint_rules["):
        assert fnmatch.filter(_lint_case_ids(), ref[len("lint_rules[") : -1]), ref
        return
    path, _, name = ref.replace("scenarios_t9k::", "runtime/test_scenarios_t9k.py::").partition("::")
    file = TESTS / path if (TESTS / path).is_file() else TESTS / "runtime" / path
    assert file.is_file(), ref
    if name:
        assert fnmatch.filter(re.findall(r"^def (test_\w+)", file.read_text(encoding="utf-8"), re.MULTILINE), name), ref


def test_the_doc_cites_something() -> None:
    assert len(CITED) > 30
