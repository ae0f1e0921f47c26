"""Structural pruning: the fields a schema does not declare are dropped, as the API server
drops them (apiextensions-apiserver/pkg/apiserver/schema/pruning).

The fake API server prunes what it stores with it.  The runtime prunes a record's spec with
its own version's CRD schema before reading it: a newer CRD installed in the cluster adds
fields (and its defaults fill them in on every read), which an older runtime's strict
reading would refuse, stalling every running job compiled by the older version.  A record
is compiled by the runtime's own version, so a field it does not know can only come from
such a CRD: it is dropped and named, never an error.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

CRD_DIR = Path(__file__).resolve().parents[1] / "schemas" / "crds"  # beside the package: runtime/ or flatjob/

Obj = dict[str, Any]


def prune(value: Any, schema: Obj, path: str, dropped: list[str]) -> Any:
    """`value` without the fields `schema` does not declare; their paths go to `dropped`."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        keep = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or extra is True
        out = {}
        for k, v in value.items():
            if k in props:
                out[k] = prune(v, props[k], f"{path}.{k}", dropped)
            elif isinstance(extra, dict):
                out[k] = prune(v, extra, f"{path}.{k}", dropped)
            elif keep:
                out[k] = v
            else:
                dropped.append(f"{path}.{k}".lstrip("."))
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"], f"{path}[{i}]", dropped) for i, v in enumerate(value)]
    return value


@functools.cache
def record_spec_schema(plural: str) -> Obj:
    """The spec schema of this version's CRD for a record plural (empty: keep everything)."""
    path = CRD_DIR / f"{plural}.flatjob.dev.yaml"
    if not path.is_file():
        return {"x-kubernetes-preserve-unknown-fields": True}
    crd = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    version = (crd.get("spec") or {}).get("versions", [{}])[0]
    props = ((version.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
    return props.get("spec") or {"x-kubernetes-preserve-unknown-fields": True}
