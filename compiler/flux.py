"""Flux pieces: the GitRepository and a Kustomization per environment, with record health.

One source for overlays/flux/ and `flatjob init --gitops flux` (tests/test_flux.py keeps the
files in step).  Git holds PodTemplates, never pods: Flux applies them like any object and
flatjob's runtime creates the pods from them, so Flux never touches a pod.  The records
follow kstatus; the CEL expressions below add what kstatus cannot say: a paused job is as
healthy as git wants it.
"""

from __future__ import annotations

import re
from typing import Any

from . import keys
from .argocd import RECORD_KINDS

# CEL over the record as the API server serves it: a record no runtime has written yet reads
# the CRD's default status (Reconciling=True, waiting for the runtime), so `status` always
# exists and has() tests the fields in it.  Flux compares status.observedGeneration with
# metadata.generation itself before these (fluxcd/pkg runtime/cel StatusEvaluator); a
# record's health is kstatus's (Reconciling: starting, restarting, resuming; Stalled: failed),
# except that a paused job is as current as git wants it (kstatus: InProgress).
_STALLED = "status.conditions.exists(c, c.type == 'Stalled' && c.status == 'True')"
_RECONCILING = "status.conditions.exists(c, c.type == 'Reconciling' && c.status == 'True')"
HEALTH_EXPRS = {
    "inProgress": f"!has(status.conditions) || ({_RECONCILING} && !{_STALLED})",
    # the phase too: a record Failed without Stalled (another writer's, an older runtime's) is
    # Degraded in Argo CD's Lua, and Flux's default for what no expression matches is InProgress
    "failed": f"(has(status.conditions) && {_STALLED}) || (has(status.phase) && status.phase == 'Failed')",
    "current": "has(status.phase) && status.phase in ['Running', 'Succeeded', 'Paused']",
}


def health_check_exprs() -> list[dict[str, str]]:
    """spec.healthCheckExprs for the four record kinds (Flux >= 2.5)."""
    return [{"apiVersion": keys.RECORD_API_VERSION, "kind": kind, **HEALTH_EXPRS} for kind in RECORD_KINDS]


# git's scp-like address, user@host:path: what `git clone` of an SSH remote leaves as origin.
_SCP_LIKE = re.compile(r"(?P<user>[^@/:]+@)?(?P<host>[^@/:]{2,}):(?!//)(?P<path>.+)")
FLUX_URL = re.compile(r"(http|https|ssh)://.*")


def flux_url(url: str) -> str:
    """The URL as a GitRepository takes it: Flux's CRD admits only http(s):// and ssh:// URLs
    (`^(http|https|ssh)://.*$`, source-controller GitRepositorySpec.URL), so git's scp-like
    origin git@github.com:org/repo.git, which Argo CD takes as it is, becomes
    ssh://git@github.com/org/repo.git; anything else is left as written."""
    if "://" in url:
        return url
    m = _SCP_LIKE.fullmatch(url)
    return f"ssh://{m['user'] or ''}{m['host']}/{m['path'].lstrip('/')}" if m else url


def git_repository(name: str, url: str, branch: str = "main") -> dict[str, Any]:
    """The source Flux watches."""
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "1m", "url": flux_url(url), "ref": {"branch": branch}},
    }


def kustomization(name: str, source: str, path: str) -> dict[str, Any]:
    """A Flux Kustomization applying one environment's rendered folder, with prune, and the
    health of everything it applies (`wait: true`): every job record there, read by the
    healthCheckExprs, and the runtime Deployments.  No list of jobs: health follows the jobs
    the folder holds, so adding or removing one needs no edit here.

    No targetNamespace (set `namespace:` in the overlay, so the compiler knows it).
    """
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {
            "interval": "10m",
            "sourceRef": {"kind": "GitRepository", "name": source},
            "path": f"./{path}",
            "prune": True,
            "wait": True,
            "timeout": "5m",
            "healthCheckExprs": health_check_exprs(),
        },
    }


def elastic_ignore() -> list[dict[str, Any]]:
    """A JSON patch adding the drift-ignore rule for expectedReplicas (Flux with `.spec.ignore`)."""
    target = {"group": keys.RECORD_GROUP, "kind": "PyTorchTrainingJob|DeepSpeedJob"}
    return [{"op": "add", "path": "/spec/ignore", "value": [{"paths": ["/spec/elastic/expectedReplicas"], "target": target}]}]
