"""Init containers, native sidecars and --only-training with real processes (no torch).

Init containers run first, in order, each to completion; an init container with
restartPolicy Always (a native sidecar) starts at its place among them, runs beside the
training container and is stopped after it; a failing init container fails the pod;
--only-training runs just the training container."""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import run_local

pytestmark = pytest.mark.e2e


def job(out: Path, first_init: str) -> str:
    return f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata:
          name: pod
        spec:
          replicaSpecs:
            - type: master
              replicas: 1
              restartPolicy: Never
              template:
                spec:
                  terminationGracePeriodSeconds: 2
                  initContainers:
                    - name: init-a
                      image: busybox
                      command: [sh, -c, '{first_init}']
                    - name: sidecar
                      image: busybox
                      restartPolicy: Always
                      command: [sh, -c, 'echo up; exec sleep 300']
                    - name: init-b
                      image: busybox
                      command: [sh, -c, 'test -e {out}/a && touch {out}/b && echo b']
                  containers:
                    - name: python
                      image: busybox
                      command: [sh, -c, 'ls {out} | xargs']
        """


def test_init_containers_run_in_order_and_sidecars_beside_the_training_container(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run = run_local(tmp_path, job(out, f"touch {out}/a; echo a"), tag=tag, timeout=30)
    assert run.code == 0, run.explain()
    lines = run.stdout.splitlines()
    assert lines.index("[pod-master-0/init-a] a") < lines.index("[pod-master-0/init-b] b") < lines.index("[pod-master-0] a b")
    assert "[pod-master-0/sidecar] up" in lines
    assert run.seconds < 10  # the sidecar was stopped once the training container ended


def test_a_failing_init_container_fails_the_pod_unless_only_training(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run = run_local(tmp_path, job(out, "echo no; exit 3"), tag=tag, timeout=30)
    assert run.code == 1, run.explain()
    assert "[pod-master-0/init-a] no" in run.stdout
    assert "pod-master-0 failed with exit code 3 in an init container (Init:Error)" in run.stderr
    run = run_local(tmp_path, job(out, "echo no; exit 3"), "--only-training", tag=tag, timeout=30)
    assert run.code == 0, run.explain()
    assert "init-a" not in run.stdout and "[pod-master-0] " in run.stdout
