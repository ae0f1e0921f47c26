"""Check the Kubernetes objects embedded in a job (pod templates, env, ports) strictly.

Runs on the raw document, not the typed job, so a pod-template mistake is reported even
when the T9k part of the same document has errors too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import Diagnostic, Severity
from ..loader import Document, PathT

POD_TEMPLATE = "io.k8s.api.core.v1.PodTemplateSpec"
ENV_VAR = "io.k8s.api.core.v1.EnvVar"
RESOURCES = "io.k8s.api.core.v1.ResourceRequirements"
SERVICE_PORT = "io.k8s.api.core.v1.ServicePort"

# Where each kind embeds Kubernetes objects: (path pattern, definition); "*" is every list item.
EMBEDDED: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "GenericJob": ((("spec", "replicaSpecs", "*", "template"), POD_TEMPLATE), (("spec", "service", "ports", "*"), SERVICE_PORT)),
    "PyTorchTrainingJob": ((("spec", "replicaSpecs", "*", "template"), POD_TEMPLATE), (("spec", "tensorboardSpec", "resources"), RESOURCES)),
    "DeepSpeedJob": ((("spec", "worker", "template"), POD_TEMPLATE),),
    "ColossalAIJob": (
        (("spec", "replicaSpecs", "*", "template"), POD_TEMPLATE),
        (("spec", "worker", "template"), POD_TEMPLATE),
        (("spec", "launcher", "env", "*"), ENV_VAR),
        (("spec", "launcher", "resources"), RESOURCES),
    ),
}


def _expand(data: Any, pattern: tuple[str, ...], prefix: PathT = ()) -> Iterator[tuple[PathT, Any]]:
    """Yield (path, value) for every place the pattern matches in the data."""
    if not pattern:
        yield prefix, data
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        if isinstance(data, list):
            for i, item in enumerate(data):
                yield from _expand(item, rest, (*prefix, i))
    elif isinstance(data, dict) and head in data and data[head] is not None:
        yield from _expand(data[head], rest, (*prefix, head))


def check_embedded(doc: Document, kind: str) -> list[Diagnostic]:
    """Validate every embedded Kubernetes object of the document against the pinned schema."""
    from .. import kube  # deferred: the schema is loaded on first use only

    out: list[Diagnostic] = []
    for pattern, definition in EMBEDDED.get(kind, ()):
        for path, value in _expand(doc.data, pattern):
            for v in kube.validate(value, definition):
                out.append(doc.diagnostic(v.code, v.message, (*path, *v.path), key=v.key, hint=v.hint, severity=Severity.WARNING if v.warning else Severity.ERROR))
    return out
