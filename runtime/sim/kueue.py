"""Kueue's plain-pod integration, the two rules of it a pod's lifecycle meets (kueue@ff69552).

- its mutating webhook puts the finalizer `kueue.x-k8s.io/managed` on every pod it manages, a
  pod of a pod group (`kueue.x-k8s.io/pod-group-name`) here (pkg/controller/jobs/pod
  pod_webhook.go Default: controllerutil.AddFinalizer(..., PodFinalizer));
- its pod-group reconciler takes that finalizer off a Failed pod only once a replacement exists
  (pod_controller.go FindMatchingWorkloads: finalizeablePodsCount = min(inactive,
  inactive + active - total count); KEP-976: "The Pod Failed and a valid replacement pod was
  created for it"), and off every pod once the group has finished (as many pods Succeeded as
  the group counts) or its owner is gone (the Workload deleted with it).
Not emulated: admission (Kueue's scheduling gate, quotas of ClusterQueues), Workload objects.
A scenario opts in with `FakeKubelet.kueue = KueuePods(cluster, namespace)`; the gang model of
scheduler.py binds a Kueue pod group as a whole either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flatjob.compiler import keys
from flatjob.compiler.digits import INT32_MAX, bounded

from ..api import ApiError

Obj = dict[str, Any]


def _phase(pod: Obj) -> str | None:
    return (pod.get("status") or {}).get("phase")


@dataclass
class KueuePods:
    """The webhook (installed on the fake API server's pod creates) and the reconciler (`tick`)."""

    cluster: Any  # runtime.sim.cluster.FakeCluster
    namespace: str = "default"

    def __post_init__(self) -> None:
        self.cluster.store.pod_mutators.append(self._default)

    @staticmethod
    def _default(pod: Obj) -> None:
        meta = pod.setdefault("metadata", {})
        if keys.KUEUE_POD_GROUP_NAME in (meta.get("labels") or {}):
            meta["finalizers"] = sorted({*(meta.get("finalizers") or []), keys.KUEUE_FINALIZER})

    def tick(self) -> bool:
        """Take the finalizer off what the rules let go; True when it did."""
        groups: dict[str, list[tuple[str, Obj]]] = {}
        for name, pod in sorted(self.cluster.pods(self.namespace).items()):
            group = (pod["metadata"].get("labels") or {}).get(keys.KUEUE_POD_GROUP_NAME)
            if group and keys.KUEUE_FINALIZER in (pod["metadata"].get("finalizers") or []):
                groups.setdefault(group, []).append((name, pod))
        uids = {(o.get("metadata") or {}).get("uid") for o in self.cluster.store.objects.values()} if groups else set()
        changed = False
        for members in groups.values():
            changed |= any(self._release(name, pod) for name, pod in self._finalizable(members, uids))
        return changed

    def _finalizable(self, members: list[tuple[str, Obj]], uids: set[Any]) -> list[tuple[str, Obj]]:
        notes = members[0][1]["metadata"].get("annotations") or {}
        total = bounded(notes.get(keys.KUEUE_POD_GROUP_TOTAL_COUNT), 1, INT32_MAX) or 1
        owners = [(p["metadata"].get("ownerReferences") or [{}])[0].get("uid") for _, p in members]
        if sum(1 for _, p in members if _phase(p) == "Succeeded") >= total or not all(u is None or u in uids for u in owners):
            return members
        inactive = [(n, p) for n, p in members if _phase(p) == "Failed"]
        active = len(members) - len(inactive)
        return inactive[: max(0, min(len(inactive), len(inactive) + active - total))]

    def _release(self, name: str, pod: Obj) -> bool:
        rest = [f for f in pod["metadata"].get("finalizers") or [] if f != keys.KUEUE_FINALIZER]
        try:
            self.cluster.patch_pod(self.namespace, name, [{"op": "replace", "path": "/metadata/finalizers", "value": rest}])
        except ApiError:
            return False
        return True
