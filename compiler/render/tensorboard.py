"""spec.tensorboardSpec as a plain Deployment and Service reading the log PVCs (no T9k needed).

T9k creates a `TensorBoard` object, which needs T9k's operator; flatjob renders what that
object would run: one tensorboard pod mounting the log PVCs read-only, and a Service.  The pod
is hardened like the runtime's (non-root, no service-account token, read-only root, no
capabilities); tensorboard writes only its info file, in an emptyDir at /tmp.  Log sources
flatjob cannot mount (S3, HTTP, t9k://minio filesets) are left out, and lint says so (FJ321).
"""

from __future__ import annotations

import re
from typing import Any

from .. import keys
from ..plan import JobPlan
from ..podset import tensorboard_name
from .meta import common_labels, metadata
from .scheduling import T9K_SCHEDULER_NAME

TB_PORT = 6006
MOUNT_ROOT = "/t9k/tensorboard"
TB_USER = 65532  # the runtime's non-root uid; tensorboard only reads the mounted logs
_T9K_URL = re.compile(r"t9k://pvc/([^/]+)(/.*)?")
# Defaults used when tensorboardSpec.resources is unset: a request, so the pod is scheduled
# where it fits, and no limit, so a large log folder is never OOM-killed by a guess.
DEFAULT_REQUESTS = {"cpu": "100m", "memory": "256Mi"}


SourcePath = tuple[str | int, ...]  # where in the job document a value was written
SPEC_PATH: SourcePath = ("spec", "tensorboardSpec")


def log_sources(spec: Any) -> list[tuple[str, str, SourcePath, SourcePath]]:
    """(pvc, path inside it, where the pvc and the path are written) for every PVC log location,
    deprecated filesets first: lint reports a rendered value at the line it came from."""
    out = []
    for i, url in enumerate(spec.training_log_filesets):
        m = _T9K_URL.fullmatch(url)
        if m:
            at = (*SPEC_PATH, "trainingLogFilesets", i)
            out.append((m.group(1), (m.group(2) or "/").strip("/"), at, at))
    if spec.log_dir is not None:
        for i, pvc in enumerate(spec.log_dir.pvc):
            at = (*SPEC_PATH, "logDir", "pvc", i)
            for j, sub in enumerate(pvc.sub_path or [""]):
                out.append((pvc.name, sub.strip("/"), (*at, "name"), (*at, "subPath", j) if pvc.sub_path else (*at, "name")))
    return out


def log_locations(spec: Any) -> list[tuple[str, str]]:
    """(pvc, path inside it) for every PVC log location, deprecated filesets first, deduplicated."""
    return list(dict.fromkeys((pvc, sub) for pvc, sub, _, _ in log_sources(spec)))


def tensorboard_args(locations: list[tuple[str, str]]) -> list[str]:
    """tensorboard flags: one --logdir, or --logdir_spec naming each location."""
    paths = [f"{MOUNT_ROOT}/{pvc}/{sub}".rstrip("/") for pvc, sub in locations]
    logdir = f"--logdir={paths[0]}" if len(paths) == 1 else "--logdir_spec=" + ",".join(f"{pvc}-{i}:{p}" for i, ((pvc, _), p) in enumerate(zip(locations, paths, strict=True)))
    return [logdir, "--host=0.0.0.0", f"--port={TB_PORT}"]


def _probe(period: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": period, "failureThreshold": failures}


def _container(spec: Any, locations: list[tuple[str, str]], pvcs: list[str]) -> dict[str, Any]:
    mounts = [{"name": f"logs-{i}", "mountPath": f"{MOUNT_ROOT}/{pvc}", "readOnly": True} for i, pvc in enumerate(pvcs)]
    return {
        "name": "tensorboard",
        "image": spec.image,
        "command": ["tensorboard"],
        "args": tensorboard_args(locations),
        "ports": [{"name": "http", "containerPort": TB_PORT, "protocol": "TCP"}],
        "readinessProbe": _probe(10, 3),
        "livenessProbe": _probe(30, 6),  # a slow first load of a large log folder is not a crash
        "resources": spec.resources or {"requests": dict(DEFAULT_REQUESTS)},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [*mounts, {"name": "tmp", "mountPath": "/tmp"}],
    }


def _scheduling(spec: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """T9k Scheduler for a lone pod: the queue label and schedulerName (T9k manual, use-queue.md)."""
    t9k = spec.scheduler.t9k_scheduler if spec.scheduler is not None else None
    if t9k is None:
        return {}, {}
    return {keys.T9K_QUEUE: t9k.queue}, {"schedulerName": T9K_SCHEDULER_NAME}


def pod_spec(spec: Any) -> dict[str, Any] | None:
    """The TensorBoard pod's spec, or None when it has no PVC to read (lint checks this same spec)."""
    locations = log_locations(spec)
    if not locations:
        return None  # nothing flatjob can mount: lint warns (FJ321)
    pvcs = list(dict.fromkeys(pvc for pvc, _ in locations))
    volumes = [{"name": f"logs-{i}", "persistentVolumeClaim": {"claimName": pvc, "readOnly": True}} for i, pvc in enumerate(pvcs)]
    return {
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": TB_USER, "runAsGroup": TB_USER, "seccompProfile": {"type": "RuntimeDefault"}},
        **_scheduling(spec)[1],
        "containers": [_container(spec, locations, pvcs)],
        "volumes": [*volumes, {"name": "tmp", "emptyDir": {}}],
    }


def render_tensorboard(plan: JobPlan) -> list[dict[str, Any]]:
    """Deployment + Service for the job's TensorBoard, or nothing when it has no PVC to read."""
    spec = getattr(plan.job.spec, "tensorboard_spec", None)
    pod = pod_spec(spec) if spec is not None else None
    if pod is None:
        return []
    name = tensorboard_name(plan.name)
    labels = {**common_labels(plan, "tensorboard"), keys.RUNTIME_FOR: plan.name, keys.ROLE: "tensorboard"}
    match = {keys.RUNTIME_FOR: plan.name, keys.ROLE: "tensorboard"}
    sched_labels = _scheduling(spec)[0]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(plan, name, labels),
        "spec": {
            "replicas": 0 if spec.suspend else 1,  # suspend: T9k keeps the Service, deletes the pod
            "selector": {"matchLabels": match},
            "template": {"metadata": {"labels": {**labels, **sched_labels}}, "spec": pod},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(plan, name, labels),
        "spec": {"selector": match, "ports": [{"name": "http", "port": TB_PORT, "protocol": "TCP", "targetPort": "http"}]},
    }
    return [deployment, service]
