"""Finish rules with real processes (no torch): GenericJob success rules stop the replicas
still running once the rule is met; activeDeadlineSeconds fails a job that runs too long.
Both come from the runtime's own decisions; run-local stops what is left afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import run_local

pytestmark = pytest.mark.e2e


def generic(rules: str, worker_0: str, worker_1: str) -> str:
    return f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata:
          name: rules
        spec:
          {rules}
          replicaSpecs:
            - type: worker
              replicas: 2
              restartPolicy:
                policy: Never
              template:
                spec:
                  containers:
                    - name: main
                      image: busybox
                      command: [sh, -c, 'if [ "$POD" = rules-worker-0 ]; then {worker_0}; else {worker_1}; fi']
                      env:
                        - name: POD
                          valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
        """


def test_success_rule_met_by_one_replica_ends_the_job_and_stops_the_other(tmp_path: Path, tag: str) -> None:
    run = run_local(tmp_path, generic('successRules: [{"worker": [0]}]', "echo done", "exec sleep 300"), tag=tag, timeout=30)
    assert run.code == 0, run.explain()
    assert "[rules-worker-0] done" in run.stdout
    assert "GenericJob rules Succeeded" in run.stderr


def test_active_deadline_fails_a_job_that_runs_too_long(tmp_path: Path, tag: str) -> None:
    run = run_local(tmp_path, """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata:
          name: slow
        spec:
          runPolicy:
            activeDeadlineSeconds: 1
          replicaSpecs:
            - type: worker
              replicas: 2
              restartPolicy: OnFailure
              template:
                spec:
                  containers:
                    - name: python
                      image: busybox
                      command: [sleep, "300"]
        """, tag=tag, timeout=30)
    assert run.code == 1, run.explain()
    assert "DeadlineExceeded" in run.stderr and "activeDeadlineSeconds (1s)" in run.stderr
    assert run.seconds < 10
