"""Custom resources as apiextensions-apiserver serves them, from the CRDs flatjob ships.

- numbers: request bodies are decoded into unstructured JSON (k8s.io/apimachinery/pkg/util/
  json/json.go convertNumber): a number that parses as an int64 is an int64, anything else a
  float64, which Go's encoding/json writes back without a fraction when it is integral.  So
  `1.0` is stored and read back as `1`, and `2.5` stays `2.5`;
- pruning (apiextensions-apiserver/pkg/apiserver/schema/pruning): fields the structural schema
  does not declare are dropped (kept under `x-kubernetes-preserve-unknown-fields`), with an
  `unknown field` warning, or a 400 under fieldValidation=Strict;
- validation (apiextensions-apiserver/pkg/apiserver/validation, kube-openapi validate): type,
  enum, minimum, maximum, minItems, required; errors read as the real server's
  (`spec.x: Invalid value: 0: spec.x in body should be greater than or equal to 1`), in a 422
  `<Kind>.<group> "<name>" is invalid`;
- the status subresource (registry/customresource/strategy.go, status_strategy.go): create
  drops status, a main write keeps it, a status write changes nothing else; generation is 1
  on create and grows when anything outside metadata and status changes; an update must carry
  metadata.resourceVersion (AllowUnconditionalUpdate is false);
- defaulting (apiextensions-apiserver/pkg/apiserver/schema/defaulting/algorithm.go Default):
  a property the object lacks gets its schema's `default`, on every object read, as the API
  server defaults what it decodes from etcd (so a record created without status reads back
  with the CRD's default status);
- the scale subresource (registry/customresource/etcd.go ScaleREST): an autoscaling/v1 Scale
  read from specReplicasPath and statusReplicasPath (0 when absent); a write sets
  specReplicasPath, must keep replicas >= 0 (autoscaling ValidateScale) and the whole resource
  must still pass the CRD schema.
"""

from __future__ import annotations

import decimal
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...api import Obj
from ...pruning import prune
from .copies import clone
from .status import FieldError, bad_request, invalid, invalid_field, not_supported, required
from .strategy import Strategy

CRD_DIR = Path(__file__).resolve().parents[3] / "schemas" / "crds"  # beside the package root: runtime/ or flatjob/
INT64 = (-(2**63), 2**63 - 1)


def number(value: Any) -> Any:
    """convertNumber, then encoding/json: what a JSON number reads back as."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if INT64[0] <= value <= INT64[1]:
            return value
        value = float(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(decimal.Decimal(repr(value)))  # Go prints the shortest digits, zero-padded
    return value


def normalize(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, (int, float)):
        return number(value)
    return value


@dataclass(frozen=True)
class Crd:
    """What the fake reads from a CustomResourceDefinition."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    schema: Obj
    status: bool
    scale: Obj | None
    short_names: tuple[str, ...] = ()


def _crd(doc: Obj) -> Crd:
    spec = doc["spec"]
    version = next(v for v in spec["versions"] if v.get("storage"))
    sub = version.get("subresources") or {}
    return Crd(
        group=spec["group"], version=version["name"], kind=spec["names"]["kind"], plural=spec["names"]["plural"],
        singular=spec["names"].get("singular", ""), schema=(version.get("schema") or {}).get("openAPIV3Schema") or {},
        status="status" in sub, scale=sub.get("scale"), short_names=tuple(spec["names"].get("shortNames") or ()),
    )


@functools.lru_cache(maxsize=1)
def shipped() -> tuple[Crd, ...]:
    """The CRDs of schemas/crds (the job records); libyaml's loader when there is one (the pure
    Python one takes a second for these files, on every run-local start)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(_crd(yaml.load(p.read_text(), Loader=loader)) for p in sorted(CRD_DIR.glob("*.flatjob.dev.yaml")))


# T9k's PodGroup CRD is not shipped with flatjob: its schema is unknown, so it keeps every field.
PODGROUP = Crd("scheduler.tensorstack.dev", "v1beta1", "PodGroup", "podgroups", "podgroup", {"type": "object", "x-kubernetes-preserve-unknown-fields": True}, True, None)

_DEFAULTS_BELOW: dict[int, tuple[Obj, bool]] = {}  # id(schema) -> (schema, whether it or a property below has a default)


def _defaults_below(schema: Obj) -> bool:
    """Whether a default is declared anywhere in `schema` (cached per schema object: most of a
    record, its status above all, has none, and defaulting it on every write was a third of a
    scenario's time)."""
    hit = _DEFAULTS_BELOW.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    subs = [*(schema.get("properties") or {}).values(), schema.get("items"), schema.get("additionalProperties")]
    found = any(isinstance(sub, dict) and ("default" in sub or _defaults_below(sub)) for sub in subs)
    _DEFAULTS_BELOW[id(schema)] = (schema, found)
    return found


def defaulted(value: Any, schema: Obj) -> Any:
    """`value` with the schema's defaults filled in where a property is missing (the same
    object when there is none to fill)."""
    if not _defaults_below(schema):
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = [defaulted(v, schema["items"]) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if not isinstance(value, dict):
        return value
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None
    out = {k: clone(sub["default"]) for k, sub in props.items() if k not in value and "default" in sub}
    for k, v in value.items():
        sub = props.get(k, extra)
        new = defaulted(v, sub) if isinstance(sub, dict) else v
        if new is not v:
            out[k] = new
    return {**value, **out} if out else value


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string", dict: "object", list: "array"}.get(type(value), "null")


def _bounds(value: Any, schema: Obj, path: str) -> list[FieldError]:
    """enum, minimum, maximum, minItems."""
    errs: list[FieldError] = []
    if "enum" in schema and value not in schema["enum"]:
        errs.append(not_supported(path, value, [str(v) for v in schema["enum"]]))
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and "minimum" in schema and value < schema["minimum"]:
        errs.append(invalid_field(path, value, f"{path} in body should be greater than or equal to {schema['minimum']}"))
    if number and "maximum" in schema and value > schema["maximum"]:
        errs.append(invalid_field(path, value, f"{path} in body should be less than or equal to {schema['maximum']}"))
    if isinstance(value, list) and "minItems" in schema and len(value) < schema["minItems"]:
        errs.append(invalid_field(path, value, f"{path} in body should have at least {schema['minItems']} items", shown=f"{len(value)}"))
    return errs


def _wrong_type(value: Any, schema: Obj, path: str) -> FieldError | None:
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            return None
        return invalid_field(path, value, f"{path} in body must be of type int-or-string: \"{_type_name(value)}\"")
    want = schema.get("type")
    if not want or _type_name(value) == want or (want == "number" and _type_name(value) == "integer"):
        return None
    if want == "integer" and isinstance(value, float) and value.is_integer():
        return None
    return invalid_field(path, value, f"{path} in body must be of type {want}: \"{_type_name(value)}\"")


def validate(value: Any, schema: Obj, path: str) -> list[FieldError]:
    """The OpenAPI checks the flatjob CRDs use, with kube-openapi's messages."""
    if value is None:
        return []
    wrong = _wrong_type(value, schema, path)
    if wrong is not None:
        return [wrong]
    errs = _bounds(value, schema, path)
    if isinstance(value, list):
        for i, item in enumerate(value):
            errs += validate(item, schema.get("items") or {}, f"{path}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        errs += [required(f"{path}.{name}".lstrip(".")) for name in schema.get("required") or [] if name not in value]
        for k, v in value.items():
            sub = props.get(k) if k in props else schema.get("additionalProperties")
            if isinstance(sub, dict):
                errs += validate(v, sub, f"{path}.{k}".lstrip("."))
    return errs


class CustomResourceStrategy(Strategy):
    """A custom resource of one CRD."""

    unconditional_update = False
    generation = True
    strategic_merge = False

    def __init__(self, crd: Crd):
        self.crd = crd
        self.status_subresource = crd.status

    def decode(self, body: Obj, kind: str, strict: bool) -> tuple[Obj, list[str]]:
        obj = normalize(body)
        dropped: list[str] = []
        meta = obj.get("metadata")
        rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        pruned = prune(rest, self.crd.schema, "", dropped)
        out = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
        if meta is not None:
            out["metadata"] = meta
        out.update(pruned)
        if dropped and strict:
            raise bad_request("strict decoding error: " + ", ".join(f'unknown field "{d}"' for d in dropped))
        return out, [f'unknown field "{d}"' for d in dropped]

    def _schema_errors(self, obj: Obj) -> list[FieldError]:
        return validate({k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}, self.crd.schema, "")

    def prepare_create(self, obj: Obj, ctx: Any) -> None:
        if self.crd.status:
            obj.pop("status", None)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return self._schema_errors(obj)

    def prepare_update(self, obj: Obj, old: Obj, ctx: Any) -> None:
        if self.crd.status:
            obj.pop("status", None)
            if "status" in old:
                obj["status"] = clone(old["status"])

    def validate_update(self, obj: Obj, old: Obj) -> list[FieldError]:
        return self._schema_errors(obj)

    def validate_status(self, obj: Obj, old: Obj) -> list[FieldError]:
        return self._schema_errors(obj)

    # --- the scale subresource ------------------------------------------------------------------
    def _path(self, key: str) -> list[str]:
        return str((self.crd.scale or {}).get(key, "")).lstrip(".").split(".")

    def scale_of(self, obj: Obj) -> Obj:
        """scaleFromCustomResource."""
        meta = obj["metadata"]
        scale = {
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta},
            "spec": {"replicas": _nested(obj, self._path("specReplicasPath")) or 0},
            "status": {"replicas": _nested(obj, self._path("statusReplicasPath")) or 0},
        }
        if (self.crd.scale or {}).get("labelSelectorPath"):
            scale["status"]["selector"] = _nested(obj, self._path("labelSelectorPath")) or ""
        return scale

    def apply_scale(self, obj: Obj, scale: Obj) -> Obj:
        """scaleUpdatedObjectInfo: the resource with the Scale's replicas written in."""
        replicas = (scale.get("spec") or {}).get("replicas")
        name = obj["metadata"]["name"]
        if replicas is None:
            raise bad_request(f'the spec replicas field "{self.crd.scale["specReplicasPath"]}" cannot be empty')
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise bad_request(f"Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {_type_name(replicas)} into Go struct field ScaleSpec.spec.replicas of type int32")
        if replicas < 0:
            raise invalid("autoscaling", "Scale", name, [invalid_field("spec.replicas", replicas, "must be greater than or equal to 0")])
        out = clone(obj)
        node = out
        *parents, last = self._path("specReplicasPath")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = replicas
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv:
            out["metadata"]["resourceVersion"] = rv
        return out


def _nested(obj: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj
