"""Flux pieces: the GitRepository and a Kustomization per environment, with record health.

One source for overlays/flux/ and `flatjob init --gitops flux` (tests/test_flux.py keeps the
files in step).  Git holds PodTemplates, never pods: Flux applies them like any object and
the job's runtime creates the pods from them, so Flux never touches a pod.  The records
follow kstatus; the CEL
expressions below add what kstatus cannot say: a paused job is as healthy as git wants it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import keys
from .argocd import RECORD_KINDS

HEALTH_EXPRS = {
    "inProgress": "status.observedGeneration != metadata.generation || status.phase in ['Pending', 'Resuming']",
    "failed": "status.phase == 'Failed'",
    "current": "status.phase in ['Running', 'Succeeded', 'Paused']",
}


def health_checks(records: Iterable[tuple[str, str, str]]) -> list[dict[str, str]]:
    """spec.healthChecks for job records given as (kind, name, namespace).

    Flux checks the health of the objects listed here (healthCheckExprs say how to read a
    record); without a list it checks nothing, and `wait: true` would keep the Kustomization
    unready while any job waits for its gang.  Flux wants each object by name, so every job needs
    its entry.
    """
    return [{"apiVersion": keys.RECORD_API_VERSION, "kind": kind, "name": name, "namespace": ns} for kind, name, ns in records]


def health_check_exprs() -> list[dict[str, str]]:
    """spec.healthCheckExprs for the four record kinds (Flux >= 2.5)."""
    return [{"apiVersion": keys.RECORD_API_VERSION, "kind": kind, **HEALTH_EXPRS} for kind in RECORD_KINDS]


def git_repository(name: str, url: str, branch: str = "main") -> dict[str, Any]:
    """The source Flux watches."""
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "1m", "url": url, "ref": {"branch": branch}},
    }


def kustomization(name: str, source: str, path: str, records: Iterable[tuple[str, str, str]] = ()) -> dict[str, Any]:
    """A Flux Kustomization applying one environment's rendered folder, with prune and the
    health of the job records (kind, name, namespace) it is given.

    No `wait: true` (it would keep the Kustomization unready while a job waits for its gang) and
    no targetNamespace (set `namespace:` in the overlay, so the compiler knows it).
    """
    checks = health_checks(records)
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {
            "interval": "10m",
            "sourceRef": {"kind": "GitRepository", "name": source},
            "path": f"./{path}",
            "prune": True,
            "timeout": "5m",
            **({"healthChecks": checks} if checks else {}),
            "healthCheckExprs": health_check_exprs(),
        },
    }


def elastic_ignore() -> list[dict[str, Any]]:
    """A JSON patch adding the drift-ignore rule for expectedReplicas (Flux with `.spec.ignore`)."""
    target = {"group": keys.RECORD_GROUP, "kind": "PyTorchTrainingJob|DeepSpeedJob"}
    return [{"op": "add", "path": "/spec/ignore", "value": [{"paths": ["/spec/elastic/expectedReplicas"], "target": target}]}]
