"""Compile trimmed Kubernetes schema nodes into check functions, once per definition.

validator.py keeps one `SchemaCompiler` per process. A check is `check(value, path, out)`:
it appends a `Violation` to `out` for each problem in `value` (found at `path`) and never
raises for any nesting of dict/list/str/int/float/bool/None. Each schema shape (object,
map, array, scalar, typed reference) gets its own closure with everything it needs bound
at compile time, so validating walks the data once and looks nothing up by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .formats import FORMATS, show
from .violation import (
    BAD_ENUM,
    BAD_FORMAT,
    DUPLICATE_KEY,
    MISSING_REQUIRED,
    UNKNOWN_FIELD,
    WRONG_TYPE,
    Violation,
)

# Paths grow by `path + (key,)`, which is about twice as fast as `(*path, key)` (RUF005).
Path = tuple[Any, ...]
Check = Callable[[Any, Path, list[Violation]], None]

_NONE = type(None)
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (_NONE,),
}
_JSON_NAMES: dict[type, str] = {
    str: "string", int: "integer", float: "number", bool: "boolean",
    dict: "object", list: "array", _NONE: "null",
}
_HASHABLE_SCALARS = (str, int, float, bool, _NONE)


def _accept(value: Any, path: Path, out: list[Violation]) -> None:
    """Accept anything: the check for schema nodes without constraints."""


def _type_list(schema: dict[str, Any]) -> tuple[str, ...]:
    """Return the node's `type` keyword as a tuple (empty when absent)."""
    declared = schema.get("type", ())
    return (declared,) if isinstance(declared, str) else tuple(declared)


def _python_types(types: tuple[str, ...]) -> frozenset[type]:
    """Return the exact Python classes that the JSON types admit (bool is not an integer)."""
    return frozenset(cls for name in types for cls in _PYTHON_TYPES[name])


def _expected(types: tuple[str, ...]) -> str:
    """Word the allowed types for a message, leaving out null unless it is all there is."""
    shown = sorted(t for t in types if t != "null") or ["null"]
    return " or ".join(shown)


def _got(value: Any) -> str:
    """Name the JSON type of a value (or the Python type of something that is not JSON)."""
    return _JSON_NAMES.get(type(value)) or type(value).__name__


def _path_key(key: Any) -> str | int:
    """Return a mapping key as a path element (YAML may give keys that are not strings)."""
    return key if type(key) in (str, int) else show(key, limit=80)


# Slips no edit distance finds: a field of another volume source or object, by schema title
# (T9k's own manual writes `secret: {name: ...}`, corpus pytorchtrainingjob--...-secret-block1).
_SLIPS = {
    ("SecretVolumeSource", "name"): "secretName",
    ("ConfigMapVolumeSource", "secretName"): "name",
    ("PersistentVolumeClaimVolumeSource", "name"): "claimName",
    ("PersistentVolumeClaimVolumeSource", "claim"): "claimName",
    ("Volume", "pvc"): "persistentVolumeClaim",
    ("Volume", "configmap"): "configMap",
    ("Container", "environment"): "env",
    ("Container", "cmd"): "command",
    ("Container", "arguments"): "args",
    ("Container", "workdir"): "workingDir",
    ("Container", "mounts"): "volumeMounts",
}


def _hint(word: Any, candidates: Iterable[str], title: str = "") -> str | None:
    """Suggest the nearest candidate for a misspelt string, or the field a common slip
    means (suggest is imported on demand)."""
    if type(word) is not str:
        return None
    from ..validate.suggest import did_you_mean

    slip = _SLIPS.get((title, word))
    return f"did you mean {slip!r}?" if slip is not None else did_you_mean(word, candidates)


def _type_error(path: Path, types: tuple[str, ...], value: Any) -> Violation:
    """Build the wrong-type violation."""
    return Violation(path, WRONG_TYPE, f"expected {_expected(types)}, got {_got(value)}")


def _type_test(types: tuple[str, ...]) -> Callable[[Any], bool]:
    """Build a predicate for the JSON types; integral floats count as integers, as in JSON."""
    allowed = _python_types(types)
    integral = "integer" in types and "number" not in types

    if not integral:
        return lambda value: type(value) in allowed
    return lambda value: type(value) in allowed or (
        type(value) is float and value.is_integer())


def _typed(types: tuple[str, ...], then: Check | None = None, shape: type | None = None) -> Check:
    """Build a check of the JSON type, followed by `then` for right-typed values of `shape`."""
    if then is None and ("integer" not in types or "number" in types):
        return _plain(types)
    test = _type_test(types)

    def check(value: Any, path: Path, out: list[Violation]) -> None:
        if not test(value):
            out.append(_type_error(path, types, value))
        elif then is not None and (shape is None or type(value) is shape):
            then(value, path, out)

    return check


def _plain(types: tuple[str, ...]) -> Check:
    """Build the type-only check for the commonest leaf (a string, bool or nullable string)."""
    allowed = _python_types(types)

    def check(value: Any, path: Path, out: list[Violation]) -> None:
        if type(value) not in allowed:
            out.append(_type_error(path, types, value))

    return check


def _shaped(shape: type, then: Check) -> Check:
    """Build a check that applies `then` to values of `shape` and lets other values pass.

    That is JSON Schema's rule for `additionalProperties`/`items` on a node without `type`.
    """

    def check(value: Any, path: Path, out: list[Violation]) -> None:
        if type(value) is shape:
            then(value, path, out)

    return check


def _scalar(types: tuple[str, ...], enum: tuple[Any, ...] | None, fmt: str | None) -> Check:
    """Build a check for a scalar: type, then enum, then format."""
    test = _type_test(types)
    accepts, describe = FORMATS.get(fmt or "", (None, None))
    shown = ", ".join(str(v) for v in enum if v) if enum else ""
    names = [v for v in enum if isinstance(v, str) and v] if enum else []

    def check(value: Any, path: Path, out: list[Violation]) -> None:
        if types and not test(value):
            out.append(_type_error(path, types, value))
        elif enum is not None and value not in enum:
            out.append(Violation(path, BAD_ENUM, f"{show(value)} is not one of {shown}",
                                 hint=_hint(value, names)))
        elif accepts is not None and not accepts(value):
            out.append(Violation(path, BAD_FORMAT, describe(value)))

    return check


def _duplicates(items: list[Any], path: Path, keys: tuple[str, ...],
                defaults: tuple[Any, ...], out: list[Violation]) -> None:
    """Report list-map entries whose key fields (defaults applied) repeat an earlier entry."""
    if len(items) < 2:
        return
    seen: dict[tuple[Any, ...], int] = {}
    for index, item in enumerate(items):
        if type(item) is not dict:
            continue
        key = tuple(
            default if item.get(name) is None else item.get(name)
            for name, default in zip(keys, defaults, strict=True)
        )
        if not all(isinstance(part, _HASHABLE_SCALARS) for part in key):
            continue
        first = seen.setdefault(key, index)
        if first != index:
            parts = ", ".join(f"{name}={show(part)}" for name, part in zip(keys, key, strict=True))
            out.append(Violation(path + (index,), DUPLICATE_KEY,  # noqa: RUF005
                                 f"duplicate {parts} (first at index {first})"))


# Names the API server checks beyond their type (k8s.io/kubernetes pkg/apis/core/validation):
# (definition, field) -> (what it names, the syntax check from validate/names.py).
NAMES: dict[tuple[str, str], tuple[str, str]] = {
    ("Container", "name"): ("container name", "dns1123_label"),
    ("EphemeralContainer", "name"): ("container name", "dns1123_label"),
    ("Volume", "name"): ("volume name", "dns1123_label"),
    ("ContainerPort", "name"): ("port name", "iana_svc_name"),
    ("ServicePort", "name"): ("port name", "dns1123_label"),
    ("EnvVar", "name"): ("env name", "env_var_name"),
}


def _named(then: Check | None, what: str, rule: str) -> Check:
    """A name's own check (its type), then its syntax; an env name the pinned version takes but
    older API servers refuse is a warning."""
    from ..validate import names

    syntax = getattr(names, rule)

    def check(value: Any, path: Path, out: list[Violation]) -> None:
        if then is not None:
            then(value, path, out)
        if type(value) is not str:
            return
        why = syntax(value)
        if why:
            out.append(Violation(path, BAD_FORMAT, f"{what} {show(value)} {why}"))
        elif rule == "env_var_name" and names.portable_env_var_name(value):
            out.append(Violation(path, BAD_FORMAT, f"{what} {show(value)} {names.portable_env_var_name(value)}", warning=True))

    return check


# What Go's JSON decoding (sigs.k8s.io/json, the API server's) stores for a null item of a list
# of scalars: a null leaves the element at its zero value.  The schema says ["string", "null"]
# for `command`, `args`, `capabilities.add`... so the type check alone passes `[python, ~]`.
_ZERO = {"string": '""', "integer": "0", "number": "0", "boolean": "false"}


def _null_item(items: dict[str, Any]) -> str | None:
    """The message for a null item of a list of scalars (None: a null item is refused otherwise,
    or the items are objects, which the trimmed schema already makes non-null)."""
    types = [t for t in _type_list(items) if t != "null"]
    if "$ref" in items or len(types) != 1 or types[0] not in _ZERO:
        return None
    return f"expected {types[0]}, got null: the API server would store {_ZERO[types[0]]} in its place, not what this file shows"


def _refuse_null(then: Check, message: str) -> Check:
    """Refuse a null item (hx17: `command: [python, ~]` rendered null, and ran `python ""`)."""

    def check(value: Any, path: Path, out: list[Violation]) -> None:
        if value is None:
            out.append(Violation(path, WRONG_TYPE, message))
        else:
            then(value, path, out)

    return check


class SchemaCompiler:
    """Turns definitions of one trimmed schema into checks, compiling each at most once."""

    def __init__(self, definitions: dict[str, Any]) -> None:
        self._definitions = definitions
        self._compiled: dict[str, Check] = {}

    def definition(self, name: str) -> Check:
        """Return the check for a definition, compiling it (and what it refers to) on first use."""
        check = self._compiled.get(name)
        if check is None:
            slot: list[Check] = []
            # A definition that refers back to itself (JSONSchemaProps) reaches this forwarder.
            self._compiled[name] = lambda value, path, out: slot[0](value, path, out)
            check = self.node(self._definitions[name], name.rsplit(".", 1)[-1]) or _accept
            slot.append(check)
            self._compiled[name] = check
        return check

    def _target(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Follow a $ref to the schema it names."""
        while "$ref" in schema:
            schema = self._definitions[schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    def _nullable(self, schema: dict[str, Any]) -> bool:
        """Tell whether a property schema admits null."""
        types = _type_list(self._target(schema))
        return not types or "null" in types

    def node(self, schema: dict[str, Any], title: str) -> Check | None:
        """Return the check for a schema node, or None when the node accepts anything."""
        if "$ref" in schema:
            return self.definition(schema["$ref"].rsplit("/", 1)[-1])
        types = _type_list(schema)
        if "allOf" in schema:
            return self._all_of(schema, types, title)
        if "properties" in schema:
            return self._object(schema, types, title)
        if isinstance(schema.get("additionalProperties"), dict):
            return self._map(schema, types, title)
        if "items" in schema:
            return self._array(schema, types, title)
        enum, fmt = schema.get("enum"), schema.get("format")
        if not types and enum is None and fmt not in FORMATS:
            return None
        if enum is None and fmt not in FORMATS:
            return _typed(types)
        return _scalar(types, tuple(enum) if enum is not None else None, fmt)

    def _all_of(self, schema: dict[str, Any], types: tuple[str, ...], title: str) -> Check:
        """Build a check for `allOf` under a type (how the trimmed file makes a $ref non-null)."""
        parts = [c for c in (self.node(s, title) for s in schema["allOf"]) if c is not None]

        def every(value: Any, path: Path, out: list[Violation]) -> None:
            for part in parts:
                part(value, path, out)

        return _typed(types, every) if types else every

    def _object(self, schema: dict[str, Any], types: tuple[str, ...], title: str) -> Check:
        """Build a check for an object with named properties."""
        schemas = schema["properties"]
        properties = {name: _named(self.node(prop, title), *NAMES[(title, name)]) if (title, name) in NAMES else self.node(prop, title) for name, prop in schemas.items()}
        required = tuple(schema.get("required", ()))
        not_null = frozenset(n for n in required if not self._nullable(schemas.get(n, {})))
        additional = schema.get("additionalProperties", True)
        closed = additional is False
        extra = self.node(additional, title) if isinstance(additional, dict) else None
        test = _type_test(types)
        names = tuple(properties)

        def check(value: Any, path: Path, out: list[Violation]) -> None:
            if type(value) is not dict:
                if types and not test(value):
                    out.append(_type_error(path, types, value))
                return
            for key, item in value.items():
                if key in properties:
                    if item is None and key in not_null:
                        out.append(Violation(path + (key,), MISSING_REQUIRED,  # noqa: RUF005
                                             f"required field {key!r} in {title} is null"))
                        continue
                    sub = properties[key]
                    if sub is not None:
                        sub(item, path + (key,), out)  # noqa: RUF005
                elif closed:
                    out.append(Violation(path + (_path_key(key),), UNKNOWN_FIELD,  # noqa: RUF005
                                         f"unknown field {show(key)} in {title}",
                                         key=True, hint=_hint(key, names, title)))
                elif extra is not None:
                    extra(item, path + (_path_key(key),), out)  # noqa: RUF005
            for name in required:
                if name not in value:
                    out.append(Violation(path, MISSING_REQUIRED,
                                         f"missing required field {name!r} in {title}"))

        return check

    def _map(self, schema: dict[str, Any], types: tuple[str, ...], title: str) -> Check:
        """Build a check for a map whose values all follow one schema (labels, resources)."""
        values = self.node(schema["additionalProperties"], title) or _accept

        def each(value: dict[Any, Any], path: Path, out: list[Violation]) -> None:
            for key, item in value.items():
                step = key if type(key) is str else _path_key(key)
                values(item, path + (step,), out)  # noqa: RUF005

        return _typed(types, each, dict) if types else _shaped(dict, each)

    def _array(self, schema: dict[str, Any], types: tuple[str, ...], title: str) -> Check:
        """Build a check for an array: every item, then unique list-map keys."""
        items = self.node(schema["items"], title) or _accept
        null_item = _null_item(schema["items"])
        if null_item is not None:
            items = _refuse_null(items, null_item)
        keys = tuple(schema.get("x-kubernetes-list-map-keys", ()))
        if schema.get("x-kubernetes-list-type") != "map":
            keys = ()
        item_schema = self._target(schema["items"].get("allOf", [schema["items"]])[0])
        item_fields = item_schema.get("properties", {})
        defaults = tuple(item_fields.get(k, {}).get("default") for k in keys)

        def each(value: list[Any], path: Path, out: list[Violation]) -> None:
            for index, item in enumerate(value):
                items(item, path + (index,), out)  # noqa: RUF005
            if keys:
                _duplicates(value, path, keys, defaults, out)

        return _typed(types, each, list) if types else _shaped(list, each)
