"""Helpers for overlay tests: write a job and an overlay folder, apply, and look at the result.

    merged, problems = overlay_run(tmp_path, JOB, "patches: [...]")
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from flatjob.compiler.errors import Diagnostic
from flatjob.compiler.loader import load_paths
from flatjob.compiler.overlay import load_overlays

DDP = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: ddp
  labels: {team: vision}
spec:
  replicaSpecs:
    - type: master
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [python, train.py]
              env:
                - {name: A, value: "1"}
                - {name: B, value: "2"}
    - type: worker
      replicas: 3
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [python, train.py]
              env:
                - {name: A, value: "1"}
                - {name: B, value: "2"}
              ports:
                - {name: metrics, containerPort: 8080}
              volumeMounts:
                - {name: data, mountPath: /data}
            - name: sidecar
              image: busybox:1.36
              command: [sleep, inf]
              env:
                - {name: A, value: "1"}
          volumes:
            - name: data
              emptyDir: {}
"""


def write(folder: Path, files: dict[str, str]) -> None:
    """Write files (dedented) under folder."""
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def overlay_run(tmp: Path, jobs: str | dict[str, str], overlay: str, extra: dict[str, str] | None = None) -> tuple[list[Any], list[Diagnostic]]:
    """Apply `overlay` (overlay.yaml's text) to the jobs; returns each job's data and the problems."""
    job_files = {"job.yaml": jobs} if isinstance(jobs, str) else jobs
    write(tmp / "jobs", job_files)
    write(tmp / "ov", {"overlay.yaml": overlay, **(extra or {})})
    loaded = load_paths([str(tmp / "jobs")])
    docs, problems = load_overlays([tmp / "ov"])(loaded.jobs)
    return [d.data for d in docs], problems


def replica(job: dict[str, Any], rtype: str) -> dict[str, Any]:
    """The replica spec of one type."""
    return next(r for r in job["spec"]["replicaSpecs"] if r["type"] == rtype)


def container(job: dict[str, Any], rtype: str, name: str) -> dict[str, Any]:
    """One container of one replica type."""
    return next(c for c in replica(job, rtype)["template"]["spec"]["containers"] if c["name"] == name)


def env(job: dict[str, Any], rtype: str, name: str) -> dict[str, str]:
    """A container's env as name -> value."""
    return {e["name"]: e.get("value") for e in container(job, rtype, name).get("env", [])}
