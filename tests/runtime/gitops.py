"""Simulations of Argo CD and Flux reconciling rendered manifests against the fake API server.

They model the behaviour documented in ../shared/research/gitops.md, with the settings
flatjob ships in overlays/:
- Argo CD: automated sync with selfHeal and prune, ServerSideApply, RespectIgnoreDifferences
  and ignoreDifferences on the elastic records' /spec/elastic/expectedReplicas (status is
  ignored by default).  A missing object is recreated from git; an object whose fields git
  sets differ is applied again; an object that left git is pruned.  It tracks what it applies
  with its annotation `argocd.argoproj.io/tracking-id`.
- Flux: kustomize-controller with prune, an ignore rule for the record's expectedReplicas,
  tracking labels `kustomize.toolkit.fluxcd.io/{name,namespace}`.
Git holds the record and the PodTemplates, never a Pod, so the tools never touch a pod: every
write they make goes through the store with their own field manager, which the tests check.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from flatjob.compiler import keys
from flatjob.runtime.api import NotFound
from flatjob.runtime.sim.apiserver import kinds
from flatjob.runtime.sim.cluster import FakeCluster

Key = tuple[str, str, str]
SYNCED = ("PodTemplate",)  # besides the record: what the simulations apply (the rest is static)


def _key(obj: dict[str, Any]) -> Key:
    return (obj["kind"], obj["metadata"].get("namespace", "default"), obj["metadata"]["name"])


def _subset(desired: Any, live: Any) -> bool:
    """Server-side-apply comparison: every field git sets has the same value live."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(_subset(v, live.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(live, list) and len(desired) == len(live) and all(_subset(d, x) for d, x in zip(desired, live, strict=True))
    return desired == live or (isinstance(desired, (int, float)) and str(desired) == str(live))


def _in_git(obj: dict[str, Any]) -> bool:
    return obj["kind"] in SYNCED or obj["apiVersion"] == keys.RECORD_API_VERSION


class _Tool:
    interval = 1.0
    manager = "gitops"

    def __init__(self, cluster: FakeCluster, manifests: list[dict[str, Any]]):
        self.cluster = cluster
        self.manifests = [copy.deepcopy(m) for m in manifests if _in_git(m)]
        self.prune: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.applies = 0
        self.elapsed = 0.0

    def track(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as the tool applies it: with its own tracking metadata."""
        return obj

    def sync(self, manifests: list[dict[str, Any]]) -> None:
        """A new git revision: objects that left git are pruned at the next reconcile."""
        new = [copy.deepcopy(m) for m in manifests if _in_git(m)]
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
        store = self.cluster.store
        for obj in self.prune:
            kind, ns, name = _key(obj)
            res = kinds.by_kind(obj["apiVersion"], kind)
            with contextlib.suppress(NotFound):
                store.delete(res, ns, name, {"propagationPolicy": "Background"})  # type: ignore[arg-type]
        self.prune = []
        for obj in self.manifests:
            if obj["apiVersion"] == keys.RECORD_API_VERSION:
                self._record(obj)
            else:
                self._apply(obj)

    def _apply(self, obj: dict[str, Any]) -> None:
        """Create what is missing; apply again what drifted from git."""
        store = self.cluster.store
        desired = self.track(copy.deepcopy(obj))
        kind, ns, name = _key(desired)
        res = kinds.by_kind(desired["apiVersion"], kind)
        assert res is not None and res.key != "pods", "git never holds a pod"
        try:
            live = store.get(res, ns, name)
        except NotFound:
            store.create(res, ns, desired, self.manager)
            self.applies += 1
            return
        meta_ok = all(_subset(desired["metadata"].get(k, {}), live["metadata"].get(k, {})) for k in ("labels", "annotations"))
        if not meta_ok or not _subset({k: v for k, v in desired.items() if k != "metadata"}, live):
            body = {**copy.deepcopy(live), **{k: v for k, v in desired.items() if k != "metadata"}}
            body["metadata"]["labels"] = desired["metadata"].get("labels", {})
            body["metadata"]["annotations"] = desired["metadata"].get("annotations", {})
            store.update(res, ns, name, body, manager=self.manager)
            self.applies += 1

    def _record(self, obj: dict[str, Any]) -> None:
        ns, plural = obj["metadata"].get("namespace", "default"), obj["kind"].lower() + "s"
        desired = self.track(copy.deepcopy(obj))
        try:
            live = self.cluster.record(ns, plural, obj["metadata"]["name"])
        except NotFound:
            live = None
        elastic = (desired.get("spec") or {}).get("elastic")
        if live is not None and elastic is not None:  # the ignored field keeps its live value
            elastic["expectedReplicas"] = ((live.get("spec") or {}).get("elastic") or {}).get("expectedReplicas", elastic.get("expectedReplicas"))
        if live is None or not _subset(desired["spec"], live.get("spec")) or not _subset(desired["metadata"].get("annotations", {}), live["metadata"].get("annotations", {})):
            self.cluster.apply_record(ns, plural, desired)
            self.applies += 1


class ArgoCD(_Tool):
    """Automated sync with self-heal (Argo retries drift after 5 s by default)."""

    interval = 5.0
    manager = "argocd-controller"
    app = "training"

    def track(self, obj: dict[str, Any]) -> dict[str, Any]:
        kind, ns, name = _key(obj)
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        obj["metadata"].setdefault("annotations", {})["argocd.argoproj.io/tracking-id"] = f"{self.app}:{group}/{kind}:{ns}/{name}"
        return obj


class Flux(_Tool):
    """kustomize-controller reconciling every 10 s with prune."""

    interval = 10.0
    manager = "kustomize-controller"

    def track(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"].setdefault("labels", {}).update({"kustomize.toolkit.fluxcd.io/name": "training", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"})
        return obj


TRACKING = ("argocd.argoproj.io/", "kustomize.toolkit.fluxcd.io/", "app.kubernetes.io/instance")
