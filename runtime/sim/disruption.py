"""kube-controller-manager's disruption controller, the part the runtime meets: stale DisruptionTargets.

The Eviction API, the scheduler's preemption and taint eviction each write the DisruptionTarget
condition in one request and delete the pod in the next (eviction.go addConditionAndDeletePod,
preemption.go PrepareCandidate, taint_eviction.go addConditionAndDeletePod).  When the delete
fails (a validating webhook on pod DELETE, a conflict, the API server going away), the pod
keeps running with DisruptionTarget=True and no deletionTimestamp.  The disruption controller
sets such a condition to False once it is stalePodDisruptionTimeout (2 min) old, by a
server-side apply of the condition's type, status and lastTransitionTime alone, so the reason and
message the disrupter wrote stay (pkg/controller/disruption/disruption.go
nonTerminatingPodHasStaleDisruptionCondition, syncStalePodDisruption).  Never stale: one on a terminating or terminal pod, and the kubelet's
own (TerminationByKubelet), which may precede the pod's termination by any time.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..api import ApiError
from .apiserver.clock import parse_time, stamp

STALE_AFTER = 120.0  # disruption.go stalePodDisruptionTimeout
KUBELET_REASON = "TerminationByKubelet"  # v1.PodReasonTerminationByKubelet

Obj = dict[str, Any]


def _stale(pod: Obj, now: float) -> bool:
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
        return False
    c = next((c for c in status.get("conditions") or [] if c.get("type") == "DisruptionTarget"), None)
    return c is not None and c.get("status") == "True" and c.get("reason") != KUBELET_REASON and now - parse_time(c["lastTransitionTime"]) >= STALE_AFTER


def reset_stale(cluster: Any, namespace: str, now: float) -> bool:
    """Set each stale DisruptionTarget of the namespace's pods to False; True when any was."""
    changed = False
    for name, pod in sorted(cluster.pods(namespace).items()):
        if not _stale(pod, now):
            continue
        status = pod.get("status") or {}
        conditions = [{**c, "status": "False", "lastTransitionTime": stamp(now)} if c.get("type") == "DisruptionTarget" else c
                      for c in status.get("conditions") or []]
        with contextlib.suppress(ApiError):  # gone or replaced meanwhile
            cluster.set_pod_status(namespace, name, {**status, "conditions": conditions}, manager="disruption-controller", uid=pod["metadata"]["uid"])
            changed = True
    return changed
