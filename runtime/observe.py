"""Reduce API pod objects to PodState: what the decisions need and nothing more.

Besides phase and exit codes, a pod tells how it is doing through conditions written by
others than its kubelet, and the decisions read them:
- DisruptionTarget (the Eviction API, the scheduler's preemption, taint eviction, PodGC, the
  kubelet's node-pressure eviction; pkg/apis/core/types.go): the pod is being disrupted, its
  end says nothing about the training; but only on a pod being deleted or ended: the
  disrupters write it and delete in two requests, and a pod whose delete failed (a webhook on
  pod DELETE, a conflict) runs on with it until the disruption controller sets it False
  (pkg/controller/disruption/disruption.go nonTerminatingPodHasStaleDisruptionCondition; the
  kubelet's own is sent only with the terminal phase, status_manager.go mergePodStatus);
- Ready=False while ContainersReady stays True on a running pod: only the node lifecycle
  controller clears Ready alone (MarkPodsNotReady, which keeps the condition's reason), so its
  node stopped reporting; but not with reason ReadinessGatesNotReady, which the kubelet
  writes while a readiness gate is not True (generate.go GeneratePodReadyCondition);
- reason Evicted or Terminated without DisruptionTarget: the kubelet evicted the pod for its
  own ephemeral-storage or emptyDir limit (eviction_manager.go localStorageEviction gives no
  condition), or, before Kubernetes 1.26, for the node's pressure ("The node was low on
  resource: ...") or shut its node down ("Pod was terminated in response to imminent node
  shutdown.", nodeshutdown_manager_linux.go);
- PodScheduled=False/Unschedulable (the scheduler's message) and a container waiting for a
  reason that needs a human (ErrImagePull, ImagePullBackOff, ...): why it does not start;
  a bound pod none of whose containers was created yet: since when (a volume it cannot mount
  says so only in Events).
A failed init container's exit code is the pod's exit code (the regular ones never ran).
A pod its node's kubelet refused to admit (a device plugin's UnexpectedAdmissionError,
OutOfcpu, NodeAffinity) is Failed with "Pod was rejected: ..." and no container status: it
never ran (pkg/kubelet/kubelet.go rejectPod).
"""

from __future__ import annotations

import calendar
import time
from typing import Any

from flatjob.compiler import keys
from flatjob.compiler.digits import INT64_MAX, bounded

from .model import CLOCK_SLACK, GATE, PodState

_STATE_NAMES = ("running", "waiting", "terminated")
# The node lifecycle controller's NoExecute taint on a node that stopped reporting
# (k8s.io/api/core/v1 TaintNodeUnreachable); taint eviction deletes a pod once its matching
# tolerations run out (pkg/controller/tainteviction/taint_eviction.go getMinTolerationTime).
UNREACHABLE = "node.kubernetes.io/unreachable"
# Waiting reasons a pod does not leave by itself soon: the record names them (the kubelet's
# images/types.go and kuberuntime errors; ContainerCreating and PodInitializing are normal).
REJECTED = "Pod was rejected: "  # the kubelet's admission refusal (kubelet.go rejectPod)
RESTAMPED = frozenset({"TerminationByKubelet"})  # DisruptionTarget reasons dated when the pod stopped, not when it began
GATES_NOT_READY = "ReadinessGatesNotReady"  # Ready=False the kubelet writes for a readiness gate (status/generate.go)
# The reasons of a pod the kubelet itself ended: an eviction (eviction_manager.go Reason) and a
# graceful node shutdown (nodeshutdown_manager_linux.go nodeShutdownReason).
KUBELET_KILLS = frozenset({"Evicted", "Terminated"})
CREATING = frozenset({"ContainerCreating", "PodInitializing"})  # the kubelet's waiting reasons before a container is created
STUCK = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff"})


def _container(statuses: list[dict[str, Any]], name: str | None) -> dict[str, Any] | None:
    if not statuses:
        return None
    if name is not None:
        for s in statuses:
            if s.get("name") == name:
                return s
    return statuses[0]


def _state_name(status: dict[str, Any]) -> str:
    state = status.get("state") or {}
    for key in _STATE_NAMES:
        if state.get(key) is not None:
            return key.capitalize()
    return "Unknown"


def _int(text: Any) -> int | None:
    """An annotation read as a number in ASCII digits (None when absent or edited into anything
    else: int() would read "٣" or " 1_0 " as numbers)."""
    return bounded(text, 0, INT64_MAX)


def seconds(text: Any) -> float | None:
    """An RFC 3339 UTC time as the API writes it (`2024-01-02T03:04:05Z`), in seconds."""
    if not isinstance(text, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(text.split(".")[0].rstrip("Z"), "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _owned_by(meta: dict[str, Any], owner_uid: str | None) -> bool:
    if owner_uid is None:
        return True
    return any(isinstance(r, dict) and r.get("controller") and r.get("uid") == owner_uid for r in meta.get("ownerReferences") or [])


def sidecars(spec: dict[str, Any]) -> set[str]:
    """Names of the native sidecars (init containers with restartPolicy Always): the kubelet
    kills them when the pod fails, so their 137/143 is never why it failed."""
    inits = spec.get("initContainers")
    return {c["name"] for c in (inits if isinstance(inits, list) else []) if isinstance(c, dict) and c.get("restartPolicy") == "Always" and isinstance(c.get("name"), str)}


def _failed_init(status: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any] | None:
    """The terminated state of the init container that failed the pod, if one did."""
    skip = sidecars(spec)
    for s in status.get("initContainerStatuses") or []:
        term = (s.get("state") or {}).get("terminated") if isinstance(s, dict) and s.get("name") not in skip else None
        if isinstance(term, dict) and term.get("exitCode") not in (None, 0):
            return term
    return None


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or [] if isinstance(c, dict) and isinstance(c.get("type"), str)}


def _waiting(statuses: list[dict[str, Any]], which: str = "") -> str | None:
    """`<reason>: <message>` of the first container stuck waiting (image pulls, bad config);
    `which` names the container (an init container's: "{}" is its name)."""
    for s in statuses:
        waiting = (s.get("state") or {}).get("waiting")
        if isinstance(waiting, dict) and waiting.get("reason") in STUCK:
            message = waiting.get("message")
            where = which.format(s.get("name", "")) if which else ""
            return (f"{waiting['reason']}: {message}" if message else str(waiting["reason"])) + where
    return None


def tolerates_unreachable(t: Any) -> bool:
    """Whether a toleration matches the unreachable NoExecute taint (core/v1
    Toleration.ToleratesTaint: an empty key with Exists matches every key, an empty effect
    every effect; the taint has no value)."""
    if not isinstance(t, dict) or t.get("effect") not in (None, "", "NoExecute"):
        return False
    if (t.get("operator") or "Equal") == "Exists":
        return t.get("key") in (None, "", UNREACHABLE)
    return t.get("key") == UNREACHABLE and not t.get("value")


def unreachable_grace(spec: dict[str, Any]) -> float | None:
    """Seconds taint eviction waits before deleting the pod from an unreachable node: the
    least tolerationSeconds of the matching tolerations, forever (None) when none has
    seconds, at once when none matches (getMinTolerationTime; the DefaultTolerationSeconds
    admission plugin gives every pod 300 s unless it tolerates the taint itself)."""
    tolerations = spec.get("tolerations")
    matching = [t for t in (tolerations if isinstance(tolerations, list) else []) if tolerates_unreachable(t)]
    if not matching:
        return 0.0
    seconds = [float(t["tolerationSeconds"]) for t in matching if isinstance(t.get("tolerationSeconds"), int | float) and not isinstance(t.get("tolerationSeconds"), bool)]
    # getMinTolerationTime's "never" is the int64 maximum (its starting minimum), so 2^63-1
    # tolerates for ever too
    return max(min(seconds), 0.0) if seconds and min(seconds) < INT64_MAX else None


def pod_state(obj: dict[str, Any], container: str | None = None, owner_uid: str | None = None) -> PodState:
    """The decision-relevant view of one pod object (`owner_uid`: the record's, if known)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    main = _container(statuses, container)
    term = ((main or {}).get("state") or {}).get("terminated") or {}
    exit_code = term.get("exitCode") if term else None
    init = _failed_init(status, spec) if not term and status.get("phase") == "Failed" else None
    if init is not None:  # kubectl's Init:Error: the init container's code is the pod's
        term = {**init, "reason": f"Init:{init.get('reason') or 'ExitCode:' + str(init.get('exitCode'))}"}
        exit_code = init.get("exitCode")
    conditions = _conditions(status)
    ready = conditions.get("Ready", {}).get("status") == "True"
    disruption = conditions.get("DisruptionTarget") if conditions.get("DisruptionTarget", {}).get("status") == "True" else None
    if disruption is not None and meta.get("deletionTimestamp") is None and status.get("phase") not in ("Succeeded", "Failed"):
        disruption = None  # written, but its delete failed (stale until the disruption controller resets it): the pod runs on
    lost = (not ready and status.get("phase") == "Running" and conditions.get("ContainersReady", {}).get("status") == "True" and "Ready" in conditions
            and conditions["Ready"].get("reason") != GATES_NOT_READY)
    scheduled = conditions.get("PodScheduled", {})
    notes = meta.get("annotations") or {}
    return PodState(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        phase=status.get("phase") or "Pending",
        gated=any(g.get("name") == GATE for g in spec.get("schedulingGates") or []),
        other_gates=tuple(str(g.get("name")) for g in spec.get("schedulingGates") or [] if isinstance(g, dict) and g.get("name") != GATE),
        deleting=meta.get("deletionTimestamp") is not None,
        finalizers=tuple(f for f in meta.get("finalizers") or () if isinstance(f, str)),
        delete_by=seconds(meta.get("deletionTimestamp")),
        ready=ready,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        reason=term.get("reason") or status.get("reason"),
        message=term.get("message") or status.get("message"),
        spec_hash=notes.get(keys.SPEC_HASH),
        attempt=_int(notes.get(keys.ATTEMPT)),
        ours=_owned_by(meta, owner_uid),
        stopped=notes.get(keys.STOPPED) == "true",
        containers=tuple((s.get("name", ""), _state_name(s), ((s.get("state") or {}).get("terminated") or {}).get("exitCode")) for s in statuses),
        node=spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None,
        # How long the program ran: its container's start, not the pod's (which counts image
        # pulls and init containers); the pod's for a container that never started.
        started_at=seconds(term.get("startedAt")) or seconds(status.get("startTime")),
        finished_at=seconds(term.get("finishedAt")),
        deletion_began=_deletion_began(meta),
        disruption=str(disruption.get("reason") or "DisruptionTarget") if disruption else None,
        disruption_message=disruption.get("message") if disruption else None,
        disrupted_since=_not_before(disruption_began(disruption, spec), disruption, meta) if disruption else None,
        disruption_dated=_not_before(seconds(disruption.get("lastTransitionTime")), disruption, meta) if disruption else None,
        node_lost_since=(seconds(conditions["Ready"].get("lastTransitionTime")) or 0.0) if lost else None,
        unreachable_grace=unreachable_grace(spec),
        waiting=_waiting([s for s in status.get("initContainerStatuses") or [] if isinstance(s, dict)], " (init container {})") or _waiting(statuses)
        if status.get("phase", "Pending") == "Pending" else None,
        creating_since=_creating_since(spec, status),
        unschedulable=scheduled.get("message") or "no node fits" if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable" else None,
        rejected=_rejected(status, exit_code),
        evicted=(status.get("message") or str(status["reason"])) if status.get("reason") in KUBELET_KILLS and status.get("phase") == "Failed" else None,
    )


def _creating_since(spec: dict[str, Any], status: dict[str, Any]) -> float | None:
    """status.startTime of a bound Pending pod none of whose containers was created yet: every
    one waits ContainerCreating or PodInitializing, the kubelet's defaults while it mounts the
    pod's volumes and pulls its images (kubelet_pods.go convertToAPIContainerStatuses).  A
    volume that cannot be mounted (a ConfigMap or Secret that does not exist, a PVC attached to
    another node: Multi-Attach) keeps it so with nothing in the status; only Events say why
    (volumemanager WaitForAttachAndMount, FailedMount, FailedAttachVolume)."""
    if status.get("phase", "Pending") != "Pending" or not spec.get("nodeName"):
        return None
    every = [s for key in ("initContainerStatuses", "containerStatuses") for s in status.get(key) or [] if isinstance(s, dict)]
    if not every or any(((s.get("state") or {}).get("waiting") or {}).get("reason") not in CREATING for s in every):
        return None
    return seconds(status.get("startTime"))


def _deletion_began(meta: dict[str, Any]) -> float | None:
    """When a graceful deletion was asked for: the API server sets deletionTimestamp to that
    moment plus deletionGracePeriodSeconds (registry/rest/delete.go BeforeDelete)."""
    at, grace = seconds(meta.get("deletionTimestamp")), meta.get("deletionGracePeriodSeconds")
    if at is None or not isinstance(grace, int) or isinstance(grace, bool):
        return None
    return at - grace


def disruption_began(condition: dict[str, Any], spec: dict[str, Any]) -> float | None:
    """When a disruption began, at the earliest: its DisruptionTarget's lastTransitionTime, but
    the kubelet dates its own (TerminationByKubelet: node pressure, a graceful node shutdown)
    when the pod stopped (status_manager.go mergePodStatus), which is at most the pod's grace
    period after it sent SIGTERM (eviction and shutdown grace never exceed the pod's)."""
    at = seconds(condition.get("lastTransitionTime"))
    if at is None or condition.get("reason") not in RESTAMPED:
        return at
    grace = spec.get("terminationGracePeriodSeconds")
    return at - (float(grace) if isinstance(grace, int) and not isinstance(grace, bool) and grace >= 0 else 30.0)


def _not_before(at: float | None, condition: dict[str, Any], meta: dict[str, Any]) -> float | None:
    """A disrupter's DisruptionTarget dated no earlier than the deletion it comes with.  The
    Eviction API, preemption and taint eviction write it and delete in the next request, but
    each keeps the lastTransitionTime of a True condition already there (apipod.
    UpdatePodCondition, pkg/api/v1/pod/util.go): one an earlier disruption left when its delete
    was refused, which the pod ran on with for up to 2 min (disruption.go).  That one disrupted
    nothing: this disruption began with its deletion.  Dated by the old one, a peer's failure in
    between was excused as its doing (a master's exit 1 under ExitCode no longer failed the
    job).  The kubelet's own (TerminationByKubelet) comes with no deletion: it keeps its date."""
    began = _deletion_began(meta)
    if at is None or began is None or condition.get("reason") in RESTAMPED:
        return at
    return began if began > at + CLOCK_SLACK else at  # (two components' clocks)


def _rejected(status: dict[str, Any], exit_code: Any) -> str | None:
    """`<reason>: <why>` of a pod the kubelet refused at admission: Failed, the kubelet's
    "Pod was rejected" message, and no container that ever ended."""
    message = status.get("message")
    if status.get("phase") != "Failed" or exit_code is not None or not isinstance(message, str) or not message.startswith(REJECTED):
        return None
    return f"{status.get('reason') or 'Rejected'}: {message[len(REJECTED):]}"
