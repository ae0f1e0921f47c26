"""Time flatjob's YAML emitter against json.dumps, PyYAML (libyaml) and ruamel.yaml.

Builds 1000 realistic rendered pods (~1.9 KB of YAML each) and prints the median of five runs
per serialiser, the serialisers taking turns within each run so load spikes hit all alike.  Pods
share their resources, volumes, mounts and tolerations by reference, as a renderer does when it
reuses one replica template; ``--unshared`` deep-copies them instead.

    python bench/emit.py [--pods N] [--runs N] [--unshared]

(with flatjob installed, or ``flatjob.compiler`` importable through PYTHONPATH).
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import yaml
from ruamel.yaml import YAML

from flatjob.compiler.emit import dump_all


def _template() -> dict[str, Any]:
    """Return the parts every pod of one replica type shares."""
    return {
        "resources": {
            "limits": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": 8},
            "requests": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": 8},
        },
        "volumeMounts": [
            {"name": "data", "mountPath": "/workspace"},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "llama3-data"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}},
        ],
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
    }


def _pod(job: str, rank: int, replicas: int, shared: dict[str, Any]) -> dict[str, Any]:
    """Return one rendered PyTorchTrainingJob worker pod, as the compiler would."""
    name = f"{job}-worker-{rank}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-llm",
            "labels": {
                "app.kubernetes.io/name": "flatjob",
                "app.kubernetes.io/component": "worker",
                "tensorstack.dev/owner-name": job,
                "tensorstack.dev/component-type": "worker",
                "flatjob.dev/rank": str(rank),
            },
            "annotations": {
                "kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent",
                "flatjob.dev/spec-hash": "3f2a9c1be07d",
            },
        },
        "spec": {
            "hostname": name,
            "subdomain": job,
            "restartPolicy": "Never",
            "schedulingGates": [{"name": "flatjob.dev/release"}],
            "containers": [
                {
                    "name": "pytorch",
                    "image": "nvcr.io/nvidia/pytorch:24.01-py3",
                    "command": [
                        "torchrun",
                        f"--nnodes={replicas}",
                        "--nproc-per-node=8",
                        "--rdzv-backend=c10d",
                        "--rdzv-endpoint=$(MASTER_ADDR):$(MASTER_PORT)",
                        f"--rdzv-id={job}",
                        "--max-restarts=3",
                        "train.py",
                        "--config",
                        "configs/llama3-8b.yaml",
                    ],
                    "env": [
                        {"name": "MASTER_ADDR", "value": f"{job}-worker-0.{job}"},
                        {"name": "MASTER_PORT", "value": "29500"},
                        {"name": "WORLD_SIZE", "value": str(replicas)},
                        {"name": "RANK", "value": str(rank)},
                        {"name": "NCCL_DEBUG", "value": "INFO"},
                        {"name": "HF_HOME", "value": "/workspace/.cache/huggingface"},
                        {"name": "OMP_NUM_THREADS", "value": "1"},
                        {
                            "name": "POD_IP",
                            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                        },
                    ],
                    "resources": shared["resources"],
                    "volumeMounts": shared["volumeMounts"],
                    "workingDir": "/workspace/llama3",
                }
            ],
            "volumes": shared["volumes"],
            "tolerations": shared["tolerations"],
        },
    }


def _pods(n: int, *, unshared: bool) -> list[dict[str, Any]]:
    """Return ``n`` pods of one job, sharing template objects unless ``unshared``."""
    shared = _template()
    pods = [_pod("llama3-pretrain", rank, n, shared) for rank in range(n)]
    return copy.deepcopy(pods) if unshared else pods


def _ruamel_safe(pods: list[dict[str, Any]]) -> str:
    """Dump with ruamel.yaml's safe dumper (its C emitter when ruamel.yaml.clib is present)."""
    y = YAML(typ="safe")
    y.default_flow_style = False
    buf = io.StringIO()
    y.dump_all(pods, buf)
    return buf.getvalue()


SERIALISERS: dict[str, Callable[[list[dict[str, Any]]], str]] = {
    "json.dumps": json.dumps,
    "flatjob dump_all": dump_all,
    "PyYAML CSafeDumper": lambda pods: yaml.dump_all(
        pods, Dumper=yaml.CSafeDumper, sort_keys=True, default_flow_style=False
    ),
    "ruamel.yaml typ=safe": _ruamel_safe,
}


def _median_seconds(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Return each function's median wall time, taking turns so load spikes hit all alike."""
    times: dict[str, list[float]] = {label: [] for label in fns}
    for _ in range(runs):
        for label, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(t) for label, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    """Print one line per serialiser: median seconds, output size and ratio to json.dumps."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--unshared", action="store_true", help="deep-copy shared sub-objects")
    args = parser.parse_args(argv)
    pods = _pods(args.pods, unshared=args.unshared)
    text = dump_all(pods)
    assert list(yaml.load_all(text, Loader=yaml.CSafeLoader)) == pods, "output does not round-trip"
    size = len(text.encode())
    print(
        f"{args.pods} pods, {size / 1024:.0f} KiB of YAML ({size / args.pods:.0f} B/pod), "
        f"median of {args.runs}, Python {sys.version.split()[0]}, "
        f"{'unshared' if args.unshared else 'shared'} sub-objects"
    )
    calls = {label: (lambda fn=fn: fn(pods)) for label, fn in SERIALISERS.items()}
    medians = _median_seconds(calls, args.runs)
    floor = medians["json.dumps"]
    for label, seconds in medians.items():
        print(f"  {label:<22} {seconds * 1000:8.1f} ms   {seconds / floor:6.1f}x json.dumps")


if __name__ == "__main__":
    main()
