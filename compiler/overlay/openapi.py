"""An OpenAPI (swagger 2.0) document for kustomize's `openapi:` field, so plain kustomize merges
T9k jobs with the same list keys as `flatjob compile --overlay` (kustomize#1027 otherwise).

kustomize reads only the merge extensions (`x-kubernetes-patch-merge-key`, `-patch-strategy`)
and the shape that leads to them (properties, items, $ref).  A custom schema replaces
kustomize's built-in one for that build, so the file also carries the Kubernetes kinds of
the pinned schema (Pod, Service, ConfigMap, Deployment...) with their own merge keys.
Written to schemas/kustomize/ by `flatjob schema`.
"""

from __future__ import annotations

import json
from typing import Any

from ..loader import T9K_KINDS
from .listkeys import POD_TEMPLATE_DEFINITION, POD_TEMPLATES, T9K_LISTS

FILE = "kustomize/openapi.json"
T9K_GROUP, T9K_VERSION = "batch.tensorstack.dev", "v1beta1"
CLONE_PREFIX = "dev.flatjob.t9k."  # the pod template types as T9k jobs merge them
SPEC = "dev.tensorstack.batch.v1beta1.JobSpec"
# volumeMounts merge by name as in flatjob's overlays (name is required there).  Ports keep
# Kubernetes' containerPort: kustomize silently drops a patch item that lacks the merge key,
# and port names are optional, so merging ports by name would lose unnamed ports.
OVERRIDES = {"volumeMounts": "name"}
KEEP = ("x-kubernetes-group-version-kind", "x-kubernetes-patch-merge-key", "x-kubernetes-list-type", "x-kubernetes-list-map-keys")


def _ref_name(schema: dict[str, Any]) -> str | None:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    refs = [m["$ref"] for m in schema.get("allOf", ()) if "$ref" in m]
    return str(refs[0]).rsplit("/", 1)[-1] if len(refs) == 1 else None


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/definitions/{name}"}


def swagger(schema: dict[str, Any], rename: dict[str, str] | None = None) -> dict[str, Any]:
    """A JSON Schema definition reduced to what kustomize's merge reads."""
    target = _ref_name(schema)
    if target is not None:
        return _ref((rename or {}).get(target, target))
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((t for t in kind if t != "null"), None)
    if kind:
        out["type"] = kind
    if "properties" in schema:
        out["properties"] = {k: swagger(v, rename) for k, v in sorted(schema["properties"].items())}
    if isinstance(schema.get("items"), dict):
        out["items"] = swagger(schema["items"], rename)
    out.update({k: schema[k] for k in KEEP if k in schema})
    if "x-kubernetes-patch-merge-key" in out:
        out["x-kubernetes-patch-strategy"] = "merge"
    return out


def _reachable(defs: dict[str, Any], start: str) -> list[str]:
    """Definition names reachable from `start` through $refs, in a stable order."""
    seen: list[str] = []
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.append(name)
        todo.extend(sorted(_refs(defs[name]), reverse=True))
    return seen


def _refs(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        found = {_ref_name(schema)} - {None} if ("$ref" in schema or "allOf" in schema) else set()
        return found | {r for v in schema.values() for r in _refs(v)}
    if isinstance(schema, list):
        return {r for v in schema for r in _refs(v)}
    return set()


def _t9k_pod_types(defs: dict[str, Any]) -> dict[str, Any]:
    """Copies of the pod template types in which volumeMounts merge by name."""
    names = _reachable(defs, POD_TEMPLATE_DEFINITION)
    rename = {n: CLONE_PREFIX + n for n in names}
    out = {}
    for name in names:
        clone = swagger(defs[name], rename)
        clone.pop("x-kubernetes-group-version-kind", None)
        for prop, key in OVERRIDES.items():
            field = clone.get("properties", {}).get(prop)
            if field is not None and "x-kubernetes-patch-merge-key" in field:
                field["x-kubernetes-patch-merge-key"] = key
                field.pop("x-kubernetes-list-map-keys", None)
        out[rename[name]] = clone
    return out


def _at(tree: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """The schema node at a path, creating objects and arrays on the way."""
    node = tree
    for part in path:
        if part == "*":
            node["type"] = "array"
            node = node.setdefault("items", {"type": "object"})
        else:
            node.setdefault("type", "object")
            node = node.setdefault("properties", {}).setdefault(part, {})
    return node


def spec_definition() -> dict[str, Any]:
    """The spec shared by the four kinds: T9k's keyed lists and where pod templates sit."""
    tree: dict[str, Any] = {"type": "object"}
    for pattern, keys in sorted(T9K_LISTS.items()):
        node = _at(tree, pattern[1:])
        node.update({"type": "array", "x-kubernetes-patch-merge-key": keys[0], "x-kubernetes-patch-strategy": "merge"})
        node.setdefault("items", {"type": "object"})
    for pattern in POD_TEMPLATES:
        _at(tree, pattern[1:]).update(_ref(CLONE_PREFIX + POD_TEMPLATE_DEFINITION))
    return tree


def kind_definition(kind: str) -> dict[str, Any]:
    """One T9k kind, recognised by kustomize through its group-version-kind."""
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": _ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
            "spec": _ref(SPEC),
        },
        "x-kubernetes-group-version-kind": [{"group": T9K_GROUP, "kind": kind, "version": T9K_VERSION}],
    }


def openapi_document() -> dict[str, Any]:
    """The whole document: Kubernetes' pinned kinds, the T9k kinds and their pod types."""
    from ..kube.validator import load_schema

    defs = load_schema()["definitions"]
    definitions = {name: swagger(schema) for name, schema in defs.items()}
    definitions.update(_t9k_pod_types(defs))
    definitions[SPEC] = spec_definition()
    definitions.update({f"dev.tensorstack.batch.v1beta1.{k}": kind_definition(k) for k in T9K_KINDS})
    return {
        "swagger": "2.0",
        "info": {"title": "T9k jobs for kustomize strategic merge (generated by flatjob schema)", "version": T9K_VERSION},
        "paths": {},
        "definitions": dict(sorted(definitions.items())),
    }


def openapi_files() -> dict[str, str]:
    """Relative path under schemas/ -> file text."""
    return {FILE: json.dumps(openapi_document(), indent=1, sort_keys=True) + "\n"}
