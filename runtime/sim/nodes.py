"""Nodes, and the controllers that act when one is lost: node lifecycle, taint eviction, PodGC.

Nodes are the simulation's own state, not API objects (the fake API server serves no
cluster-scoped kinds); pods name them in spec.nodeName.  What the controllers write into the
pods is what kube-controller-manager writes, in the same order:
- node lifecycle (pkg/controller/nodelifecycle/node_lifecycle_controller.go): a node whose
  kubelet stopped posting status for node-monitor-grace-period (50 s since 1.32, #126287) gets
  Ready=Unknown and the `node.kubernetes.io/unreachable` NoExecute taint; its pods get
  Ready=False and nothing else changes: their phase stays Running, ContainersReady and the
  container states keep the kubelet's last report (MarkPodsNotReady,
  pkg/controller/util/node/controller_utils.go); the phase Unknown is never set;
- taint eviction (pkg/controller/tainteviction/taint_eviction.go): a pod on a NoExecute-tainted
  node is deleted once its toleration runs out (the DefaultTolerationSeconds admission plugin
  gives every pod 300 s for not-ready and unreachable), after the DisruptionTarget condition
  `DeletionByTaintManager` / "Taint manager: deleting due to NoExecute taint"; the deletion is
  graceful, so with no kubelet to finish it the pod stays terminating;
- PodGC (pkg/controller/podgc/gc_controller.go, every 20 s): a pod bound to a node that no
  longer exists (quarantined by the first pass that finds it gone, and collected by the first
  pass 40 s after: 40-80 s after the deletion, discoverDeletedNodes) is patched to phase Failed with DisruptionTarget
  `DeletionByPodGC` / "PodGC: node no longer exists", then force-deleted (grace 0); a pod
  already Succeeded or Failed is force-deleted without a patch (markFailedAndDeletePodWithCondition); a
  terminating pod on a node tainted `node.kubernetes.io/out-of-service` is patched to Failed
  and force-deleted without a condition.
- a kubelet whose PLEG is unhealthy (pkg/kubelet/pleg/generic.go Healthy: no relist within 3
  min, "PLEG is not healthy: pleg was last seen active ...") posts Ready=False itself, reason
  KubeletNotReady, and keeps posting; node lifecycle then taints the node `not-ready`
  NoExecute but marks no pod NotReady: MarkPodsNotReady runs only where the posted Ready was
  True and the controller's is not (monitorNodeHealth), i.e. for a node that stopped posting.
  Its pods stay Running and Ready, and its kubelet syncs no pod meanwhile (kubelet.go syncLoop:
  "Skipping pod synchronization" while a runtime health check fails), so taint eviction's
  deletion hangs until the PLEG relists again;
Not emulated: node-startup-grace-period, eviction rate limits and zone states, NoSchedule
taints other than the ones above, the node's own conditions beyond Ready.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flatjob.compiler.digits import INT64_MAX

from ..api import ApiError
from .apiserver import quota
from .apiserver.clock import stamp
from .podstatus import disruption, update_condition

NODE_MONITOR_GRACE = 50.0  # seconds without a kubelet status before the node is Unknown (1.32)
PODGC_PERIOD = 20.0  # gcCheckPeriod
PODGC_QUARANTINE = 40.0  # quarantineTime: a node must be gone this long before its pods are
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
TAINT_MESSAGE = "Taint manager: deleting due to NoExecute taint"
PODGC_MESSAGE = "PodGC: node no longer exists"

Obj = dict[str, Any]


@dataclass
class Node:
    """One node: its kubelet, its capacity and what the control plane thinks of it."""

    name: str
    ip: str = "10.0.0.1"
    allocatable: dict[str, str] | None = None  # cpu, memory, nvidia.com/gpu...; None: room for anything
    labels: dict[str, str] = field(default_factory=dict)
    kubelet_up: bool = True  # its kubelet runs and posts status
    pleg_healthy: bool = True  # its kubelet's PLEG relists in time: else it posts Ready=False and syncs no pod
    heartbeat: float = 0.0  # when its kubelet last posted status
    ready: str = "True"  # its Ready condition: True | False (its kubelet's, PLEG unhealthy) | Unknown (the node lifecycle controller's)
    taints: list[Obj] = field(default_factory=list)  # {key, effect, timeAdded (seconds)}
    deleted_at: float | None = None  # the Node object is gone (a cloud provider, `kubectl delete node`)
    gc_queued_at: float | None = None  # when PodGC's pass found it gone and quarantined it

    @property
    def exists(self) -> bool:
        return self.deleted_at is None

    def tainted(self, key: str) -> Obj | None:
        return next((t for t in self.taints if t["key"] == key), None)


def tolerations_of(pod: Obj, taint: Obj) -> list[Obj]:
    """The pod's tolerations that match a taint (an empty key with Exists matches every key,
    an empty effect every effect: k8s.io/api/core/v1 Toleration.ToleratesTaint)."""
    out = []
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        key_ok = (t.get("operator") == "Exists" and not t.get("key")) or t.get("key") == taint["key"]
        if key_ok and (not t.get("effect") or t.get("effect") == taint["effect"]):
            out.append(t)
    return out


def toleration_seconds(pod: Obj, taint: Obj) -> float | None:
    """How long the pod tolerates a NoExecute taint: None forever, 0 not at all
    (taint_eviction.go getMinTolerationTime: the least tolerationSeconds of the matching
    tolerations, those without seconds left out; forever only when none has seconds; an
    untolerated taint evicts at once)."""
    matching = tolerations_of(pod, taint)
    if not matching:
        return 0.0
    seconds = [float(t["tolerationSeconds"]) for t in matching if t.get("tolerationSeconds") is not None]
    if not seconds or min(seconds) >= INT64_MAX:  # the int64 maximum is its "never" too
        return None
    return max(min(seconds), 0.0)


@dataclass
class NodeControllers:
    """kube-controller-manager's node lifecycle, taint eviction and PodGC, on virtual time."""

    cluster: Any  # runtime.sim.cluster.FakeCluster
    nodes: dict[str, Node]
    clock: Callable[[], float]
    namespace: str = "default"
    _gc_at: float = 0.0

    def tick(self) -> bool:
        now = self.clock()
        changed = False
        for node in self.nodes.values():
            if not node.exists:
                continue
            if node.kubelet_up and not node.pleg_healthy:
                node.heartbeat = now
                if node.ready != "False":  # the kubelet posts Ready=False itself: tainted, its pods left Ready
                    node.ready = "False"
                    node.taints = [t for t in node.taints if t["key"] not in (UNREACHABLE, NOT_READY)]
                    node.taints.append({"key": NOT_READY, "effect": "NoExecute", "timeAdded": now})
            elif node.kubelet_up:
                node.heartbeat = now
                if node.ready != "True":  # the kubelet is back: Ready again, taints lifted
                    node.ready = "True"
                    node.taints = [t for t in node.taints if t["key"] not in (UNREACHABLE, NOT_READY)]
            elif node.ready == "True" and now - node.heartbeat >= NODE_MONITOR_GRACE:
                node.ready = "Unknown"
                node.taints.append({"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": now})
                changed |= self._mark_not_ready(node, now)
        changed |= self._evict_tainted(now)
        changed |= quota.catch_up(self.cluster.store)  # the quota controller, catching up with the pods that went
        if now >= self._gc_at:
            self._gc_at = now + PODGC_PERIOD
            changed |= self._collect(now)
        return changed

    def _pods_on(self, node: Node) -> list[tuple[str, Obj]]:
        return [(n, p) for n, p in sorted(self.cluster.pods(self.namespace).items()) if (p.get("spec") or {}).get("nodeName") == node.name]

    def _mark_not_ready(self, node: Node, now: float) -> bool:
        """MarkPodsNotReady: Ready=False on each of the node's pods that is not terminal."""
        changed = False
        for name, pod in self._pods_on(node):
            status = pod.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed"):
                continue
            conditions = [dict(c) for c in status.get("conditions") or []]
            for c in conditions:
                if c.get("type") == "Ready" and c.get("status") != "False":
                    c.update(status="False", lastTransitionTime=stamp(now))
                    changed = True
            self._write(name, pod, {**status, "conditions": conditions})
        return changed

    def _evict_tainted(self, now: float) -> bool:
        changed = False
        for node in self.nodes.values():
            for taint in (t for t in node.taints if t["effect"] == "NoExecute"):
                for name, pod in self._pods_on(node):
                    if pod["metadata"].get("deletionTimestamp"):
                        continue
                    wait = toleration_seconds(pod, taint)
                    if wait is not None and now >= taint["timeAdded"] + wait:
                        self._condition_then_delete(name, pod, disruption("DeletionByTaintManager", TAINT_MESSAGE, now), grace=None)
                        changed = True
        return changed

    def _collect(self, now: float) -> bool:
        """PodGC: orphaned pods, and terminating pods on out-of-service nodes."""
        changed = False
        for node in self.nodes.values():
            if node.deleted_at is not None and node.gc_queued_at is None:  # discoverDeletedNodes: queued by this pass
                node.gc_queued_at = now
            orphaned = node.gc_queued_at is not None and now - node.gc_queued_at >= PODGC_QUARANTINE
            out_of_service = node.exists and node.tainted(OUT_OF_SERVICE) is not None and node.ready != "True"
            if not (orphaned or out_of_service):
                continue
            for name, pod in self._pods_on(node):
                if out_of_service and not orphaned and not pod["metadata"].get("deletionTimestamp"):
                    continue
                condition = disruption("DeletionByPodGC", PODGC_MESSAGE, now) if orphaned else None
                self._fail_then_force_delete(name, pod, condition)
                changed = True
        return changed

    # --- writes, as the controllers make them ----------------------------------------------------
    def _write(self, name: str, pod: Obj, status: Obj, manager: str = "node-controller") -> None:
        with contextlib.suppress(ApiError):  # gone or replaced meanwhile
            self.cluster.set_pod_status(self.namespace, name, status, manager=manager, uid=pod["metadata"]["uid"])

    def _condition_then_delete(self, name: str, pod: Obj, condition: Obj, grace: int | None) -> None:
        status = pod.get("status") or {}
        self._write(name, pod, {**status, "conditions": update_condition(list(status.get("conditions") or []), condition)}, manager="taint-eviction-controller")
        with contextlib.suppress(ApiError):
            self.cluster.delete_pod(self.namespace, name, pod["metadata"]["uid"], grace)

    def _fail_then_force_delete(self, name: str, pod: Obj, condition: Obj | None) -> None:
        """markFailedAndDeletePodWithCondition: a pod not yet terminal is patched Failed (with the
        condition, if any) first; a terminal one is only deleted, its status as its kubelet left it."""
        status = dict(pod.get("status") or {})
        if status.get("phase") not in ("Succeeded", "Failed"):
            conditions = list(status.get("conditions") or [])
            self._write(name, pod, {**status, "phase": "Failed", "conditions": update_condition(conditions, condition) if condition else conditions}, manager="pod-garbage-collector")
        with contextlib.suppress(ApiError):
            self.cluster.delete_pod(self.namespace, name, pod["metadata"]["uid"], 0)

