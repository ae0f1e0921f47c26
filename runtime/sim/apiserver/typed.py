"""Decoding a built-in kind's JSON body into its Go type, as kube-apiserver does.

A request body for a built-in kind (Pod, Secret, Lease) goes through the typed JSON decoder
(k8s.io/apimachinery/pkg/runtime/serializer/json, sigs.k8s.io/json), so:
- unknown fields are dropped, each with a `Warning: 299 - "unknown field ..."` response header
  (fieldValidation=Warn, the default) or refused with 400 (fieldValidation=Strict);
- a JSON value of the wrong type is a 400 BadRequest (`cannot unmarshal ...`), and an integer
  field refuses a float (`1.0` is not an int32 to Go's encoding/json) and a number past its
  Go type's range (2^31 for an int32);
- a resource.Quantity is parsed and stored in canonical form (quantity.py), so `cpu: 1.0` reads
  back `"1"`.
The field types come from the OpenAPI definitions of Kubernetes 1.32 that the compiler's
validator ships (schemas/kubernetes/); definitions it does not hold are passed through.
"""

from __future__ import annotations

from typing import Any

from flatjob.compiler.kube.validator import load_schema

from . import quantity
from .status import bad_request

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
# encoding/json refuses a number out of its Go integer's range (`cannot unmarshal number
# 2147483648 into Go struct field ... of type int32`), as it refuses a float.
_INT_BOUND = {"int32": 2**31}  # int64 and the rest: 2**63
_GO_TYPES = {"string": "string", "integer": "int64", "boolean": "bool", "number": "float64", "object": "object", "array": "array"}


class _Decoder:
    def __init__(self, kind: str, strict: bool):
        self.kind, self.strict = kind, strict
        self.definitions: dict[str, Any] = load_schema()["definitions"]
        self.unknown: list[str] = []

    def _resolve(self, schema: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
        ref = schema.get("$ref") or next((s.get("$ref") for s in schema.get("allOf") or [] if "$ref" in s), None)
        if ref is None:
            return None, schema
        name = ref.rsplit("/", 1)[-1]
        return name, self.definitions.get(name)

    def _fail(self, path: str, value: Any, want: str) -> Exception:
        got = {bool: "bool", str: "string", int: "number", float: "number", list: "array", dict: "object"}.get(type(value), "value")
        shown = f"number {value}" if got == "number" else got
        where = path.lstrip(".") or "."
        return bad_request(f"{self.kind} in version \"v1\" cannot be handled as a {self.kind}: json: cannot unmarshal {shown} into Go struct field {where} of type {want}")

    def value(self, value: Any, schema: dict[str, Any] | None, path: str) -> Any:
        if schema is None:
            return value
        name, schema = self._resolve(schema)
        if name == QUANTITY:
            return self._quantity(value, path)
        if name == INT_OR_STRING or schema is None or value is None:
            return value
        types = schema.get("type") or []
        types = [types] if isinstance(types, str) else types
        fmt = schema.get("format", "")
        if "object" in types or "properties" in schema or "additionalProperties" in schema:
            if not isinstance(value, dict):
                raise self._fail(path, value, "object")
            return self._object(value, schema, path)
        if "array" in types:
            if not isinstance(value, list):
                raise self._fail(path, value, "array")
            return [self.value(v, schema.get("items"), path) for v in value]
        if "integer" in types and (isinstance(value, bool) or not isinstance(value, int) or not -_INT_BOUND.get(fmt, 2**63) <= value < _INT_BOUND.get(fmt, 2**63)):
            raise self._fail(path, value, fmt or "int64")
        if "boolean" in types and not isinstance(value, bool):
            raise self._fail(path, value, "bool")
        if "string" in types and not isinstance(value, str) and "number" not in types:
            raise self._fail(path, value, "string")
        return value

    def _object(self, value: dict[str, Any], schema: dict[str, Any], path: str) -> dict[str, Any]:
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if props is not None and key in props:
                out[key] = self.value(item, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out[key] = self.value(item, extra, f"{path}.{key}")
            elif props is None and extra is None:
                out[key] = item
            else:
                self.unknown.append(f"{path}.{key}".lstrip("."))
        return out

    def _quantity(self, value: Any, path: str) -> str:
        try:
            return quantity.canonical_text(value)
        except quantity.QuantityError as exc:
            raise bad_request(f"{self.kind} in version \"v1\" cannot be handled as a {self.kind}: {exc}") from None


def decode(definition: str, kind: str, body: dict[str, Any], strict: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The body as the typed decoder leaves it, and the warnings for the fields it dropped."""
    decoder = _Decoder(kind, strict)
    schema = decoder.definitions.get(definition)
    out = decoder._object(body, schema, "") if schema is not None else body
    if decoder.unknown and strict:
        listed = ", ".join(f'unknown field "{u}"' for u in decoder.unknown)
        raise bad_request(f"strict decoding error: {listed}")
    return out, [f'unknown field "{u}"' for u in decoder.unknown]


def quantities_in(value: Any, definition: str) -> Any:
    """Canonicalize the quantities of a fragment of a typed object (a PodSpec, a ResourceList)."""
    decoder = _Decoder("Pod", False)
    return decoder.value(value, {"$ref": f"#/definitions/{definition}"}, "")
