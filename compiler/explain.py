"""Offline field documentation from the models, in the style of `kubectl explain`."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel

from .keys import T9K_API_VERSION
from .models import MODELS
from .validate.suggest import did_you_mean


class ExplainError(ValueError):
    """The kind or field path does not exist; the message says what does."""


def _members(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(tp) if a is not type(None) for m in _members(a)]
    return [tp]


def _kube_name(tp: Any) -> str | None:
    """The Kubernetes type behind an embedded-object annotation (see models.base.kube)."""
    if typing.get_origin(tp) is typing.Annotated:
        for meta in typing.get_args(tp)[1:]:
            desc = getattr(meta, "json_schema", None) or {}
            if isinstance(desc, dict) and str(desc.get("description", "")).startswith("Kubernetes "):
                return desc["description"][len("Kubernetes ") :].rstrip(".")
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return next((n for a in typing.get_args(tp) if (n := _kube_name(a))), None)
    return None


def field_type(info: Any) -> str:
    """Type name of a model field; pydantic moves Annotated metadata onto the FieldInfo."""
    for meta in info.metadata:
        desc = getattr(meta, "json_schema", None)
        if isinstance(desc, dict) and str(desc.get("description", "")).startswith("Kubernetes "):
            return f"<{desc['description'][len('Kubernetes '):].rstrip('.')}>"
    return type_name(info.annotation)


def type_name(tp: Any) -> str:
    """A kubectl-explain-like type name: <string>, <[]ReplicaSpec>, <map[string]string>."""
    kube = _kube_name(tp)
    if kube:
        return f"<{kube}>"
    names = []
    for m in _members(tp):
        origin = typing.get_origin(m)
        if origin is list:
            names.append("[]" + type_name(typing.get_args(m)[0]).strip("<>"))
        elif origin is dict:
            k, v = typing.get_args(m)
            names.append(f"map[{type_name(k).strip('<>')}]{type_name(v).strip('<>')}")
        elif origin is typing.Literal:
            names.append("string" if all(isinstance(a, str) for a in typing.get_args(m)) else "enum")
        elif isinstance(m, type) and issubclass(m, BaseModel):
            names.append(m.__name__)
        elif m is typing.Any:
            names.append("Object")
        else:
            names.append({str: "string", int: "integer", bool: "boolean", float: "number"}.get(m, getattr(m, "__name__", str(m))))
    return "<" + " | ".join(dict.fromkeys(names)) + ">"


def _model_of(tp: Any) -> type[BaseModel] | None:
    for m in _members(tp):
        origin = typing.get_origin(m)
        if origin in (list, dict):
            inner = _model_of(typing.get_args(m)[-1])
            if inner is not None:
                return inner
        elif isinstance(m, type) and issubclass(m, BaseModel):
            return m
    return None


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    return {info.alias or name: info for name, info in model.model_fields.items() if not info.exclude}


_INDEX = re.compile(r"\[[^\]]*\]")


def explain(target: str) -> str:
    """Explain `Kind` or `Kind.field.path` (case-insensitive kind, wire field names)."""
    kind_text, _, rest = target.partition(".")
    kinds = {k.lower(): k for k in MODELS}
    kind = kinds.get(kind_text.lower())
    if kind is None:
        hint = did_you_mean(kind_text, MODELS)
        raise ExplainError(f"unknown kind {kind_text!r}; kinds: {', '.join(MODELS)}" + (f"; {hint}" if hint else ""))
    model: type[BaseModel] | None = MODELS[kind]
    info = None
    walked: list[str] = []
    # lint names fields with their list indices (spec.replicaSpecs[0].template): explain takes
    # the path as lint prints it, as kubectl explain takes none
    parts = [p for p in _INDEX.sub("", rest).split(".") if p]
    for at, part in enumerate(parts):
        if part.startswith("template") and walked and "template" in walked[-1:]:
            break
        if model is None:
            pod = ".".join(["pod", *parts[at:]]) if walked[-1:] == ["template"] else "pod.spec"
            raise ExplainError(f"{'.'.join([kind, *walked])} has no fields; it is a Kubernetes object: see `kubectl explain {pod}`")
        fields = _fields(model)
        if part not in fields:
            hint = did_you_mean(part, fields)
            raise ExplainError(f"field {part!r} does not exist in {'.'.join([kind, *walked]) or kind}" + (f"; {hint}" if hint else ""))
        info = fields[part]
        walked.append(part)
        model = _model_of(info.annotation)
    return _render(kind, walked, info, model)


def _render(kind: str, walked: list[str], info: Any, model: type[BaseModel] | None) -> str:
    lines = [f"KIND:     {kind}", f"VERSION:  {T9K_API_VERSION}", ""]
    if info is not None:
        lines += [f"FIELD:    {walked[-1]} {field_type(info)}", ""]
        desc = info.description or ""
        if not info.is_required() and info.default is not None and info.default_factory is None:
            desc += f" Default: {info.default!r}."
    else:
        desc = (MODELS[kind].__doc__ or "").strip()
    lines += ["DESCRIPTION:", f"    {desc.strip()}"]
    if (model is not None and model is not MODELS.get(kind)) or info is None:
        target = model if model is not None else MODELS[kind]
        lines += ["", "FIELDS:"]
        required = {name for name, f in _fields(target).items() if f.is_required()}
        for name, f in _fields(target).items():
            flag = " -required-" if name in required else ""
            lines.append(f"  {name}\t{field_type(f)}{flag}")
            if f.description:
                lines.append(f"    {f.description}")
    if info is not None and model is None and "template" in walked[-1].lower():
        lines += ["", "This is a Kubernetes PodTemplateSpec (v1.32): see `kubectl explain pod.spec`."]
    return "\n".join(lines) + "\n"
