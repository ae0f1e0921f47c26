"""Trim the kubernetes-validate JSON Schemas to what flatjob renders, as one small JSON file.

Run by a maintainer when the pinned Kubernetes version changes:

    python -m flatjob.compiler.kube.trim --from <kubernetes_validate wheel or
        .../kubernetes-json-schema/v1.32.0-local-strict> --out schemas/kubernetes/

The output keeps only the definitions reachable from `ROOTS`, drops descriptions, turns
enumerations that Kubernetes states only in prose into `enum`, and makes null handling
explicit (null is accepted for optional fields, rejected for required ones and for list
items). It is a draft-07 JSON Schema, so `jsonschema` can run it too; validator.py
compiles it into check functions. Same source bytes in, same output bytes out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .prose import default_from_prose, enum_from_prose
from .validator import KUBERNETES_VERSION

PACKAGE = "kubernetes-validate"

ROOTS = (
    "io.k8s.api.core.v1.Pod",
    "io.k8s.api.core.v1.PodTemplate",
    "io.k8s.api.core.v1.PodTemplateSpec",
    "io.k8s.api.core.v1.Service",
    "io.k8s.api.core.v1.ServicePort",
    "io.k8s.api.core.v1.ConfigMap",
    "io.k8s.api.core.v1.Secret",
    "io.k8s.api.core.v1.ServiceAccount",
    "io.k8s.api.core.v1.EnvVar",
    "io.k8s.api.core.v1.ResourceRequirements",
    "io.k8s.api.core.v1.Container",
    "io.k8s.api.rbac.v1.Role",
    "io.k8s.api.rbac.v1.RoleBinding",
    "io.k8s.api.apps.v1.Deployment",
    "io.k8s.api.coordination.v1.Lease",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
)

# Schema keywords that survive trimming; everything else (descriptions, patch strategies,
# unions, map types) is dropped.
_KEPT_KEYWORDS = frozenset({
    "type", "required", "enum", "format",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-patch-merge-key",
    "x-kubernetes-group-version-kind",
})

# The source writes these two as a oneOf whose branches both accept null, so jsonschema would
# reject `null`; one type list plus the Kubernetes format says the same thing correctly.
_SCALAR_UNIONS: dict[str, dict[str, Any]] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity":
        {"format": "quantity", "type": ["number", "string", "null"]},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
        {"format": "int-or-string", "type": ["integer", "string", "null"]},
}

# Enum fields for which the API server accepts "": defaulting fills them in before validation
# (imagePullPolicy, restartPolicy, protocol, ...) or validation allows empty (Toleration).
# Pointer-typed enums (fsGroupChangePolicy, preemptionPolicy, ...) reject "" and are not here.
_EMPTY_ACCEPTED = frozenset({
    ("io.k8s.api.apps.v1.DeploymentStrategy", "type"),
    ("io.k8s.api.core.v1.Container", "imagePullPolicy"),
    ("io.k8s.api.core.v1.ContainerPort", "protocol"),
    ("io.k8s.api.core.v1.EphemeralContainer", "imagePullPolicy"),
    ("io.k8s.api.core.v1.ImageVolumeSource", "pullPolicy"),
    ("io.k8s.api.core.v1.PodSpec", "dnsPolicy"),
    ("io.k8s.api.core.v1.PodSpec", "restartPolicy"),
    ("io.k8s.api.core.v1.ServicePort", "protocol"),
    ("io.k8s.api.core.v1.ServiceSpec", "sessionAffinity"),
    ("io.k8s.api.core.v1.ServiceSpec", "type"),
    ("io.k8s.api.core.v1.Toleration", "effect"),
    ("io.k8s.api.core.v1.Toleration", "operator"),
})

def source_member(version: str) -> str:
    """Return the path of the definitions file inside the kubernetes-validate package."""
    return f"kubernetes_validate/kubernetes-json-schema/v{version}-local-strict/_definitions.json"


def _metadata_version(metadata: str) -> str:
    """Return the Version field of a dist-info METADATA text."""
    match = re.search(r"^Version: *(\S+)", metadata, re.MULTILINE)
    if match is None:
        raise SystemExit("kubernetes-validate METADATA has no Version field")
    return match.group(1)


def _read_wheel(wheel: Path, version: str) -> tuple[bytes, str]:
    """Read the definitions file and the package version out of a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = sorted(n for n in names if n.startswith("kubernetes_validate-")
                          and n.endswith(".dist-info/METADATA"))
        if source_member(version) not in names or not metadata:
            raise SystemExit(f"{wheel} has no {source_member(version)}")
        text = archive.read(metadata[0]).decode("utf-8")
        return archive.read(source_member(version)), _metadata_version(text)


def _read_directory(schema_dir: Path) -> tuple[bytes, str]:
    """Read the definitions file from an unpacked package and its version from dist-info."""
    site = schema_dir.resolve().parents[2]
    found = sorted(site.glob("kubernetes_validate-*.dist-info/METADATA"))
    if not found:
        raise SystemExit(f"no kubernetes_validate-*.dist-info next to {site}")
    metadata = found[0].read_text(encoding="utf-8")
    return (schema_dir / "_definitions.json").read_bytes(), _metadata_version(metadata)


def installed_schema_dir(version: str = KUBERNETES_VERSION) -> Path | None:
    """Return the schema folder of an importable kubernetes_validate, without importing it."""
    from importlib.util import find_spec

    spec = find_spec("kubernetes_validate")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "kubernetes-json-schema" / f"v{version}-local-strict"
    return folder if (folder / "_definitions.json").is_file() else None


def read_source(path: Path, version: str) -> tuple[bytes, str]:
    """Return (definitions bytes, kubernetes-validate version) from a wheel or schema folder."""
    if path.suffix == ".whl":
        return _read_wheel(path, version)
    if path.name == "_definitions.json":
        path = path.parent
    return _read_directory(path)


def _refs(node: Any) -> Iterator[str]:
    """Yield the definition names a schema node refers to, following only schema keywords."""
    if not isinstance(node, dict):
        return
    if "$ref" in node:
        yield node["$ref"].rsplit("/", 1)[-1]
    for child in node.get("properties", {}).values():
        yield from _refs(child)
    for keyword in ("items", "additionalProperties"):
        yield from _refs(node.get(keyword))
    for keyword in ("allOf", "anyOf", "oneOf"):
        for child in node.get(keyword, ()):
            yield from _refs(child)


def reachable(definitions: dict[str, Any], roots: tuple[str, ...]) -> list[str]:
    """Return the sorted names of all definitions reachable from `roots`."""
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(_refs(definitions[name]))
    return sorted(seen)


def _types(node: dict[str, Any]) -> list[str]:
    """Return a node's `type` as a list."""
    declared = node.get("type", [])
    return [declared] if isinstance(declared, str) else list(declared)


def _non_null(definitions: dict[str, Any], ref: str) -> dict[str, Any]:
    """Wrap a $ref so null is rejected (draft-07 ignores siblings of $ref, hence allOf)."""
    name = ref.rsplit("/", 1)[-1]
    target = _SCALAR_UNIONS.get(name) or definitions[name]
    types = [t for t in _types(target) if t != "null"]
    wrapped: dict[str, Any] = {"allOf": [{"$ref": f"#/definitions/{name}"}]}
    if types:
        wrapped["type"] = types[0] if len(types) == 1 else types
    return wrapped


def _enum(node: dict[str, Any], values: Iterable[Any]) -> list[Any]:
    """Return a sorted enum for a string node; null joins it when the node accepts null."""
    allowed: list[Any] = sorted({v for v in values if v is not None})
    return [*allowed, None] if "null" in _types(node) else allowed


class _Trimmer:
    """Holds the source definitions while one definition at a time is trimmed."""

    def __init__(self, definitions: dict[str, Any]) -> None:
        self.definitions = definitions
        self.key_fields = self._list_map_key_fields()
        self.prose_enums: list[str] = []

    def _list_map_key_fields(self) -> set[tuple[str, str]]:
        """Return (definition, field) pairs that serve as list-map keys anywhere."""
        keys: set[tuple[str, str]] = set()
        for schema in self.definitions.values():
            for prop in schema.get("properties", {}).values():
                item_ref = prop.get("items", {}).get("$ref")
                if item_ref and prop.get("x-kubernetes-list-map-keys"):
                    item = item_ref.rsplit("/", 1)[-1]
                    keys.update((item, key) for key in prop["x-kubernetes-list-map-keys"])
        return keys

    def node(self, node: dict[str, Any], owner: str = "") -> dict[str, Any]:
        """Trim one schema node; `owner` names the definition whose properties these are."""
        if "$ref" in node:
            return {"$ref": "#/definitions/" + node["$ref"].rsplit("/", 1)[-1]}
        if "oneOf" in node or "anyOf" in node or "allOf" in node:
            raise SystemExit(f"unexpected schema combinator in {sorted(node)}")
        out = {k: v for k, v in node.items() if k in _KEPT_KEYWORDS}
        if "enum" in out:
            out["enum"] = _enum(out, out["enum"])
        required = set(node.get("required", ()))
        if "properties" in node:
            out["properties"] = {
                field: _non_null(self.definitions, prop["$ref"])
                if field in required and "$ref" in prop else self._property(owner, field, prop)
                for field, prop in sorted(node["properties"].items())
            }
        additional = node.get("additionalProperties")
        if isinstance(additional, dict):
            out["additionalProperties"] = self.node(additional)
        elif additional is not None:
            out["additionalProperties"] = additional
        items = node.get("items")
        if isinstance(items, dict):
            out["items"] = self._item(items)
        return out

    def _item(self, items: dict[str, Any]) -> dict[str, Any]:
        """Trim array items; items may not be null: an object item is refused, and a scalar one
        (`command: [python, ~]`) the API server's JSON decoding stores as its zero value ("", 0),
        so the cluster would get other text than the file shows (hx17)."""
        ref = items.get("$ref")
        if ref and "object" in _types(self.definitions[ref.rsplit("/", 1)[-1]]):
            return _non_null(self.definitions, ref)
        out = self.node(items)
        types = [t for t in _types(out) if t != "null"]
        if not ref and types and len(types) < len(_types(out)):
            out["type"] = types[0] if len(types) == 1 else types
            if "enum" in out:
                out["enum"] = [v for v in out["enum"] if v is not None]
        return out

    def definition(self, name: str) -> dict[str, Any]:
        """Trim one definition, including its properties' prose enums and key defaults."""
        if name in _SCALAR_UNIONS:
            return dict(_SCALAR_UNIONS[name])
        return self.node(self.definitions[name], owner=name)

    def _property(self, owner: str, field: str, prop: dict[str, Any]) -> dict[str, Any]:
        """Trim one property, adding an enum or a key default found in its description."""
        out = self.node(prop)
        description = prop.get("description", "")
        target = out.get("items", out)
        if "string" in _types(target) and "enum" not in target:
            values = enum_from_prose(description)
            if values:
                empty = ("",) if (owner, field) in _EMPTY_ACCEPTED else ()
                target["enum"] = _enum(target, values + empty)
                self.prose_enums.append(f"{owner}.{field}")
        if (owner, field) in self.key_fields:
            default = default_from_prose(description)
            if default is not None:
                out["default"] = default
        return out


def trim(definitions: dict[str, Any], roots: tuple[str, ...] = ROOTS) -> dict[str, Any]:
    """Return the trimmed definitions reachable from `roots` and the fields given prose enums."""
    trimmer = _Trimmer(definitions)
    trimmed = {name: trimmer.definition(name) for name in reachable(definitions, roots)}
    return {"definitions": trimmed, "proseEnums": sorted(trimmer.prose_enums)}


def build(source: bytes, package_version: str, version: str = KUBERNETES_VERSION) -> bytes:
    """Return the bytes of the trimmed schema file for a kubernetes-validate definitions file."""
    document = json.loads(source)
    trimmed = trim(document["$defs"])
    output = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "_meta": {
            "kubernetes": version,
            "roots": list(ROOTS),
            "enumsFromDescriptions": trimmed["proseEnums"],
            "source": {
                "package": PACKAGE,
                "version": package_version,
                "file": source_member(version),
                "sha256": hashlib.sha256(source).hexdigest(),
            },
            "generator": "python -m flatjob.compiler.kube.trim",
        },
        "definitions": trimmed["definitions"],
    }
    text = json.dumps(output, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return (text + "\n").encode("ascii")


def main(argv: list[str] | None = None) -> int:
    """Command line: read the source, write <out>/v<version>.json, print its size."""
    parser = argparse.ArgumentParser(prog="python -m flatjob.compiler.kube.trim",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path,
                        help="kubernetes_validate wheel or its v<version>-local-strict folder "
                             "(default: the installed kubernetes_validate)")
    parser.add_argument("--out", type=Path, required=True, help="folder for v<version>.json")
    parser.add_argument("--kubernetes", default=KUBERNETES_VERSION, help="Kubernetes version")
    args = parser.parse_args(argv)
    source = args.source or installed_schema_dir(args.kubernetes)
    if source is None:
        parser.error("--from is required when kubernetes_validate is not installed")
    data, package_version = read_source(source, args.kubernetes)
    payload = build(data, package_version, args.kubernetes)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"v{args.kubernetes}.json"
    target.write_bytes(payload)
    print(f"wrote {target} ({len(payload)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
