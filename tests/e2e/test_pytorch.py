"""PyTorchTrainingJob end to end with real torch on CPU (gloo): torchrun 2 nodes x 2
processes, plain master/worker DDP, and an elastic torchrun job that loses a node.

Each job's script records the process group it saw in E2E_OUT; the test checks the
rendered command line and env formed it.  Skipped where torch is not installed (the check
does not import torch here: each run-local pod imports it anyway).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from .kit import SCRIPTS, free_port, run_local

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (pip install torch==2.13.0)"),
]

DOWNWARD = """
                        - name: POD_NAME
                          valueFrom: {fieldRef: {fieldPath: metadata.name}}
                        - name: POD_IP
                          valueFrom: {fieldRef: {fieldPath: status.podIP}}
"""


def results(out: Path, pattern: str = "rank-*.json") -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob(pattern))]


def test_torchrun_two_nodes_two_processes_all_reduce(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run = run_local(tmp_path, f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata:
          name: allreduce
        spec:
          torchrunConfig:
            enabled: true
            procPerNode: "2"
            rdzvBackend: c10d
          replicaSpecs:
            - type: node
              replicas: 2
              restartPolicy: Never
              template:
                spec:
                  containers:
                    - name: python
                      image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
                      command: [python]
                      args: [{SCRIPTS / 'allreduce.py'}]
                      env:
                        - name: MASTER_PORT
                          value: "{free_port()}"
                        - name: E2E_OUT
                          value: {out}{DOWNWARD}""", tag=tag)
    assert run.code == 0, run.explain()
    seen = results(out)
    assert sorted(r["rank"] for r in seen) == [0, 1, 2, 3]
    assert {r["world_size"] for r in seen} == {4}
    assert {r["sum"] for r in seen} == {1 + 2 + 3 + 4}
    # two processes per pod, each pod on its own loopback address
    pods = {r["env"]["POD_NAME"]: r["env"]["POD_IP"] for r in seen}
    assert pods == {"allreduce-node-0": "127.0.1.1", "allreduce-node-1": "127.0.1.2"}
    assert "[allreduce-node-1] " in run.stdout
    assert "Succeeded" in run.stderr


def test_plain_master_worker_one_process_per_pod(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    template = f"""
              template:
                spec:
                  containers:
                    - name: python
                      image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
                      command: [python, {SCRIPTS / 'allreduce.py'}]
                      env:
                        - name: E2E_OUT
                          value: {out}{DOWNWARD}"""
    run = run_local(tmp_path, f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata:
          name: plain
        spec:
          replicaSpecs:
            - type: master
              replicas: 1
              restartPolicy: Never{template}
                        - name: MASTER_PORT
                          value: "{free_port()}"
            - type: worker
              replicas: 2
              restartPolicy: Never{template}
        """, tag=tag)
    assert run.code == 0, run.explain()
    seen = results(out)
    assert [r["rank"] for r in seen] == [0, 1, 2]
    assert {r["world_size"] for r in seen} == {3}
    assert {r["sum"] for r in seen} == {1 + 2 + 3}
    # flatjob's plain-mode env, rank 0 on the master, MASTER_ADDR its loopback address
    assert [(r["env"]["POD_NAME"], r["env"]["RANK"], r["env"]["WORLD_SIZE"]) for r in seen] == [
        ("plain-master-0", "0", "3"), ("plain-worker-0", "1", "3"), ("plain-worker-1", "2", "3"),
    ]
    assert {r["env"]["MASTER_ADDR"] for r in seen} == {"127.0.1.1"}


def test_elastic_job_loses_a_node_and_finishes_with_fewer(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    # Short c10d timeouts so the lost node is noticed in ~2 s, not ~45 s; flatjob merges this
    # --rdzv_conf into its own is_host one (torchrun keeps only the last --rdzv_conf).
    conf = "--rdzv_conf=join_timeout=30,last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=2"
    run = run_local(tmp_path, f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata:
          name: elastic
        spec:
          torchrunConfig:
            enabled: true
            procPerNode: "1"
            rdzvBackend: c10d
            maxRestarts: 3
            extraOptions: ["{conf}"]
          elastic:
            enabled: true
            minReplicas: 1
            maxReplicas: 2
          replicaSpecs:
            - type: node
              replicas: 2
              restartPolicy: Never
              template:
                spec:
                  containers:
                    - name: python
                      image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
                      command: [python]
                      args: [{SCRIPTS / 'elastic.py'}]
                      env:
                        - name: MASTER_PORT
                          value: "{free_port()}"
                        - name: E2E_OUT
                          value: {out}
                        - name: E2E_LOSE
                          value: elastic-node-1{DOWNWARD}""", tag=tag)
    assert run.code == 0, run.explain()
    first = results(out, "round-0-rank-*.json")
    assert sorted((r["pod"], r["world_size"]) for r in first) == [("elastic-node-0", 2), ("elastic-node-1", 2)]
    done = results(out, "done-rank-*.json")
    assert [(d["pod"], d["world_size"], d["total"]) for d in done] == [("elastic-node-0", 1, 4.0)]
    assert done[0]["restart"] >= 1  # the survivor's agent re-formed the group
    assert "elastic-node-1 failed with exit code 137" in run.stderr  # the runtime saw the lost node
    assert "Succeeded" in run.stderr
