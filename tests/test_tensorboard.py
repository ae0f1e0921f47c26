"""spec.tensorboardSpec rendered as a Deployment + Service (compiler/render/tensorboard.py).

T9k's TensorBoardSpec (tensorboard API reference): PVC sources are mounted read-only, MinIO,
S3 and HTTP sources are left out (lint FJ321), no PVC renders nothing, suspend keeps the
Service with no pod, scheduler.t9kScheduler.queue gives T9k's queue label and schedulerName;
the pod is hardened like the runtime's.
"""

from __future__ import annotations

from typing import Any

import pytest
from manifestkit import compiled_objects

JOB = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata: {{name: tb}}
spec:
  tensorboardSpec:
    image: tensorflow/tensorflow:2.14.0
{tb}
  replicaSpecs:
    - type: worker
      template: {{spec: {{containers: [{{name: python, image: p, command: [python, train.py]}}]}}}}
"""


def rendered(tb: str) -> list[dict[str, Any]]:
    """The TensorBoard's objects (labelled role tensorboard), or [] when none is rendered."""
    return [o for o in compiled_objects(JOB.format(tb=tb)) if o["metadata"]["labels"].get("flatjob.dev/role") == "tensorboard"]


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]


PVC = "    logDir: {pvc: [{name: logs, subPath: [run1]}]}"


def test_hardened_like_the_runtime() -> None:
    spec = pod_spec(rendered(PVC))
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}}
    container = spec["containers"][0]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]  # tensorboard's info file
    assert {"name": "tmp", "emptyDir": {}} in spec["volumes"]
    assert container["livenessProbe"]["httpGet"] == container["readinessProbe"]["httpGet"] == {"path": "/", "port": "http"}
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}}  # no limit: never OOM-killed by a guess


def test_user_resources_are_kept() -> None:
    spec = pod_spec(rendered(PVC + "\n    resources: {limits: {memory: 4Gi}}"))
    assert spec["containers"][0]["resources"] == {"limits": {"memory": "4Gi"}}


def test_suspend_keeps_the_service_and_runs_no_pod() -> None:
    objects = rendered(PVC + "\n    suspend: true")
    assert next(o for o in objects if o["kind"] == "Deployment")["spec"]["replicas"] == 0
    assert [o["kind"] for o in objects] == ["Deployment", "Service"]


def test_t9k_scheduler_queue() -> None:
    objects = rendered(PVC + "\n    scheduler: {t9kScheduler: {queue: research}}")
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert deployment["spec"]["template"]["metadata"]["labels"]["scheduler.tensorstack.dev/queue"] == "research"
    assert deployment["spec"]["template"]["spec"]["schedulerName"] == "t9k-scheduler"
    assert "scheduler.tensorstack.dev/queue" not in deployment["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(
    "tb",
    [
        "    resources: {limits: {cpu: '1'}}",
        "    trainingLogFilesets: [t9k://minio/cred/bucket/run1]",
        "    logDir: {s3: {secretRef: {name: cred}, uri: [s3://b/run1]}, http: {url: [http://x/run1]}}",
    ],
    ids=["image-and-resources-only", "minio", "s3-and-http"],
)
def test_no_pvc_renders_no_tensorboard(tb: str) -> None:
    assert rendered(tb) == []


def test_only_the_pvc_sources_are_mounted() -> None:
    tb = "    trainingLogFilesets: [t9k://minio/cred/bucket/a, t9k://pvc/logs/b]\n    logDir: {http: {url: [http://x/c]}}"
    spec = pod_spec(rendered(tb))
    assert spec["containers"][0]["args"][0] == "--logdir=/t9k/tensorboard/logs/b"
    assert [v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v] == ["logs"]
