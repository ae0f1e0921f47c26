"""Kueue's plain-pod integration, the rules of it a pod's lifecycle meets (kueue@ff69552).

- its mutating webhook gives every pod it manages (label `kueue.x-k8s.io/queue-name`) the
  finalizer `kueue.x-k8s.io/managed` and the scheduling gate `kueue.x-k8s.io/admission`
  (pkg/controller/jobs/pod pod_webhook.go Default: controllerutil.AddFinalizer(...,
  PodFinalizer), gate(&pod.pod); constants.go SchedulingGateName);
- a managed pod without a group is a Workload of its own, admitted alone and finished once it
  has ended; a pod group (`kueue.x-k8s.io/pod-group-name`) becomes a Workload only once as many of its
  pods are active (not Failed, and not deleted before a node took them) as its
  `kueue.x-k8s.io/pod-group-total-count` says (pod_controller.go validatePodGroupMetadata:
  "group has fewer runnable pods than expected"; isPodRunnableOrSucceeded); the Workload is
  admitted when its ClusterQueue has room (`pods_quota`: a nominalQuota of the `pods`
  resource, None for room enough), and admission takes the gate off every pod of the group,
  a replacement made later included (Pod.Run: prepare(...) on each gated pod); kube-scheduler
  then binds each pod on its own (Kueue reserves quota; it is no gang at bind time); the
  admission holds until the group finishes or its pods are all gone (the Workload is owned by
  its pods);
- its pod-group reconciler takes the finalizer off a Failed pod only once a replacement exists
  (pod_controller.go FindMatchingWorkloads: finalizeablePodsCount = min(inactive,
  inactive + active - total count); KEP-976: "The Pod Failed and a valid replacement pod was
  created for it"), and off every pod once the group has finished (as many pods Succeeded as
  the group counts) or its owner is gone (the Workload deleted with it).
Not emulated: Workload objects and their conditions, ClusterQueue resources other than a pod
count, preemption between workloads, fast admission, waitForPodsReady, topology-aware gates.
A Scenario installs it whenever the job's pods carry Kueue's queue label (a job sent to Kueue
runs where Kueue does: tests/runtime/harness.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flatjob.compiler import keys
from flatjob.compiler.digits import INT32_MAX, bounded

from ..api import ApiError

Obj = dict[str, Any]
SINGLE = "pod:"  # the key of a plain pod's own Workload (no pod group)


def _phase(pod: Obj) -> str | None:
    return (pod.get("status") or {}).get("phase")


@dataclass
class KueuePods:
    """The webhook (installed on the fake API server's pod creates) and the reconciler (`tick`)."""

    cluster: Any  # runtime.sim.cluster.FakeCluster
    namespace: str = "default"
    pods_quota: int | None = None  # the ClusterQueue's nominalQuota of pods; None: room for every group
    admitted: dict[str, int] = field(default_factory=dict)  # pod group -> pods its admission reserves

    def __post_init__(self) -> None:
        self.cluster.store.pod_mutators.append(self._default)

    @staticmethod
    def _default(pod: Obj) -> None:
        meta = pod.setdefault("metadata", {})
        if keys.KUEUE_QUEUE_NAME in (meta.get("labels") or {}):
            meta["finalizers"] = sorted({*(meta.get("finalizers") or []), keys.KUEUE_FINALIZER})
            spec = pod.setdefault("spec", {})
            gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != keys.KUEUE_ADMISSION_GATE]
            spec["schedulingGates"] = [*gates, {"name": keys.KUEUE_ADMISSION_GATE}]

    def tick(self) -> bool:
        """Admit what has room, ungate the admitted, take the finalizer off what the rules let go;
        True when anything changed."""
        groups: dict[str, list[tuple[str, Obj]]] = {}
        for name, pod in sorted(self.cluster.pods(self.namespace).items()):
            labels = pod["metadata"].get("labels") or {}
            if keys.KUEUE_POD_GROUP_NAME in labels:
                groups.setdefault(str(labels[keys.KUEUE_POD_GROUP_NAME]), []).append((name, pod))
            elif keys.KUEUE_QUEUE_NAME in labels:
                groups[f"{SINGLE}{pod['metadata']['uid']}"] = [(name, pod)]  # a plain pod is a Workload of its own
        for gone in [g for g in self.admitted if g not in groups]:
            del self.admitted[gone]  # its pods are all gone, and the Workload with them
        held = any(_held(p) for m in groups.values() for _, p in m)
        uids = {(o.get("metadata") or {}).get("uid") for o in self.cluster.store.objects.values()} if held else set()
        changed = False
        for group, members in groups.items():
            changed |= self._admit(group, members)
            held_members = [(n, p) for n, p in members if _held(p)]
            if held_members:
                changed |= any([self._release(name, pod) for name, pod in self._finalizable(held_members, uids)])
        return changed

    # --- admission ------------------------------------------------------------------------------
    def _admit(self, group: str, members: list[tuple[str, Obj]]) -> bool:
        total = _total(members)
        if _finished(members, total):  # its Workload finished: its quota goes, and it is never admitted again
            self.admitted.pop(group, None)
            return False
        if group not in self.admitted:
            active = sum(1 for _, p in members if _active(p))
            room = self.pods_quota is None or sum(self.admitted.values()) + total <= self.pods_quota
            if active < total or not room:
                return False
            self.admitted[group] = total
        return any([self._ungate(name, pod) for name, pod in members if _gated(pod)])

    def _ungate(self, name: str, pod: Obj) -> bool:
        rest = [g for g in pod["spec"].get("schedulingGates") or [] if g.get("name") != keys.KUEUE_ADMISSION_GATE]
        try:
            self.cluster.patch_pod(self.namespace, name, [{"op": "replace", "path": "/spec/schedulingGates", "value": rest}])
        except ApiError:
            return False
        return True

    # --- the finalizer --------------------------------------------------------------------------
    def _finalizable(self, members: list[tuple[str, Obj]], uids: set[Any]) -> list[tuple[str, Obj]]:
        total = _total(members)
        owners = [(p["metadata"].get("ownerReferences") or [{}])[0].get("uid") for _, p in members]
        if _finished(members, total) or not all(u is None or u in uids for u in owners):
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


def _total(members: list[tuple[str, Obj]]) -> int:
    notes = members[0][1]["metadata"].get("annotations") or {}
    return bounded(notes.get(keys.KUEUE_POD_GROUP_TOTAL_COUNT), 1, INT32_MAX) or 1


def _finished(members: list[tuple[str, Obj]], total: int) -> bool:
    """As many pods Succeeded as the group counts; a plain pod once it has ended (pod_controller.go Finished)."""
    if keys.KUEUE_POD_GROUP_NAME not in (members[0][1]["metadata"].get("labels") or {}):
        return _phase(members[0][1]) in ("Succeeded", "Failed")
    return sum(1 for _, p in members if _phase(p) == "Succeeded") >= total


def _active(pod: Obj) -> bool:
    """isPodRunnableOrSucceeded: not Failed, and not deleted before a node took it."""
    deleted_unbound = pod["metadata"].get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName")
    return not deleted_unbound and _phase(pod) != "Failed"


def _held(pod: Obj) -> bool:
    return keys.KUEUE_FINALIZER in (pod["metadata"].get("finalizers") or [])


def _gated(pod: Obj) -> bool:
    return any(g.get("name") == keys.KUEUE_ADMISSION_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])
