"""ResourceQuota: admission of new pods and the usage it reports.

- what a pod uses (pkg/quota/v1/evaluator/core/pods.go PodUsageFunc): `count/pods` always;
  while it is not terminal (Succeeded/Failed) and not past its deletion grace period also
  `pods` and its requests (`cpu`, `requests.cpu`, `memory`, `requests.memory`,
  `ephemeral-storage`, `requests.<extended resource>` such as `requests.nvidia.com/gpu`) and
  limits (`limits.cpu`, `limits.memory`), summed over containers with init containers taking
  their maximum and the pod overhead added (pkg/api/v1/resource PodRequests).  Scheduling gates
  make no difference: a gated pod is charged from its creation (KEP-5465,
  kubernetes/enhancements#5490);
- admission (staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go
  CheckRequest) refuses a create that would take any quota'd resource past `hard` with 403
  `pods "<name>" is forbidden: exceeded quota: <quota>, requested: <k=v,...>, used: <...>,
  limited: <...>`, and one whose containers do not state a quota'd cpu or memory value with
  `failed quota: <quota>: must specify <resource> for: <containers>` (podEvaluator.Constraints);
- `status.used` grows in the create that admission lets through (CheckRequest writes the quota
  with the new usage before the pod is stored); it shrinks only when the quota controller
  recalculates, which kube-controller-manager does once its pod informer has seen the pod end
  or go (pkg/controller/resourcequota resource_quota_controller.go replenishment, then
  syncResourceQuota): here RELEASE_AFTER seconds after the write that lowered the charge
  (`catch_up`, run by the controllers' tick and before each admission), so a pod created at once
  in its predecessor's place can still be refused.
Scopes and scope selectors are not emulated: every quota covers every pod of its namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...api import Obj
from . import quantity
from .quantity import Quantity
from .status import bad_request, forbidden
from .strategy import Context, Strategy

if TYPE_CHECKING:
    from .store import Store

ResourceList = dict[str, Quantity]
RELEASE_AFTER = 5.0  # seconds until the quota controller has released a terminal or deleted pod's charge (a busy controller manager)
QUOTAS = "resourcequotas"
_NATIVE_PREFIXES = ("kubernetes.io/", "requests.", "limits.")
_CONSTRAINED = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
_POD_RESOURCES = frozenset({
    "count/pods", "pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
})


def _native(name: str) -> bool:
    return "/" not in name or name.startswith(_NATIVE_PREFIXES)


def _extended(name: str) -> bool:
    return not _native(name) and not name.startswith("requests.")


def _add(into: ResourceList, more: Mapping[str, Quantity]) -> ResourceList:
    out = dict(into)
    for k, v in more.items():
        out[k] = out[k] + v if k in out else v
    return out


def _list(values: Mapping[str, Any] | None) -> ResourceList:
    return {k: quantity.parse(v) for k, v in (values or {}).items()}


def _pod_totals(spec: Obj, which: str) -> ResourceList:
    """PodRequests / PodLimits: containers summed, each init container a floor, overhead added."""
    total: ResourceList = {}
    for c in spec.get("containers") or []:
        total = _add(total, _list((c.get("resources") or {}).get(which)))
    for c in spec.get("initContainers") or []:
        for k, v in _list((c.get("resources") or {}).get(which)).items():
            if k not in total or v.value > total[k].value:
                total[k] = v
    return _add(total, _list(spec.get("overhead")))


def _compute(requests: ResourceList, limits: ResourceList) -> ResourceList:
    """podComputeUsageHelper."""
    out: ResourceList = {"pods": quantity.parse("1")}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            out[name] = out[f"requests.{name}"] = value
        elif _extended(name):
            out[f"requests.{name}"] = value
    return out


def charged(pod: Obj, now: float) -> bool:
    """QuotaV1Pod: not terminal and not past its deletion grace period."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds") is not None:
        from .clock import parse_time

        if now > parse_time(meta["deletionTimestamp"]) + meta["deletionGracePeriodSeconds"]:
            return False
    return True


def usage(pod: Obj | None, now: float) -> ResourceList:
    """PodUsageFunc."""
    if pod is None:
        return {}
    out: ResourceList = {"count/pods": quantity.parse("1")}
    if charged(pod, now):
        spec = pod.get("spec") or {}
        out = _add(out, _compute(_pod_totals(spec, "requests"), _pod_totals(spec, "limits")))
    return out


def matching(hard: Mapping[str, Any]) -> list[str]:
    """MatchingResources: the quota'd names a pod can use."""
    return [k for k in hard if k in _POD_RESOURCES or k.startswith("requests.hugepages-") or (k.startswith("requests.") and _extended(k[len("requests."):]))]


def _pretty(values: Mapping[str, Quantity]) -> str:
    return ",".join(f"{k}={values[k]}" for k in sorted(values))


def _constraints(pod: Obj, required: list[str]) -> str | None:
    """Constraints: each container must state the quota'd cpu/memory values (names sorted)."""
    wanted = sorted(set(required) & set(_CONSTRAINED))
    missing: dict[str, list[str]] = {}
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = c.get("resources") or {}
        has = set(_compute(_list(res.get("requests")), _list(res.get("limits"))))
        for name in wanted:
            if name not in has:
                missing.setdefault(name, []).append(c.get("name", ""))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{k} for: {','.join(sorted(set(v)))}" for k, v in sorted(missing.items()))


def quotas(store: Store, namespace: str) -> list[Obj]:
    return [o for _, o in store.of(QUOTAS, namespace)]


def admit(store: Store, pod: Obj) -> None:
    """Refuse a new pod that a quota of its namespace cannot hold (403), as CheckRequest does."""
    meta = pod["metadata"]
    catch_up(store)
    found = quotas(store, meta.get("namespace", ""))
    if not found:
        return
    requested = usage(pod, store.clock())
    for q in found:
        status = q.get("status") or {}
        hard = _list(status.get("hard"))
        names = matching(hard)
        refusal = _constraints(pod, names)
        if refusal:
            raise forbidden("", "pods", meta.get("name", ""), f"failed quota: {q['metadata']['name']}: {refusal}")
        used = _list(status.get("used"))
        asked = {k: v for k, v in requested.items() if k in hard and v.value != 0}
        over = [k for k, v in asked.items() if (used[k] + v if k in used else v).value > hard[k].value]
        if over:
            shown = [_pretty({k: values[k] for k in over if k in values}) for values in (asked, used, hard)]
            why = f"exceeded quota: {q['metadata']['name']}, requested: {shown[0]}, used: {shown[1]}, limited: {shown[2]}"
            raise forbidden("", "pods", meta.get("name", ""), why)


def used_by(store: Store, namespace: str, hard: Mapping[str, Any]) -> dict[str, str]:
    """What the quota controller reports: the usage of every pod, masked to `hard`, zeros kept."""
    now = store.clock()
    total: ResourceList = {}
    for _, pod in store.of("pods", namespace):
        total = _add(total, usage(pod, now))
    return {k: str(total[k]) if k in total else "0" for k in hard}


def follow(store: Store, old: Obj | None, new: Obj | None) -> None:
    """After a pod write: refresh `status.used` of the namespace's quotas when the charge moved."""
    pod = new or old
    if pod is None:
        return
    ns = pod["metadata"].get("namespace", "")
    found = quotas(store, ns)
    if not found:
        return
    now = store.clock()
    before, after = usage(old, now), usage(new, now)
    if before == after:
        return
    if all(k in before and after[k].value <= before[k].value for k in after) and len(after) <= len(before):
        store.quota_due.setdefault(ns, now + RELEASE_AFTER)  # a charge released: the controller sees it later
        return
    if ns in store.quota_due:  # admission adds what the new pod asks to what the quota says, stale or not
        _charge(store, ns, found, {k: v for k, v in after.items() if k not in before})
        return
    _recount(store, ns, found)


def _charge(store: Store, ns: str, found: list[Obj], added: Mapping[str, Quantity]) -> None:
    for q in found:
        status = q.get("status") or {}
        hard, used = status.get("hard") or {}, _list(status.get("used"))
        now_used = {k: str(used[k] + added[k]) if k in added and k in used else str(added[k]) if k in added else str(used[k]) if k in used else "0" for k in hard}
        if now_used != status.get("used"):
            store.write_status_internal(QUOTAS, ns, q["metadata"]["name"], {"hard": hard, "used": now_used})


def _recount(store: Store, ns: str, found: list[Obj]) -> None:
    for q in found:
        hard = (q.get("status") or {}).get("hard") or {}
        used = used_by(store, ns, hard)
        if used != (q.get("status") or {}).get("used"):
            store.write_status_internal(QUOTAS, ns, q["metadata"]["name"], {"hard": hard, "used": used})


def catch_up(store: Store) -> bool:
    """The quota controller's recalculation of the namespaces whose pods released a charge
    RELEASE_AFTER ago or more; True when it ran."""
    with store.lock:
        now = store.clock()
        due = [ns for ns, at in store.quota_due.items() if at <= now]
        for ns in due:
            del store.quota_due[ns]
            _recount(store, ns, quotas(store, ns))
    return bool(due)



class ResourceQuotaStrategy(Strategy):
    """ResourceQuota objects: `spec.hard` stored canonically; `status` is the controller's."""

    status_subresource = True

    def decode(self, body: Obj, kind: str, strict: bool) -> tuple[Obj, list[str]]:
        spec = body.get("spec") or {}
        try:
            hard = {k: quantity.canonical_text(v) for k, v in (spec.get("hard") or {}).items()}
        except quantity.QuantityError as exc:
            raise bad_request(f"ResourceQuota in version \"v1\" cannot be handled as a ResourceQuota: {exc}") from None
        return {**body, "spec": {**spec, "hard": hard}}, []

    def prepare_create(self, obj: Obj, ctx: Context) -> None:
        hard = obj["spec"]["hard"]
        obj["status"] = {"hard": dict(hard), "used": used_by(ctx.store, obj["metadata"].get("namespace", ""), hard)}

    def prepare_update(self, obj: Obj, old: Obj, ctx: Context) -> None:
        self.prepare_create(obj, ctx)
