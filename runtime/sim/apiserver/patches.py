"""The three patch types kube-apiserver accepts from the clients flatjob uses.

- JSON patch (RFC 6902, evanphx/json-patch as vendored by kube-apiserver): add, remove,
  replace, move, copy, test.  Any operation that cannot apply, a failed `test` included, makes
  the whole patch a 422 with a generic message (endpoints/handlers/patch.go, jsonPatcher).
- JSON merge patch (RFC 7386): objects merge, `null` deletes, everything else replaces.
- Strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch): a merge patch whose
  lists merge by the key the Go types declare (`patchMergeKey`: containers by name, env by
  name, ownerReferences by uid...), with the `$patch: delete|replace` and
  `$deleteFromPrimitiveList` directives.  Only built-in kinds accept it; custom resources
  answer 415 (apiextensions-apiserver has no Go types to read merge keys from).
"""

from __future__ import annotations

from typing import Any

from flatjob.compiler.overlay.jsonpatch import PatchError, pointer

from .copies import clone
from .status import bad_request, unprocessable_patch

_MISSING = object()


class _Failed(Exception):
    """An operation that does not apply (turned into the 422 of the whole patch)."""


def _pointer(path: str) -> list[str]:
    try:
        return pointer(path)
    except PatchError as exc:
        raise _Failed(str(exc)) from None


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for p in parts[:-1]:
        node = _child(node, p)
        if node is _MISSING:
            raise _Failed("doc is missing path")
    return node


def _child(node: Any, key: str) -> Any:
    if isinstance(node, dict):
        return node.get(key, _MISSING)
    if isinstance(node, list) and key.isdigit() and int(key) < len(node):
        return node[int(key)]
    return _MISSING


def _index(node: list[Any], key: str, adding: bool) -> int:
    if adding and key == "-":
        return len(node)
    if not key.isdigit() or (len(key) > 1 and key[0] == "0"):
        raise _Failed(f"invalid array index {key!r}")
    i = int(key)
    if i > len(node) - (0 if adding else 1):
        raise _Failed("index out of bounds")
    return i


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    return _child(_parent(doc, parts), parts[-1])


def _put(doc: Any, path: str, value: Any, adding: bool) -> Any:
    """`add` (inserts into lists, sets keys) or `replace` (the target must exist)."""
    parts = _pointer(path)
    if not parts:
        return value
    parent, key = _parent(doc, parts), parts[-1]
    if isinstance(parent, dict):
        if not adding and key not in parent:
            raise _Failed("doc is missing key")
        parent[key] = value
    elif isinstance(parent, list):
        at = _index(parent, key, adding)
        if adding:
            parent.insert(at, value)
        else:
            parent[at] = value
    else:
        raise _Failed("parent is not a container")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise _Failed("cannot remove the root")
    parent, key = _parent(doc, parts), parts[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise _Failed("doc is missing key")
        return doc, parent.pop(key)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, key, False))
    raise _Failed("parent is not a container")


def _test(doc: Any, path: str, value: Any) -> Any:
    try:
        found = _get(doc, path)
    except _Failed:
        found = _MISSING
    if found is _MISSING or found is None:
        if value is None:
            return doc  # evanphx: testing a missing path for null passes
        raise _Failed("test failed")
    if not _json_equal(found, value):
        raise _Failed("test failed")
    return doc


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def json_patch(doc: Any, ops: Any) -> Any:
    """Apply an RFC 6902 patch to a copy of `doc`."""
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    out = clone(doc)
    try:
        for op in ops:
            kind, path = op.get("op"), op.get("path")
            if not isinstance(path, str):
                raise _Failed("missing path")
            if kind == "add":
                out = _put(out, path, clone(op.get("value")), adding=True)
            elif kind == "remove":
                out, _ = _remove(out, path)
            elif kind == "replace":
                out = _put(out, path, clone(op.get("value")), adding=False)
            elif kind == "move":
                out, value = _remove(out, str(op.get("from")))
                out = _put(out, path, value, adding=True)
            elif kind == "copy":
                value = _get(out, str(op.get("from")))
                if value is _MISSING:
                    raise _Failed("copy from a missing path")
                out = _put(out, path, clone(value), adding=True)
            elif kind == "test":
                out = _test(out, path, op.get("value"))
            else:
                raise _Failed(f"Unexpected kind: {kind}")
    except _Failed:
        raise unprocessable_patch() from None
    return out


def merge_patch(doc: Any, patch: Any) -> Any:
    """RFC 7386 on a copy of `doc`."""
    if not isinstance(patch, dict):
        return clone(patch)
    out = clone(doc) if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = merge_patch(out.get(key), value)
        else:
            out[key] = clone(value)
    return out


# --- strategic merge patch ------------------------------------------------------------------------

# patchMergeKey of the Go types (k8s.io/api/core/v1/types.go, meta/v1/types.go), by field name;
# lists not named here are atomic and replaced whole.  Names that need their parent to decide
# are keyed by (parent, field).
MERGE_KEYS: dict[str | tuple[str, str], str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "hostAliases": "ip",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "resizePolicy": "resourceName",
    "ownerReferences": "uid",
    "conditions": "type",
    "topologySpreadConstraints": "topologyKey",
    ("containers", "ports"): "containerPort",
    ("initContainers", "ports"): "containerPort",
}
MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})


def _merge_key(parent: str, name: str) -> str | None:
    return MERGE_KEYS.get((parent, name)) or MERGE_KEYS.get(name)


def strategic_merge_patch(doc: Any, patch: Any) -> Any:
    """A strategic merge patch on a copy of `doc` (built-in kinds only)."""
    if not isinstance(patch, dict):
        raise bad_request("the patch is not a JSON object")
    return _smp_map(clone(doc) if isinstance(doc, dict) else {}, patch, "")


def _smp_map(out: dict[str, Any], patch: dict[str, Any], parent: str) -> Any:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            out[field] = [v for v in out.get(field) or [] if v not in value]
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            merged = _smp_map(out[key] if isinstance(out.get(key), dict) else {}, value, key)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        elif isinstance(value, list):
            out[key] = _smp_list(out.get(key), value, parent, key)
        else:
            out[key] = clone(value)
    return out


def _smp_list(current: Any, patch: list[Any], parent: str, name: str) -> list[Any]:
    current = current if isinstance(current, list) else []
    if name in MERGED_PRIMITIVE_LISTS:
        return current + [v for v in patch if v not in current]
    key = _merge_key(parent, name)
    if key is None or not all(isinstance(p, dict) for p in patch):
        return [clone(v) for v in patch if not (isinstance(v, dict) and v.get("$patch"))]
    out = list(current)
    for item in patch:
        if item.get("$patch") == "replace":
            return [clone({k: v for k, v in item.items() if k != "$patch"})]
        at = next((i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if at is not None:
                out.pop(at)
        elif at is None:
            out.append(clone(item))
        else:
            out[at] = _smp_map(out[at], item, name)
    return out
