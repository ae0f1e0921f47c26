"""Values the API server refuses, caught at lint (compiler/validate/apivalues.py): one case a row.

Each row is a field of a job and a value: the finding's code and the words of its message.
Kubernetes' own validation is the anchor (pkg/apis/core/validation: ports 1-65535, pod
activeDeadlineSeconds >= 1, no negative quantity; apimachinery: label values, DNS-1123
subdomains); the values beside them that must pass are the edges.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lintkit import lint_text

PYTORCH = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata: {{name: apiv}}
spec:
{spec}
  replicaSpecs:
    - type: worker
      replicas: 1
      template:
{template}
"""
CONTAINER = "          spec:\n            containers:\n              - {{name: w, image: i, {fields}}}"
GENERIC = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {{name: gen}}
spec:
  service:
    ports: [{{name: http, port: {port}, targetPort: {target}}}]
  replicaSpecs:
    - type: worker
      replicas: 1
      template: {{spec: {{containers: [{{name: w, image: i}}]}}}}
"""


def _container(fields: str) -> str:
    return PYTORCH.format(spec="", template=CONTAINER.format(fields=fields))


def _tensorboard(name: str, sub: str) -> str:
    spec = f"  tensorboardSpec:\n    image: tensorflow/tensorflow:2.14.0\n    logDir:\n      pvc: [{{name: {name!r}, subPath: [{sub!r}]}}]"
    return PYTORCH.format(spec=spec, template=CONTAINER.format(fields="command: [python, t.py]"))


CASES = [
    # (id, job text, code or None, words of the message)
    ("port-0", _container("ports: [{containerPort: 0}]"), "FJ204", "containerPort 0 is not a port"),
    ("port-65536", _container("ports: [{containerPort: 65536}]"), "FJ204", "the API server takes 1-65535"),
    ("port-65535", _container("ports: [{containerPort: 65535}]"), None, ""),
    ("host-port-0-is-unset", _container("ports: [{containerPort: 80, hostPort: 0}]"), None, ""),
    ("host-port-70000", _container("ports: [{containerPort: 80, hostPort: 70000}]"), "FJ204", "hostPort 70000"),
    ("negative-gpu", _container("resources: {limits: {nvidia.com/gpu: -1}}"), "FJ204", "no negative quantity"),
    ("negative-cpu-text", _container("resources: {requests: {cpu: '-500m'}}"), "FJ204", "requests.cpu is -500m"),
    ("zero-cpu", _container("resources: {requests: {cpu: 0}}"), None, ""),
    ("quantity-without-digit", _container("resources: {requests: {cpu: '.'}}"), "FJ404", "not a valid quantity"),
    ("deadline-0", PYTORCH.format(spec="", template="          spec:\n            activeDeadlineSeconds: 0\n            containers: [{name: w, image: i}]"), "FJ204", "activeDeadlineSeconds 0"),
    ("deadline-1", PYTORCH.format(spec="", template="          spec:\n            activeDeadlineSeconds: 1\n            containers: [{name: w, image: i}]"), None, ""),
    ("reserved-annotation", PYTORCH.format(spec="", template="          metadata: {annotations: {flatjob.dev/stopped: 'true'}}\n          spec: {containers: [{name: w, image: i}]}"), "FJ313", "flatjob.dev/ annotations are flatjob's own"),
    ("reserved-label", PYTORCH.format(spec="", template="          metadata: {labels: {flatjob.dev/job-name: other}}\n          spec: {containers: [{name: w, image: i}]}"), "FJ313", "flatjob.dev/ labels are flatjob's own"),
    ("queue-with-space", PYTORCH.format(spec="  scheduler: {t9kScheduler: {queue: 'a b'}}", template=CONTAINER.format(fields="command: [x]")), "FJ313", "becomes the label scheduler.tensorstack.dev/queue"),
    ("queue-plain", PYTORCH.format(spec="  scheduler: {t9kScheduler: {queue: team-a.gpu}}", template=CONTAINER.format(fields="command: [x]")), None, ""),
    ("pvc-empty", _tensorboard("", "logs"), "FJ305", "PVC name ''"),
    ("pvc-dotdot", _tensorboard("logs", "../../etc"), "FJ204", "leaves the PVC's mount"),
    ("pvc-comma", _tensorboard("logs", "a,b:c"), "FJ204", "splits tensorboard's --logdir_spec"),
    ("pvc-plain", _tensorboard("logs", "runs/exp-1"), None, ""),
    ("service-port-0", GENERIC.format(port=0, target=8080), "FJ204", "port 0 is not a port"),
    ("service-target-port-name", GENERIC.format(port=80, target="http"), None, ""),
    ("service-target-port-70000", GENERIC.format(port=80, target=70000), "FJ204", "targetPort 70000"),
]


@pytest.mark.parametrize(("text", "code", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_value_the_api_server_refuses_is_found_at_lint(tmp_path: Path, text: str, code: str | None, words: str) -> None:
    found = [d for d in lint_text(tmp_path, text) if d.is_error]
    if code is None:
        assert not found, [(d.code, d.message) for d in found]
    else:
        assert [d.code for d in found] == [code] and words in found[0].message, [(d.code, d.message) for d in found]
