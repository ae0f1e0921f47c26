"""spec.tensorboardSpec as a plain Deployment and Service reading the log PVCs (no T9k needed)."""

from __future__ import annotations

import re
from typing import Any

from .. import keys
from ..plan import JobPlan
from .meta import common_labels, metadata

TB_PORT = 6006
MOUNT_ROOT = "/t9k/tensorboard"
_T9K_URL = re.compile(r"t9k://pvc/([^/]+)(/.*)?")


def tensorboard_name(job: str) -> str:
    """Name of the TensorBoard Deployment and Service."""
    return f"{job}-tensorboard"


def log_locations(spec: Any) -> list[tuple[str, str]]:
    """(pvc, path inside it) for every log location, deprecated filesets first, deduplicated."""
    out: list[tuple[str, str]] = []
    for url in spec.training_log_filesets:
        m = _T9K_URL.fullmatch(url)
        if m:
            out.append((m.group(1), (m.group(2) or "/").strip("/")))
    if spec.log_dir is not None:
        for pvc in spec.log_dir.pvc:
            for sub in pvc.sub_path or [""]:
                out.append((pvc.name, sub.strip("/")))
    return list(dict.fromkeys(out))


def tensorboard_args(locations: list[tuple[str, str]]) -> list[str]:
    """tensorboard flags: one --logdir, or --logdir_spec naming each location."""
    paths = [f"{MOUNT_ROOT}/{pvc}/{sub}".rstrip("/") for pvc, sub in locations]
    logdir = f"--logdir={paths[0]}" if len(paths) == 1 else "--logdir_spec=" + ",".join(f"{pvc}-{i}:{p}" for i, ((pvc, _), p) in enumerate(zip(locations, paths, strict=True)))
    return [logdir, "--host=0.0.0.0", f"--port={TB_PORT}"]


def render_tensorboard(plan: JobPlan) -> list[dict[str, Any]]:
    """Deployment + Service for the job's TensorBoard, or nothing when none is asked for."""
    spec = getattr(plan.job.spec, "tensorboard_spec", None)
    if spec is None:
        return []
    locations = log_locations(spec)
    if not locations:
        return []
    name = tensorboard_name(plan.name)
    labels = {**common_labels(plan, "tensorboard"), keys.RUNTIME_FOR: plan.name, keys.ROLE: "tensorboard"}
    match = {keys.RUNTIME_FOR: plan.name, keys.ROLE: "tensorboard"}
    pvcs = list(dict.fromkeys(pvc for pvc, _ in locations))
    container: dict[str, Any] = {
        "name": "tensorboard",
        "image": spec.image,
        "command": ["tensorboard"],
        "args": tensorboard_args(locations),
        "ports": [{"name": "http", "containerPort": TB_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10},
        "volumeMounts": [{"name": f"logs-{i}", "mountPath": f"{MOUNT_ROOT}/{pvc}", "readOnly": True} for i, pvc in enumerate(pvcs)],
    }
    if spec.resources:
        container["resources"] = spec.resources
    volumes = [{"name": f"logs-{i}", "persistentVolumeClaim": {"claimName": pvc, "readOnly": True}} for i, pvc in enumerate(pvcs)]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(plan, name, labels),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": match},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container], "volumes": volumes}},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(plan, name, labels),
        "spec": {"selector": match, "ports": [{"name": "http", "port": TB_PORT, "protocol": "TCP", "targetPort": "http"}]},
    }
    return [deployment, service]
