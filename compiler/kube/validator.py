"""Strict schema validation of manifests against one pinned Kubernetes version.

Lint calls `validate_manifest` on every rendered manifest; the renderer's tests call
`validate` on fragments (a PodTemplateSpec, a Container). The trimmed schema
(schemas/kubernetes/v<version>.json, made by trim.py) is read on the first call, and
each definition is compiled into checks the first time it is used; nothing happens at
import. What is checked: unknown fields, JSON types, required fields, enums (including
those Kubernetes states only in prose), formats (quantity, int32/int64, base64,
date-time) and duplicate list-map keys.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from .violation import WRONG_TYPE, Violation

if TYPE_CHECKING:
    from .checkers import SchemaCompiler

KUBERNETES_VERSION = "1.32.0"


def schema_path() -> Any:
    """Return the trimmed schema file; schemas/ sits next to compiler/ in a wheel and a checkout."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return root / "schemas" / "kubernetes" / f"v{KUBERNETES_VERSION}.json"


@functools.lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """Read the trimmed schema once per process."""
    import json

    return json.loads(schema_path().read_bytes())


@functools.lru_cache(maxsize=1)
def _compiler() -> SchemaCompiler:
    """Return the process-wide compiler over the trimmed definitions."""
    from .checkers import SchemaCompiler

    return SchemaCompiler(load_schema()["definitions"])


@functools.lru_cache(maxsize=1)
def _definitions_by_kind() -> dict[tuple[str, str], str]:
    """Map (apiVersion, kind) to the definition that declares it."""
    index: dict[tuple[str, str], str] = {}
    for name, schema in load_schema()["definitions"].items():
        for gvk in schema.get("x-kubernetes-group-version-kind", ()):
            group, version = gvk["group"], gvk["version"]
            index[(f"{group}/{version}" if group else version, gvk["kind"])] = name
    return index


def validate(obj: Any, definition: str) -> list[Violation]:
    """Return every way `obj` breaks the named definition, e.g. io.k8s.api.core.v1.Pod."""
    if definition not in load_schema()["definitions"]:
        raise ValueError(f"no definition {definition!r} in the Kubernetes "
                         f"{KUBERNETES_VERSION} schema")
    out: list[Violation] = []
    try:
        _compiler().definition(definition)(obj, (), out)
    except RecursionError:  # only self-referencing schemas (CRD JSONSchemaProps) nest this deep
        out.append(Violation((), WRONG_TYPE, "nested too deeply to validate"))
    return out


def validate_manifest(obj: Any) -> list[Violation]:
    """Validate a manifest by its apiVersion and kind; kinds outside the schema pass."""
    if type(obj) is not dict:
        return []
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if type(api_version) is not str or type(kind) is not str:
        return []
    definition = _definitions_by_kind().get((api_version, kind))
    return validate(obj, definition) if definition is not None else []
