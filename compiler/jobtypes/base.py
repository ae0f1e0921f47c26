"""Plain frozen job objects and the strict checks that build them, without pydantic.

Importing pydantic and building its models costs ~100 ms, half of a 1000-pod compile; the
compile path only needs pydantic when a spec is wrong and must be explained. So the job
objects the pipeline passes around are these plain classes, generated from the pydantic
models (compiler/models/typegen.py), and `Typed.parse` checks a document as strictly as the
model would. It may only ever be stricter: anything it cannot vouch for raises `Reject`,
and pydantic then decides and explains (compiler/validate/typed.py). tests/test_jobtypes.py
holds the two together on the corpus and on generated documents.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar


class Reject(Exception):
    """Not certainly valid: pydantic decides, and explains why (compiler/validate/schema.py)."""


class Check:
    """How one field's value is checked; `check` returns the value to store or raises Reject."""

    __slots__ = ()

    def check(self, value: Any) -> Any:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError


class Exactly(Check):
    """A scalar of exactly this type: strict mode takes no bool for int and no int for str."""

    __slots__ = ("type",)

    def __init__(self, type_: type) -> None:
        self.type = type_

    def check(self, value: Any) -> Any:
        if type(value) is not self.type:
            raise Reject
        return value

    def __repr__(self) -> str:
        return {str: "STR", bool: "BOOL", int: "INT"}[self.type]


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


class Anything(Check):
    """An untyped value (a Kubernetes object inside a T9k field), kept as it was written.

    Only JSON-shaped data is vouched for (what YAML and the API server give): anything else,
    such as a non-string key, goes to pydantic, whose JSON dump converts it its own way.
    """

    __slots__ = ()

    def check(self, value: Any) -> Any:
        stack = [value]
        while stack:
            item = stack.pop()
            t = type(item)
            if t is dict:
                if any(type(k) is not str for k in item):
                    raise Reject
                stack.extend(item.values())
            elif t is list:
                stack.extend(item)
            elif t not in _JSON_SCALARS:
                raise Reject
        return value

    def __repr__(self) -> str:
        return "ANY"


STR, BOOL, INT, ANY = Exactly(str), Exactly(bool), Exactly(int), Anything()


class Int(Check):
    """An integer within inclusive bounds."""

    __slots__ = ("ge", "le")

    def __init__(self, ge: int | None = None, le: int | None = None) -> None:
        self.ge, self.le = ge, le

    def check(self, value: Any) -> Any:
        if type(value) is not int or (self.ge is not None and value < self.ge) or (self.le is not None and value > self.le):
            raise Reject
        return value

    def __repr__(self) -> str:
        bounds = [f"{k}={v}" for k, v in (("ge", self.ge), ("le", self.le)) if v is not None]
        return f"Int({', '.join(bounds)})"


class OneOf(Check):
    """One of a few strings (a Literal)."""

    __slots__ = ("values",)

    def __init__(self, *values: str) -> None:
        self.values = values  # a few strings: a tuple is as quick as a set, and keeps their order

    def check(self, value: Any) -> Any:
        if type(value) is not str or value not in self.values:
            raise Reject
        return value

    def __repr__(self) -> str:
        return f"OneOf({', '.join(map(repr, self.values))})"


class ListOf(Check):
    """A list whose items all pass `item`; a new list, as pydantic makes."""

    __slots__ = ("item", "min_length")

    def __init__(self, item: Check, min_length: int = 0) -> None:
        self.item, self.min_length = item, min_length

    def check(self, value: Any) -> Any:
        if type(value) is not list or len(value) < self.min_length:
            raise Reject
        item = self.item.check
        return [item(v) for v in value]

    def __repr__(self) -> str:
        return f"ListOf({self.item!r}, min_length={self.min_length})" if self.min_length else f"ListOf({self.item!r})"


class DictOf(Check):
    """A mapping of string keys to values that pass `value`; a new dict, as pydantic makes."""

    __slots__ = ("value",)

    def __init__(self, value: Check) -> None:
        self.value = value

    def check(self, value: Any) -> Any:
        if type(value) is not dict:
            raise Reject
        inner = self.value.check
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise Reject
            out[k] = inner(v)
        return out

    def __repr__(self) -> str:
        return f"DictOf({self.value!r})"


class Opt(Check):
    """None, or a value that passes `inner`."""

    __slots__ = ("inner",)

    def __init__(self, inner: Check) -> None:
        self.inner = inner

    def check(self, value: Any) -> Any:
        return None if value is None else self.inner.check(value)

    def __repr__(self) -> str:
        return f"Opt({self.inner!r})"


class Either(Check):
    """A value that passes one of the options, tried in order (IntOrString)."""

    __slots__ = ("options",)

    def __init__(self, *options: Check) -> None:
        self.options = options

    def check(self, value: Any) -> Any:
        for option in self.options:
            try:
                return option.check(value)
            except Reject:
                continue
        raise Reject

    def __repr__(self) -> str:
        return f"Either({', '.join(map(repr, self.options))})"


class Nested(Check):
    """A nested object: a mapping checked by its class, or an object of that class."""

    __slots__ = ("cls",)

    def __init__(self, cls: type[Typed]) -> None:
        self.cls = cls

    def check(self, value: Any) -> Any:
        return value if type(value) is self.cls else self.cls.parse(value)

    def __repr__(self) -> str:
        return f"Nested({self.cls.__name__})"


REQUIRED: Any = object()


class Field:
    """One field: its Python name, its camelCase name on the wire, its check and its default."""

    __slots__ = ("alias", "default", "exclude", "factory", "kind", "name")

    def __init__(
        self, name: str, alias: str, kind: Check, default: Any = REQUIRED, *,
        factory: Callable[[], Any] | None = None, exclude: bool = False,
    ) -> None:
        self.name, self.alias, self.kind = name, alias, kind
        self.default, self.factory, self.exclude = default, factory, exclude

    def missing(self) -> Any:
        """The value of an unset field; a required field cannot be unset."""
        if self.factory is not None:
            return self.factory()
        if self.default is REQUIRED:
            raise Reject
        return self.default


class Typed:
    """A frozen job object: attributes named like the pydantic model's fields, and the same
    `wire()` and `model_copy()` the pipeline uses."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[Field, ...]] = ()
    _BY_KEY: ClassVar[dict[str, Field]] = {}
    _NAMES: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        # With populate_by_name the models take the Python name as well as the alias.
        cls._BY_KEY = {**{f.name: f for f in cls.FIELDS}, **{f.alias: f for f in cls.FIELDS}}
        cls._NAMES = frozenset(f.name for f in cls.FIELDS)

    @classmethod
    def _refuse_unknown(cls, names: dict[str, Any]) -> None:
        """A TypeError for Python field names this class does not have."""
        unknown = names.keys() - cls._NAMES
        if unknown:
            raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")

    @classmethod
    def parse(cls, data: Any) -> Any:
        """Build from a wire mapping, as strictly as the pydantic model; Reject if unsure."""
        if type(data) is not dict:
            raise Reject
        by_key = cls._BY_KEY
        given: dict[str, Any] = {}
        for key, value in data.items():
            f = by_key.get(key)
            if f is None or f.name in given:  # unknown, or both spellings of one field
                raise Reject
            given[f.name] = value
        return _build(cls, [f.kind.check(given[f.name]) if f.name in given else f.missing() for f in cls.FIELDS])

    def __init__(self, **values: Any) -> None:
        """Build from Python field names, checked like `parse` (normalize makes a few)."""
        cls = type(self)
        cls._refuse_unknown(values)
        for f in cls.FIELDS:
            try:
                value = f.kind.check(values[f.name]) if f.name in values else f.missing()
            except Reject:
                raise TypeError(f"{cls.__name__}.{f.name}: invalid or missing value {values.get(f.name)!r}") from None
            object.__setattr__(self, f.name, value)

    def model_copy(self, update: dict[str, Any] | None = None) -> Any:
        """A shallow copy with some fields replaced (not checked, as in pydantic)."""
        update = update or {}
        cls = type(self)
        cls._refuse_unknown(update)
        return _build(cls, [update[f.name] if f.name in update else getattr(self, f.name) for f in cls.FIELDS])

    def wire(self) -> dict[str, Any]:
        """As the API stores it: camelCase keys, unset optional fields omitted, JSON values
        (pydantic's model_dump(by_alias=True, exclude_none=True, mode="json"))."""
        out: dict[str, Any] = {}
        for f in type(self).FIELDS:
            value = getattr(self, f.name)
            if value is not None and not f.exclude:
                out[f.alias] = to_json(value)
        return out

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in self.FIELDS)

    __hash__ = None  # type: ignore[assignment]  # fields hold dicts and lists

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in self.FIELDS)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return _build, (type(self), [getattr(self, f.name) for f in self.FIELDS])


def _build(cls: type[Typed], values: list[Any]) -> Any:
    """An object of `cls` with these field values, in FIELDS order (no checks)."""
    obj = object.__new__(cls)
    for f, value in zip(cls.FIELDS, values, strict=True):
        object.__setattr__(obj, f.name, value)
    return obj


def to_json(value: Any) -> Any:
    """A value as JSON data: objects wired, containers copied, inf and nan as null (as pydantic)."""
    t = type(value)
    if t is dict:
        return {k: to_json(v) for k, v in value.items()}
    if t is list:
        return [to_json(v) for v in value]
    if t is float:
        return value if math.isfinite(value) else None
    if isinstance(value, Typed):
        return value.wire()
    return value


def from_model(obj: Any, classes: dict[str, type[Typed]]) -> Any:
    """The plain object for a pydantic-validated one (when only pydantic could vouch for it)."""
    if hasattr(type(obj), "__pydantic_fields__"):
        cls = classes[type(obj).__name__]
        return _build(cls, [from_model(getattr(obj, f.name), classes) for f in cls.FIELDS])
    if type(obj) is list:
        return [from_model(v, classes) for v in obj]
    if type(obj) is dict:
        return {k: from_model(v, classes) for k, v in obj.items()}
    return obj
