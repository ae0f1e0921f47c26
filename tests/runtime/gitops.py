"""Simulations of Argo CD and Flux reconciling rendered manifests against the fake cluster.

They model the behaviour documented in ../shared/research/gitops.md, with the settings
flatjob ships in overlays/:
- Argo CD: automated sync with selfHeal and prune, ServerSideApply, RespectIgnoreDifferences,
  and ignoreDifferences on Pod /spec/schedulingGates and on the record's
  /spec/elastic/expectedReplicas (status is ignored by default).  A missing object is
  recreated from git; an object whose non-ignored fields differ is re-applied, which for a
  pod's spec fails (immutable) and is reported as a sync error, not forced.
- Flux: kustomize-controller with prune, pods annotated ssa: IfNotPresent (created when
  missing, never updated), and an ignore rule for the record's expectedReplicas.
"""

from __future__ import annotations

import copy
from typing import Any

from flatjob.compiler import keys
from flatjob.runtime.api import Invalid, NotFound
from flatjob.runtime.fake import FakeCluster

Key = tuple[str, str, str]


def _key(obj: dict[str, Any]) -> Key:
    return (obj["kind"], obj["metadata"].get("namespace", "default"), obj["metadata"]["name"])


def _subset(desired: Any, live: Any) -> bool:
    """Server-side-apply comparison: every field git sets has the same value live."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(_subset(v, live.get(k)) for k, v in desired.items())
    return desired == live


class _Tool:
    interval = 1.0

    def __init__(self, cluster: FakeCluster, manifests: list[dict[str, Any]]):
        self.cluster = cluster
        self.manifests = [copy.deepcopy(m) for m in manifests if m["kind"] in ("Pod",) or m["apiVersion"] == keys.RECORD_API_VERSION]
        self.prune: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.creates = 0
        self.elapsed = 0.0

    def sync(self, manifests: list[dict[str, Any]]) -> None:
        """A new git revision: objects that left git are pruned at the next reconcile."""
        new = [copy.deepcopy(m) for m in manifests if m["kind"] == "Pod" or m["apiVersion"] == keys.RECORD_API_VERSION]
        keep = {_key(m) for m in new}
        self.prune += [m for m in self.manifests if _key(m) not in keep]
        self.manifests = new
        self.reconcile()

    def tick(self) -> None:
        self.elapsed += 1.0
        if self.elapsed >= self.interval:
            self.elapsed = 0.0
            self.reconcile()

    def reconcile(self) -> None:
        for obj in self.prune:
            kind, ns, name = _key(obj)
            if kind == "Pod" and name in self.cluster.pods(ns):
                self.cluster.delete_pod(ns, name, None)
        self.prune = []
        for obj in self.manifests:
            if obj["apiVersion"] == keys.RECORD_API_VERSION:
                self._record(obj)
            else:
                self._pod(obj)

    def _record(self, obj: dict[str, Any]) -> None:
        ns, plural = obj["metadata"].get("namespace", "default"), obj["kind"].lower() + "s"
        desired = copy.deepcopy(obj)
        try:
            live = self.cluster.record(ns, plural, obj["metadata"]["name"])
        except NotFound:
            live = None
        elastic = (desired.get("spec") or {}).get("elastic")
        if live is not None and elastic is not None:  # the ignored field keeps its live value
            elastic["expectedReplicas"] = ((live.get("spec") or {}).get("elastic") or {}).get("expectedReplicas", elastic.get("expectedReplicas"))
        if live is None or not _subset(desired["spec"], live.get("spec")) or not _subset(desired["metadata"].get("annotations", {}), live["metadata"].get("annotations", {})):
            self.cluster.apply_record(ns, plural, desired)

    def _pod(self, obj: dict[str, Any]) -> None:
        raise NotImplementedError


class ArgoCD(_Tool):
    """Automated sync with self-heal every tick (Argo retries drift after 5 s by default)."""

    interval = 5.0

    def _pod(self, obj: dict[str, Any]) -> None:
        ns, name = obj["metadata"].get("namespace", "default"), obj["metadata"]["name"]
        live = self.cluster.pods(ns).get(name)
        if live is None:
            self.cluster.create_pod(ns, copy.deepcopy(obj))
            self.creates += 1
            return
        desired = copy.deepcopy(obj)
        desired["spec"].pop("schedulingGates", None)  # ignoreDifferences: /spec/schedulingGates
        live_cmp = copy.deepcopy(live)
        live_cmp["spec"].pop("schedulingGates", None)
        if not _subset(desired["spec"], live_cmp["spec"]):
            try:  # what an apply would do: pods are immutable, so this fails as a sync error
                ops = [{"op": "replace", "path": "/spec/containers", "value": desired["spec"].get("containers")}]
                self.cluster.patch_pod(ns, name, ops)
            except Invalid as exc:
                self.errors.append(f"{name}: {exc}")


class Flux(_Tool):
    """kustomize-controller reconciling every 10 s with prune and ssa: IfNotPresent on pods."""

    interval = 10.0

    def _pod(self, obj: dict[str, Any]) -> None:
        ns, name = obj["metadata"].get("namespace", "default"), obj["metadata"]["name"]
        assert obj["metadata"]["annotations"].get(keys.FLUX_SSA) == keys.FLUX_SSA_IF_NOT_PRESENT
        if name not in self.cluster.pods(ns):
            self.cluster.create_pod(ns, copy.deepcopy(obj))
            self.creates += 1
