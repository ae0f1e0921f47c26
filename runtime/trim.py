"""What the runtime keeps of each watched object: only the fields its decisions read.

An API server's pod is 5-8 KB of JSON (defaults, managedFields, status); a job of 5000 pods
must fit the runtime's memory limit, so informers cache trimmed copies, made as each list
page or watch event arrives.  Trimming also normalises shapes a hand edit could break
(a list where a map belongs), so nothing downstream meets a type it does not expect.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

_META = ("name", "namespace", "uid", "resourceVersion", "generation", "deletionTimestamp", "creationTimestamp")
_TERMINATED = ("exitCode", "reason", "message")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> dict[str, str]:
    return {k: v for k, v in _dict(value).items() if isinstance(k, str) and isinstance(v, str)}


def meta(obj: Obj, *, labels: bool = True, annotations: bool = True) -> Obj:
    """metadata without managedFields, finalizers and the like."""
    m = _dict(obj.get("metadata"))
    out = {k: m[k] for k in _META if m.get(k) is not None}
    if labels and m.get("labels"):
        out["labels"] = _strings(m["labels"])
    if annotations and m.get("annotations"):
        out["annotations"] = _strings(m["annotations"])
    if m.get("ownerReferences"):
        out["ownerReferences"] = [_dict(r) for r in _list(m["ownerReferences"])]
    return out


def _container_status(status: Any) -> Obj:
    s = _dict(status)
    state = _dict(s.get("state"))
    kept: Obj = {}
    if "terminated" in state:
        term = _dict(state["terminated"])
        kept["terminated"] = {k: term[k] for k in _TERMINATED if term.get(k) is not None}
    elif "running" in state:
        kept["running"] = {}
    elif "waiting" in state:
        kept["waiting"] = {k: v for k, v in _dict(state["waiting"]).items() if k == "reason"}
    return {"name": str(s.get("name", "")), "state": kept}


def pod(obj: Obj) -> Obj:
    """A pod as the decisions see it: identity, gates, phase, readiness, exit codes."""
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    out: Obj = {"metadata": meta(obj), "spec": {}, "status": {}}
    gates = [{"name": g["name"]} for g in _list(spec.get("schedulingGates")) if isinstance(g, dict) and isinstance(g.get("name"), str)]
    if gates:
        out["spec"]["schedulingGates"] = gates
    for key in ("phase", "reason", "message"):
        if isinstance(status.get(key), str):
            out["status"][key] = status[key]
    ready = [{"type": "Ready", "status": c.get("status")} for c in _list(status.get("conditions")) if isinstance(c, dict) and c.get("type") == "Ready"]
    if ready:
        out["status"]["conditions"] = ready
    statuses = [_container_status(s) for s in _list(status.get("containerStatuses"))]
    if statuses:
        out["status"]["containerStatuses"] = statuses
    return out


def record(obj: Obj) -> Obj:
    """A job record: spec and status whole (the decisions read both), metadata trimmed."""
    out = {k: obj[k] for k in ("apiVersion", "kind", "spec", "status") if k in obj}
    out["metadata"] = meta(obj, labels=False)
    return out


def named(obj: Obj) -> Obj:
    """Objects watched only for existence (the SSH Secret, the PodGroup): never their data."""
    return {"metadata": meta(obj, labels=False, annotations=False)}
