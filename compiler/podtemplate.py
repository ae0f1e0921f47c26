"""Read-only helpers over user pod templates (raw dicts checked by the Kubernetes schema), and
the digest of a job's set of PodTemplates that the compiler writes and the runtime checks."""

from __future__ import annotations

import hashlib
from typing import Any

from .digits import INT64_MAX, bounded

# The container that trains, per kind (T9k docs): the one with this name, else the first.
TRAINING_CONTAINER = {"PyTorchTrainingJob": "python", "DeepSpeedJob": "worker", "ColossalAIJob": "worker", "GenericJob": None}

# Extended resources that count as the replica's GPUs for procPerNode: gpu.
ACCELERATORS = ("nvidia.com/gpu", "amd.com/gpu", "hygon.com/dcu", "huawei.com/Ascend910", "intel.com/gpu")


def containers_of(template: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The containers of a pod template, tolerating malformed input (checked elsewhere)."""
    spec = template.get("spec") if isinstance(template, dict) else None
    cs = spec.get("containers") if isinstance(spec, dict) else None
    return [c for c in cs if isinstance(c, dict)] if isinstance(cs, list) else []


def training_index(kind: str, template: dict[str, Any] | None) -> int | None:
    """Index of the training container: the kind's named one, else the first (T9k docs)."""
    cs = containers_of(template)
    if not cs:
        return None
    wanted = TRAINING_CONTAINER.get(kind)
    return next((i for i, c in enumerate(cs) if wanted is not None and c.get("name") == wanted), 0)


def launch_index(kind: str, rtype: str, template: dict[str, Any] | None) -> int | None:
    """Index of the container flatjob gives its own command: a ColossalAI launcher's `launcher`
    container (else the first), else the training container."""
    if rtype != "launcher":
        return training_index(kind, template)
    names = [c.get("name") for c in containers_of(template)]
    return names.index("launcher") if "launcher" in names else 0


def accelerator_count(container: dict[str, Any]) -> int | None:
    """GPUs (or other accelerators) the container asks for, from limits then requests."""
    res = container.get("resources") or {}
    for section in ("limits", "requests"):
        values = res.get(section) or {}
        for name in ACCELERATORS:
            v = values.get(name)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
            if (count := bounded(v, 0, INT64_MAX)) is not None:
                return count
    return None


def literal_env(container: dict[str, Any], name: str) -> str | None:
    """The literal value the container gives env var `name`, if any (valueFrom is not literal)."""
    for e in container.get("env") or []:
        if isinstance(e, dict) and e.get("name") == name and isinstance(e.get("value"), str):
            return e["value"]
    return None


def templates_digest(names: list[str]) -> str:
    """`<count>:<digest of the pod names in rank order>`: the set of PodTemplates a record
    revision renders (annotation flatjob.dev/pod-templates), so the runtime acts only once
    the PodTemplates it sees are that set."""
    ordered = "\n".join(names)
    return f"{len(names)}:{hashlib.sha256(ordered.encode()).hexdigest()[:16]}"
