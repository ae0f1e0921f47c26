"""`metadata.managedFields` as kube-apiserver writes them for non-apply writes.

Every create, update and patch records, for the writer (the fieldManager parameter, else the
User-Agent's product token: staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go
managerOrUserAgent), an `operation: Update` entry whose `fieldsV1` lists the fields it set, in
structured-merge-diff's encoding: `f:<field>` for fields, `k:{...}` for items of lists keyed by
their `+listMapKey`s, `v:<value>` for set items, and `.` for a map or list item owned as a whole.
A writer takes over the fields it changed from the other managers, and fields a write removes
are nobody's any more (fieldmanager/internal/managedfieldsupdater.go); a manager left owning
nothing has no entry.  What is not emulated: apply (`operation: Apply`), conflicts, and
ownership of fields an admission plugin adds.
"""

from __future__ import annotations

import json
from typing import Any

from ...api import Obj

# +listType=map +listMapKey (k8s.io/api/core/v1/types.go, meta/v1/types.go); lists not named
# here are atomic (owned whole, `f:<list>: {}`).
LIST_MAP_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "imagePullSecrets": ("name",),
    "schedulingGates": ("name",),
    "resourceClaims": ("name",),
    "env": ("name",),
    "ports": ("containerPort", "protocol"),
    "volumeMounts": ("mountPath",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "hostIPs": ("ip",),
    "podIPs": ("ip",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
}
SET_LISTS = frozenset({"finalizers"})
# Go map types (map[string]...) are owned as a whole too (`.`); struct fields are not.
MAP_FIELDS = frozenset({"labels", "annotations", "nodeSelector", "limits", "requests", "data", "stringData", "binaryData", "hard", "used", "overhead"})
_SKIP_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"})

Path = tuple[str, ...]


def _leaves(value: Any, path: Path, name: str, out: dict[Path, Any]) -> None:
    if isinstance(value, dict) and value:
        if name in MAP_FIELDS:
            out[(*path, ".")] = None
        for k, v in value.items():
            _leaves(v, (*path, f"f:{k}"), k, out)
    elif isinstance(value, list) and value and name in LIST_MAP_KEYS and all(isinstance(i, dict) for i in value):
        keys = LIST_MAP_KEYS[name]
        for item in value:
            token = "k:" + json.dumps({k: item[k] for k in keys if k in item}, separators=(",", ":"), sort_keys=True)
            out[(*path, token, ".")] = None
            for k, v in item.items():
                _leaves(v, (*path, token, f"f:{k}"), k, out)
    elif isinstance(value, list) and value and name in SET_LISTS:
        for item in value:
            out[(*path, "v:" + json.dumps(item, separators=(",", ":")))] = None
    else:
        out[path] = value


def leaves(obj: Obj, subresource: str) -> dict[Path, Any]:
    """Every owned field of `obj` a write to the main resource or `status` can set, with its value."""
    out: dict[Path, Any] = {}
    if subresource == "status":
        _leaves(obj.get("status"), ("f:status",), "status", out)
        return out
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SKIP_META}
    if meta:
        _leaves(meta, ("f:metadata",), "metadata", out)
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            _leaves(value, (f"f:{key}",), key, out)
    return out


def fieldset(paths: set[Path]) -> Obj:
    """Nest paths into fieldsV1."""
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(part, {})
    return root


def _paths(fields: Obj, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for k, v in fields.items():
        out |= _paths(v, (*prefix, k)) if v else {(*prefix, k)}
    return out


def record(old: Obj | None, new: Obj, manager: str, subresource: str, now: str, api_version: str) -> list[Obj]:
    """The managedFields of `new` after `manager` wrote it (from `old`, None on create)."""
    before = leaves(old, subresource) if old is not None else {}
    after = leaves(new, subresource)
    changed = {p for p, v in after.items() if p not in before or before[p] != v}
    removed = set(before) - set(after)
    entries = [dict(e) for e in ((old or {}).get("metadata") or {}).get("managedFields") or []]
    if not changed and not removed:
        return entries
    mine = None
    kept = []
    for entry in entries:
        same = entry.get("manager") == manager and entry.get("operation") == "Update" and entry.get("subresource", "") == subresource
        if same:
            mine = entry
            continue
        owned = _paths(entry.get("fieldsV1") or {}) - changed - removed
        if owned:
            kept.append({**entry, "fieldsV1": fieldset(owned)})
    owned = ((_paths(mine.get("fieldsV1") or {}) if mine else set()) | changed) - removed
    if not owned:
        return kept
    entry = {"manager": manager, "operation": "Update", "apiVersion": api_version, "time": now, "fieldsType": "FieldsV1", "fieldsV1": fieldset(owned)}
    if subresource:
        entry["subresource"] = subresource
    return [*kept, entry]
