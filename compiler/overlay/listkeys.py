"""Which lists of a T9k job merge item by item, and on which key (like Kubernetes' merge keys).

Strategic merge needs to know that `replicaSpecs` items are identified by `type` and
`containers` by `name`; without that a patch replaces the whole list (kustomize#1027).
T9k's own lists are listed here; lists inside a pod template take the merge keys of the pinned
Kubernetes schema, except where flatjob's overlays follow the issue's T9k terms (volumeMounts
and ports by name).  The overlay merge and the kustomize OpenAPI schema both read this table,
so a patch merges the same way in `flatjob compile --overlay` and in plain kustomize.
"""

from __future__ import annotations

import functools
from typing import Any

Pattern = tuple[str, ...]  # a field path with "*" for every list index
Keys = tuple[str, ...]  # the merge key, then fallbacks used when a patch item lacks it

# T9k's lists, relative to the job document.
T9K_LISTS: dict[Pattern, Keys] = {
    ("spec", "replicaSpecs"): ("type",),
    ("spec", "runMode", "debug", "replicaSpecs"): ("type",),
    ("spec", "runMode", "pause", "resumeSpecs"): ("type",),
    ("spec", "service", "ports"): ("name", "port"),
    ("spec", "launcher", "env"): ("name",),
    ("spec", "tensorboardSpec", "logDir", "pvc"): ("name",),
}

# Where a kind keeps its pod templates (PyTorch, Generic and new-shape ColossalAI; DeepSpeed
# and old-shape ColossalAI).
POD_TEMPLATES: tuple[Pattern, ...] = (("spec", "replicaSpecs", "*", "template"), ("spec", "worker", "template"))

# Inside a pod template, where flatjob's key differs from Kubernetes' patchMergeKey.
POD_OVERRIDES: dict[str, Keys] = {
    "volumeMounts": ("name", "mountPath"),
    "ports": ("name", "containerPort"),
}

POD_TEMPLATE_DEFINITION = "io.k8s.api.core.v1.PodTemplateSpec"


def _ref(schema: dict[str, Any]) -> str | None:
    """The definition a property or list item points at, if any."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for member in schema.get("allOf", ()):
        if "$ref" in member:
            return str(member["$ref"]).rsplit("/", 1)[-1]
    return None


def _walk(defs: dict[str, Any], name: str, path: Pattern, seen: frozenset[str], out: dict[Pattern, Keys]) -> None:
    if name in seen or name not in defs:
        return
    for prop, schema in (defs[name].get("properties") or {}).items():
        here = (*path, prop)
        ref = _ref(schema)
        if ref:
            _walk(defs, ref, here, seen | {name}, out)
        elif "items" in schema:
            key = schema.get("x-kubernetes-patch-merge-key")
            if key:
                out[here] = POD_OVERRIDES.get(prop, (key,))
            item = _ref(schema["items"])
            if item:
                _walk(defs, item, (*here, "*"), seen | {name}, out)


@functools.lru_cache(maxsize=1)
def pod_template_lists() -> dict[Pattern, Keys]:
    """Merge keys of every keyed list in a PodTemplateSpec, from the pinned Kubernetes schema."""
    from ..kube.validator import load_schema

    out: dict[Pattern, Keys] = {}
    _walk(load_schema()["definitions"], POD_TEMPLATE_DEFINITION, (), frozenset(), out)
    return out


def pattern(path: tuple[str | int, ...]) -> Pattern:
    """A concrete field path as a pattern: list indices become '*'."""
    return tuple("*" if isinstance(p, int) else p for p in path)


@functools.lru_cache(maxsize=512)
def list_keys(where: Pattern) -> Keys | None:
    """The merge key (and fallbacks) of the list at `where`, or None for an atomic list."""
    if where in T9K_LISTS:
        return T9K_LISTS[where]
    for template in POD_TEMPLATES:
        if where[: len(template)] == template:
            return pod_template_lists().get(where[len(template) :])
    return None

