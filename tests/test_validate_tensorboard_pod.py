"""The TensorBoard pod is checked like the job's own pods (compiler/validate/tensorboardpod.py).

Each row is a tensorboardSpec and what lint must say: the code, words of the message and the
line of the job file the value is written on (review 21, round 5, #4 and #6: each passed lint,
and the Deployment flatjob rendered from it was refused, or split --logdir_spec).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lintkit import lint_text, pytorch

IMAGE, FILESETS, PVC, RESOURCES = 7, 8, 10, 11  # the lines of the fields _job writes


def _job(image: str = "tensorflow/tensorflow:2.14.0", filesets: str = "", pvc: str = "{name: logs, subPath: [runs]}", resources: str = "{}") -> str:
    return pytorch(spec=f"tensorboardSpec:\n  image: {image}\n  trainingLogFilesets: [{filesets}]\n  logDir:\n    pvc: [{pvc}]\n  resources: {resources}")


CASES = [
    # (id, job, code or None, words, line)
    ("claim-name-from-fileset", _job(filesets="'t9k://pvc/Bad_PVC/a'"), "FJ305", "claimName 'Bad_PVC'", FILESETS),
    ("claim-name-from-log-dir", _job(pvc="{name: Bad_PVC, subPath: [a]}"), "FJ305", "claimName 'Bad_PVC'", PVC),
    ("image-leading-space", _job(image="' tensorflow/tensorflow:2.14.0'"), "FJ204", "must not have leading or trailing spaces", IMAGE),
    ("request-over-limit", _job(resources="{requests: {cpu: '2'}, limits: {cpu: '1'}}"), "FJ204", "requests.cpu 2 is more than its limit 1", RESOURCES),
    ("negative-memory", _job(resources="{requests: {memory: -1Gi}}"), "FJ204", "no negative quantity", RESOURCES),
    ("resource-without-domain", _job(resources="{limits: {gpu: 1}}"), "FJ204", "resource name 'gpu'", RESOURCES),
    ("fileset-comma", _job(filesets="'t9k://pvc/logs/a,b', 't9k://pvc/logs2/c'"), "FJ204", "splits tensorboard's --logdir_spec", FILESETS),
    ("fileset-dotdot", _job(filesets="'t9k://pvc/logs/../x'"), "FJ204", "leaves the PVC's mount", FILESETS),
    ("sub-path-comma", _job(pvc="{name: logs, subPath: ['a,b']}"), "FJ204", "splits tensorboard's --logdir_spec", PVC),
    ("plain", _job(filesets="'t9k://pvc/logs/a'", resources="{requests: {cpu: '1'}, limits: {cpu: '2'}}"), None, "", 0),
]


@pytest.mark.parametrize(("text", "code", "words", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_tensorboard_pod_is_checked_at_the_line_its_value_is_written(tmp_path: Path, text: str, code: str | None, words: str, line: int) -> None:
    found = [d for d in lint_text(tmp_path, text) if d.is_error]
    if code is None:
        assert not found, [(d.code, d.message) for d in found]
    else:
        assert [(d.code, d.line) for d in found] == [(code, line)] and words in found[0].message, [(d.code, d.line, d.message) for d in found]
