"""Check a job document against its pydantic model; map every error to its line and column.

Imported only when the plain check (compiler/jobtypes) cannot vouch for a document: pydantic
takes ~100 ms to import and build, and is what explains a mistake.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from ..digits import INT32_MAX, INT64_MAX
from ..errors import Diagnostic
from ..loader import Document, PathT
from ..models import MODELS, T9kModel
from .suggest import did_you_mean
from .typed import TYPE_WORDS, describe


def _unwrap(tp: Any) -> list[Any]:
    """Strip Optional/Annotated/Union wrappers from an annotation; return the member types."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(tp):
            if arg is not type(None):
                out.extend(_unwrap(arg))
        return out
    return [tp]


def model_at(root: type[BaseModel], path: PathT) -> type[BaseModel] | None:
    """Follow a wire path through model annotations; return the model found there, if any."""
    current: list[Any] = [root]
    for part in path:
        nxt: list[Any] = []
        for tp in current:
            origin = typing.get_origin(tp)
            if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
                for name, info in tp.model_fields.items():
                    if (info.alias or name) == part:
                        nxt.extend(_unwrap(info.annotation))
            elif origin is list and isinstance(part, int):
                nxt.extend(_unwrap(typing.get_args(tp)[0]))
            elif origin is dict and isinstance(part, str):
                nxt.extend(_unwrap(typing.get_args(tp)[1]))
        current = nxt
    for tp in current:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
    return None


def field_names(model: type[BaseModel]) -> list[str]:
    """The wire names of a model's fields, in declaration order."""
    return [info.alias or name for name, info in model.model_fields.items()]


def _trim(data: Any, loc: tuple[Any, ...]) -> tuple[PathT, str | int | None]:
    """Split a pydantic loc into the part present in the data and a trailing missing name.

    pydantic appends union member tags ('int', 'str', 'list[str]') to locs; those are not
    in the data and are dropped, so the error lands on the value the user wrote.
    """
    path: list[str | int] = []
    node = data
    for i, part in enumerate(loc):
        if (isinstance(node, dict) and isinstance(part, str) and part in node) or (isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
            path.append(part)
            node = node[part]
        elif i == len(loc) - 1 and isinstance(node, dict):
            return tuple(path), part
        else:
            continue
    return tuple(path), None


_UNQUOTED = {
    "int_type": re.compile(r"[-+]?[0-9]+"),
    "float_type": re.compile(r"[-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?"),
    "bool_type": re.compile(r"true|false"),
}


def _unquoted_fits(kind: str, value: str) -> bool:
    """Whether a quoted value is what the field takes once unquoted ("2" for an integer)."""
    pattern = _UNQUOTED.get(kind)
    return pattern is not None and pattern.fullmatch(value) is not None


def _value_at(data: Any, path: PathT) -> Any:
    for part in path:
        data = data[part]
    return data


def _message(err: dict[str, Any], doc: Document, model: type[BaseModel], path: PathT, tail: Any) -> Diagnostic:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "missing":
        name = tail if tail is not None else (path[-1] if path else "?")
        parent = path if tail is not None else path[:-1]
        where = f" in {_fmt(parent)}" if parent else ""
        return doc.diagnostic("FJ203", f"missing required field {name!r}{where}", parent, key=True)
    if kind == "extra_forbidden":
        name = tail if tail is not None else path[-1]
        parent = path if tail is not None else path[:-1]
        owner = model_at(model, parent)
        hint = did_you_mean(str(name), field_names(owner)) if owner else None
        where = f" in {_fmt(parent)}" if parent else ""
        return doc.diagnostic("FJ201", f"unknown field {name!r}{where}", (*parent, name), key=True, hint=hint)
    value = _value_at(doc.data, path)
    if kind in TYPE_WORDS:
        hint = None
        if kind == "list_type" and isinstance(value, str):
            hint = f"write it as a list: [{value}]"
        elif kind == "string_type" and isinstance(value, (int, float)) and not isinstance(value, bool):
            hint = f"quote it: \"{value}\""
        elif isinstance(value, str) and _unquoted_fits(kind, value):  # replicas: "2"
            hint = f"write it without quotes: {value}"
        return doc.diagnostic("FJ202", f"{_fmt(path)}: expected {TYPE_WORDS[kind]}, got {describe(value)}", path, hint=hint)
    if kind == "literal_error":
        expected = ctx.get("expected", "")
        allowed = [a.strip().strip("'") for a in expected.replace(" or ", ", ").split(",") if a.strip()]
        hint = did_you_mean(str(value), allowed) if isinstance(value, str) else None
        return doc.diagnostic("FJ204", f"{_fmt(path)}: {describe(value)} is not one of {expected}", path, hint=hint)
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "?")
        return doc.diagnostic("FJ204", f"{_fmt(path)}: must be {sign} {bound}{_WIDTHS.get(bound, '')}, got {value}", path)
    if kind == "too_short":
        return doc.diagnostic("FJ204", f"{_fmt(path)}: must have at least {ctx.get('min_length', 1)} item(s)", path)
    return doc.diagnostic("FJ204", f"{_fmt(path)}: {err.get('msg', 'invalid value')}", path)


# Why a bound is what it is, for the bounds every integer of a T9k type has (models/base.py).
_WIDTHS = {
    INT32_MAX: " (the largest int32: T9k's CRD and the launchers hold it in 32 bits)",
    -INT32_MAX - 1: " (the smallest int32: T9k's CRD holds it in 32 bits)",
    INT64_MAX: " (the largest int64, as Kubernetes holds a deadline)",
}


def _fmt(path: PathT) -> str:
    from ..loader import format_path

    return format_path(path) or "document"


def validate_with_model(doc: Document, kind: str, data: dict[str, Any], problems: list[Diagnostic]) -> tuple[T9kModel | None, list[Diagnostic]]:
    """Validate with the kind's pydantic model; return it, or every error at its line."""
    model = MODELS[kind]
    try:
        return model.model_validate(data), problems
    except ValidationError as exc:
        seen: set[tuple[Any, ...]] = set()
        unions: dict[PathT, list[str]] = {}
        for err in exc.errors(include_url=False, include_input=False):
            path, tail = _trim(data, err["loc"])
            if err["type"] in TYPE_WORDS and path in unions:
                unions[path].append(err["type"])
                continue
            unions.setdefault(path, []).append(err["type"])
            key = (path, tail, err["type"])
            if key in seen:
                continue
            seen.add(key)
            problems.append(_message(err, doc, model, path, tail))
        return None, _merge_union_errors(problems, unions)


def _merge_union_errors(problems: list[Diagnostic], unions: dict[PathT, list[str]]) -> list[Diagnostic]:
    """An IntOrString value that is neither gets one message naming both types."""
    out = []
    for p in problems:
        if p.code == "FJ202" and p.field is not None:
            kinds = next((v for k, v in unions.items() if _fmt(k) == p.field), [])
            words = [TYPE_WORDS[k] for k in dict.fromkeys(kinds) if k in TYPE_WORDS]
            if len(words) > 1:
                head, _, tail = p.message.partition(": expected ")
                got = tail.split(", got ", 1)[1] if ", got " in tail else "something else"
                p = Diagnostic(p.code, f"{head}: expected {' or '.join(words)}, got {got}", p.path, p.line, p.col, p.severity, p.hint, p.field, p.source_line)
        out.append(p)
    return out
