"""kustomization.yaml files, so `kubectl apply -k`, Argo CD and Flux consume the output as is."""

from __future__ import annotations

from typing import Any

KUSTOMIZATION = "kustomization.yaml"


def kustomization(resources: list[str]) -> dict[str, Any]:
    """A Kustomization listing resources in the given order."""
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": list(resources)}
