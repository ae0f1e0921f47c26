"""Time flatjob's compiled Kubernetes validator against jsonschema on the same trimmed schema.

Run with flatjob importable (installed, or through a namespace folder until it is):

    python bench/kube_validate.py [--pods 1000]

Both validators collect every error of 1000 realistic ~1 KB Pods. jsonschema gets a
Draft7Validator built once, with the same format checks, so only the engines differ.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

POD = "io.k8s.api.core.v1.Pod"


def make_pod(rank: int) -> dict[str, Any]:
    """Build one worker Pod of a distributed training job, about 1 KB as JSON."""
    name = f"mnist-worker-{rank}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": {"app.kubernetes.io/name": "mnist", "flatjob.io/rank": str(rank),
                       "flatjob.io/role": "worker"},
            "annotations": {"flatjob.io/spec-hash": "3f2a9c1d"},
        },
        "spec": {
            "restartPolicy": "Never",
            "hostname": name,
            "subdomain": "mnist",
            "containers": [{
                "name": "pytorch",
                "image": "registry.example.com/ml/pytorch:2.3.1-cuda12.1",
                "imagePullPolicy": "IfNotPresent",
                "command": ["torchrun"],
                "args": ["--nnodes=4", "--nproc-per-node=8", f"--node-rank={rank}",
                         "--master-addr=mnist-worker-0.mnist", "--master-port=29500",
                         "train.py", "--epochs=10"],
                "env": [
                    {"name": "WORLD_SIZE", "value": "32"},
                    {"name": "RANK", "value": str(rank)},
                    {"name": "NCCL_DEBUG", "value": "INFO"},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                ],
                "ports": [{"name": "c10d", "containerPort": 29500, "protocol": "TCP"}],
                "resources": {
                    "limits": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": 8},
                    "requests": {"cpu": "15500m", "memory": "60Gi", "nvidia.com/gpu": 8},
                },
                "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True},
                                 {"name": "dshm", "mountPath": "/dev/shm"}],
            }],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "mnist-data"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
        },
    }


def jsonschema_validator(schema: dict[str, Any], definition: str) -> Any:
    """Build a jsonschema Draft7Validator for one definition, with flatjob's format checks."""
    from jsonschema import Draft7Validator, FormatChecker

    from flatjob.compiler.kube.formats import FORMATS

    checker = FormatChecker(formats=())
    for name, (accepts, _) in FORMATS.items():
        checker.checks(name)(accepts)
    return Draft7Validator({**schema, "$ref": f"#/definitions/{definition}"},
                           format_checker=checker)


def seconds(run: Any) -> tuple[float, Any]:
    """Time one call."""
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def main() -> int:
    """Print both timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    args = parser.parse_args()
    pods = [make_pod(rank) for rank in range(args.pods)]
    size = sum(len(json.dumps(p)) for p in pods) / len(pods)
    print(f"{args.pods} pods, {size:.0f} bytes each as JSON")

    imported, kube = seconds(lambda: __import__("flatjob.compiler.kube", fromlist=["x"]))
    cold, errors = seconds(lambda: [kube.validate_manifest(p) for p in pods])
    warm, _ = seconds(lambda: [kube.validate_manifest(p) for p in pods])
    print(f"flatjob   import {imported * 1000:6.1f} ms  first run (load+compile) "
          f"{cold:6.3f} s  warm {warm:6.3f} s  errors {sum(map(len, errors))}")

    imported, _ = seconds(lambda: __import__("jsonschema"))
    schema = json.loads(kube.validator.schema_path().read_bytes())
    built, validator = seconds(lambda: jsonschema_validator(schema, POD))
    cold, errors = seconds(lambda: [list(validator.iter_errors(p)) for p in pods])
    warm, _ = seconds(lambda: [list(validator.iter_errors(p)) for p in pods])
    print(f"jsonschema import {imported * 1000:6.1f} ms  build {built:6.3f} s  first run "
          f"{cold:6.3f} s  warm {warm:6.3f} s  errors {sum(map(len, errors))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
