"""Pods: pkg/registry/core/pod/strategy.go and ValidatePodUpdate, and the binding subresource.

- create: status reset to Pending with its QoS class, generation 1, a PodScheduled=False
  `SchedulingGated` condition while gates remain (PrepareForCreate); defaults and admission
  (defaults.py); ResourceQuota (quota.py);
- update: only `spec.containers[*].image`, `spec.initContainers[*].image`,
  `spec.activeDeadlineSeconds` (set, or lowered), added tolerations and removed scheduling gates
  may change in the spec (pkg/apis/core/validation/validation.go ValidatePodUpdate,
  validateOnlyAddedTolerations, validateOnlyDeletedSchedulingGates); a spec change bumps
  generation (updatePodGeneration); status is kept;
- status writes keep spec (nodeName included), metadata and the QoS class; a terminated
  container of a pod that does not restart stays terminated (ValidateContainerStateTransition),
  an init container likewise, but for a native sidecar, which the kubelet restarts whatever the
  pod's restartPolicy (ValidateInitContainerStateTransition: #123323 in 1.30, backported to 1.28, 1.29);
- graceful deletion (CheckGracefulDelete): the grace period asked for, else
  terminationGracePeriodSeconds; immediate for a pod that is not scheduled (no nodeName) or
  is terminal (Succeeded/Failed);
- binding (pkg/registry/core/pod/storage/storage.go assignPod): sets nodeName once, never on a
  gated or deleting pod, and marks PodScheduled=True.
"""

from __future__ import annotations

from typing import Any

from ...api import Obj
from . import defaults, quota
from .copies import clone
from .status import FieldError, forbidden_field, invalid_field, not_supported, required
from .strategy import META_FIELDS, Context, Strategy

UPDATABLE = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)
TERMINAL = ("Succeeded", "Failed")
GATED = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}
MAX_INT32 = 2**31 - 1


def _container_updates(new: list[Obj], old: list[Obj], path: str) -> tuple[list[FieldError], bool]:
    """ValidateContainerUpdates: same number of containers, images present and trimmed."""
    if len(new) != len(old):
        return [forbidden_field(path, "pod updates may not add or remove containers")], True
    errs = []
    for i, c in enumerate(new):
        image = c.get("image") or ""
        if not image:
            errs.append(required(f"{path}[{i}].image"))
        elif image.strip() != image:
            errs.append(invalid_field(f"{path}[{i}].image", image, "must not have leading or trailing whitespace"))
    return errs, False


def _deadline(new: Any, old: Any) -> list[FieldError]:
    path = "spec.activeDeadlineSeconds"
    if new is None:
        return [invalid_field(path, None, "must not update from a positive integer to nil value")] if old is not None else []
    if not isinstance(new, int) or new < 0 or new > MAX_INT32:
        return [invalid_field(path, new, f"must be between 0 and {MAX_INT32}, inclusive")]
    if old is not None and old < new:
        return [invalid_field(path, new, "must be less than or equal to previous value")]
    return []


def _tolerations(new: list[Obj], old: list[Obj]) -> list[FieldError]:
    """validateOnlyAddedTolerations: every old toleration stays (only tolerationSeconds may change)."""
    errs = []
    strip = lambda t: {k: v for k, v in t.items() if k != "tolerationSeconds"}  # noqa: E731
    for t in old:
        if not any(strip(n) == strip(t) for n in new):
            errs.append(forbidden_field("spec.tolerations", "existing toleration can not be modified except its tolerationSeconds"))
            break
    return errs


def _gates(new: list[Obj], old: list[Obj]) -> list[FieldError]:
    before = {g.get("name") for g in old}
    return [
        forbidden_field(f"spec.schedulingGates[{i}].name", f"only deletion is allowed, but found new scheduling gate '{g.get('name')}'")
        for i, g in enumerate(new) if g.get("name") not in before
    ]


def _diff(old: Obj, new: Obj) -> str:
    """A short stand-in for cmp.Diff(oldPod.Spec, mungedPodSpec) in the message."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            lines.append(f"- \t{key}: {old.get(key)!r},")
            lines.append(f"+ \t{key}: {new.get(key)!r},")
    lines.append("  }")
    return "\n".join(lines)


def validate_update(new: Obj, old: Obj) -> list[FieldError]:
    """ValidatePodUpdate's spec rules."""
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    errs: list[FieldError] = []
    for key in ("containers", "initContainers"):
        found, stop = _container_updates(ns.get(key) or [], os_.get(key) or [], f"spec.{key}")
        errs += found
        if stop:
            return errs
    errs += _deadline(ns.get("activeDeadlineSeconds"), os_.get("activeDeadlineSeconds"))
    errs += _tolerations(ns.get("tolerations") or [], os_.get("tolerations") or [])
    errs += _gates(ns.get("schedulingGates") or [], os_.get("schedulingGates") or [])
    if ns == os_:
        return errs
    munged = clone(ns)
    for key in ("containers", "initContainers"):
        for c, o in zip(munged.get(key) or [], os_.get(key) or [], strict=True):
            c["image"] = o.get("image")
    for key in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        munged.pop(key, None)
        if key in os_:
            munged[key] = os_[key]
    if munged != os_:
        detail = "pod updates may not change fields other than " + ",".join(UPDATABLE) + "\n" + _diff(os_, munged)
        errs.append(forbidden_field("spec", detail))
    return errs


def validate_create(pod: Obj) -> list[FieldError]:
    """The parts of ValidatePodCreate a stand-in can check without Go types: the spec's, then
    a nodeName beside scheduling gates, which only a pod's create refuses (a PodTemplate
    holds both: ValidatePodTemplate validates the spec alone)."""
    errs = validate_spec(pod)
    spec = pod.get("spec") or {}
    if spec.get("nodeName") and spec.get("schedulingGates"):
        errs.append(forbidden_field("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return errs


def validate_spec(pod: Obj) -> list[FieldError]:
    """The parts of ValidatePodSpec a stand-in can check without Go types (a pod's, a template's)."""
    spec = pod.get("spec") or {}
    errs: list[FieldError] = []
    containers = spec.get("containers") or []
    if not containers:
        errs.append(required("spec.containers"))
    seen: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            name = c.get("name") or ""
            if not name:
                errs.append(required(f"spec.{key}[{i}].name"))
            elif name in seen:
                errs.append(FieldError("Duplicate", f"spec.{key}[{i}].name", name))
            seen.add(name)
            if not c.get("image"):
                errs.append(required(f"spec.{key}[{i}].image"))
    policy = spec.get("restartPolicy")
    if policy not in ("Always", "OnFailure", "Never"):
        errs.append(not_supported("spec.restartPolicy", policy, ["Always", "OnFailure", "Never"]))
    return errs


class PodStrategy(Strategy):
    typed = "io.k8s.api.core.v1.Pod"
    generation = True
    status_subresource = True
    field_labels = META_FIELDS | {
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
    }

    def default(self, obj: Obj) -> None:
        defaults.pod_spec(obj.setdefault("spec", {}))

    def admit(self, obj: Obj, ctx: Context) -> None:
        refusal = defaults.admit(obj, ctx.rng, ctx.store.priority_classes.get)
        if refusal:
            from .status import forbidden

            raise forbidden("", "pods", obj["metadata"].get("name", ""), refusal)

    def prepare_create(self, obj: Obj, ctx: Context) -> None:
        for mutate in ctx.store.pod_mutators:  # mutating admission, before validation (Kueue's finalizer)
            mutate(obj)
        spec = obj["spec"]
        status: Obj = {"phase": "Pending", "qosClass": defaults.qos_class(spec)}
        if spec.get("schedulingGates"):
            status["conditions"] = [{**GATED, "lastProbeTime": None, "lastTransitionTime": ctx.stamp}]
        obj["status"] = status

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return validate_create(obj)

    def check_create(self, obj: Obj, ctx: Context) -> None:
        quota.admit(ctx.store, obj)

    def validate_update(self, obj: Obj, old: Obj) -> list[FieldError]:
        return validate_update(obj, old)

    def prepare_status(self, obj: Obj, old: Obj) -> None:
        status = obj.get("status") or {}
        meta = {**obj.get("metadata", {}), "ownerReferences": old["metadata"].get("ownerReferences")}
        super().prepare_status(obj, old)  # the spec (nodeName included) is the stored one
        obj["status"] = status
        obj["metadata"] = {k: v for k, v in meta.items() if v is not None}
        if not status.get("qosClass") and (old.get("status") or {}).get("qosClass"):
            status["qosClass"] = old["status"]["qosClass"]

    def validate_status(self, obj: Obj, old: Obj) -> list[FieldError]:
        errs = []
        if (obj.get("status") or {}).get("qosClass") != (old.get("status") or {}).get("qosClass"):
            errs.append(invalid_field("status.qosClass", obj["status"].get("qosClass"), "field is immutable"))
        if old["spec"].get("restartPolicy") != "Always":
            errs += _terminated_stays(obj, old, "containerStatuses")
            errs += _terminated_stays(obj, old, "initContainerStatuses")
        return errs

    def grace_period(self, obj: Obj, requested: int | None) -> int | None:
        period = requested if requested is not None else (obj.get("spec") or {}).get("terminationGracePeriodSeconds") or 0
        if not (obj.get("spec") or {}).get("nodeName") or (obj.get("status") or {}).get("phase") in TERMINAL:
            period = 0
        return 1 if period < 0 else period

    def fields(self, obj: Obj) -> dict[str, str]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        ips = status.get("podIPs") or []
        return {
            **super().fields(obj),
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.restartPolicy": spec.get("restartPolicy", ""),
            "spec.schedulerName": spec.get("schedulerName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "spec.hostNetwork": "true" if spec.get("hostNetwork") else "false",
            "status.phase": status.get("phase", ""),
            "status.podIP": ips[0].get("ip", "") if ips else "",
            "status.nominatedNodeName": status.get("nominatedNodeName", ""),
        }

    def spec_of(self, obj: Obj) -> Any:
        return obj.get("spec")

    def after_write(self, old: Obj | None, new: Obj | None, ctx: Context) -> None:
        quota.follow(ctx.store, old, new)


def _terminated_stays(new: Obj, old: Obj, field: str) -> list[FieldError]:
    """Validate(Init)ContainerStateTransition: a terminated container of a pod that does not
    restart stays terminated (OnFailure containers that failed may restart, native sidecars too)."""
    errs = []
    policy = old["spec"].get("restartPolicy")
    sidecars = {c.get("name") for c in old["spec"].get("initContainers") or [] if c.get("restartPolicy") == "Always"}
    now = {s.get("name"): s for s in (new.get("status") or {}).get(field) or []}
    for i, before in enumerate((old.get("status") or {}).get(field) or []):
        done = (before.get("state") or {}).get("terminated")
        if not done or (policy == "OnFailure" and done.get("exitCode")) or before.get("name") in sidecars:
            continue
        after = now.get(before.get("name"))
        if after is not None and not (after.get("state") or {}).get("terminated"):
            errs.append(forbidden_field(f"status.{field}[{i}].state", "may not be transitioned to non-terminated state"))
    return errs


def bind(pod: Obj, node: str, stamp: str) -> str | None:
    """Assign a pod to a node (the binding subresource); the refusal's message, if any."""
    meta, spec = pod["metadata"], pod["spec"]
    if meta.get("deletionTimestamp"):
        return f"pod {meta['name']} is being deleted, cannot be assigned to a host"
    if spec.get("nodeName"):
        return f"pod {meta['name']} is already assigned to node \"{spec['nodeName']}\""
    if spec.get("schedulingGates"):
        return f"pod {meta['name']} has non-empty .spec.schedulingGates"
    spec["nodeName"] = node
    status = pod.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    status["conditions"] = [{"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}, *conditions]
    return None
