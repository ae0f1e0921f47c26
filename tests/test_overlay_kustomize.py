"""schemas/kustomize/openapi.json: plain kustomize merges T9k jobs with T9k's list keys.

Covers: without the schema kustomize replaces replicaSpecs whole (kustomize#1027, the reason
for the file); with it, one replicaSpec is patched by type, one env var lands in one
container, a volumeMount merges by name, and the Kubernetes kinds in the file still merge
containers by name. Needs kubectl (its built-in kustomize); skipped without it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from overlaykit import DDP, container, env, replica, write

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schemas" / "kustomize" / "openapi.json"

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")

PATCH = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata: {name: ddp}
spec:
  replicaSpecs:
    - type: worker
      replicas: 7
      template:
        spec:
          containers:
            - name: pytorch
              env:
                - {name: C, value: "3"}
              volumeMounts:
                - {name: data, readOnly: true}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
        - name: web
          env:
            - {name: C, value: "3"}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: nginx
          env:
            - {name: A, value: "1"}
"""


def build(tmp: Path, with_schema: bool) -> dict[str, dict]:
    write(tmp / "base", {"job.yaml": DDP, "web.yaml": DEPLOYMENT, "kustomization.yaml": "resources: [job.yaml, web.yaml]\n"})
    kustomization = "resources: [../base]\npatches:\n  - path: patch.yaml\n"
    if with_schema:
        kustomization += "openapi:\n  path: openapi.json\n"
    write(tmp / "env", {"kustomization.yaml": kustomization, "patch.yaml": PATCH})
    if with_schema:
        shutil.copy(SCHEMA, tmp / "env" / "openapi.json")
    out = subprocess.run(["kubectl", "kustomize", str(tmp / "env")], capture_output=True, text=True, timeout=60, check=True)
    return {d["kind"]: d for d in yaml.safe_load_all(out.stdout)}


def test_without_the_schema_kustomize_replaces_the_list(tmp_path: Path) -> None:
    job = build(tmp_path, with_schema=False)["PyTorchTrainingJob"]
    assert [r["type"] for r in job["spec"]["replicaSpecs"]] == ["worker"]  # the master is gone


def test_with_the_schema_lists_merge_by_their_keys(tmp_path: Path) -> None:
    out = build(tmp_path, with_schema=True)
    job = out["PyTorchTrainingJob"]
    assert sorted(r["type"] for r in job["spec"]["replicaSpecs"]) == ["master", "worker"]
    assert (replica(job, "worker")["replicas"], replica(job, "master")["replicas"]) == (7, 1)
    assert env(job, "worker", "pytorch") == {"A": "1", "B": "2", "C": "3"}
    assert env(job, "worker", "sidecar") == {"A": "1"}
    assert env(job, "master", "pytorch") == {"A": "1", "B": "2"}
    assert container(job, "worker", "pytorch")["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True}]
    web = out["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert web["image"] == "nginx" and sorted(e["name"] for e in web["env"]) == ["A", "C"]
