"""Which jobs a patch applies to: kustomize's target selector over T9k jobs.

Fields: group, version, kind, name, namespace (regular expressions matched whole, as in
kustomize), labelSelector and annotationSelector (Kubernetes selector syntax:
`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`, comma-separated).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

FIELDS = ("group", "version", "kind", "name", "namespace", "labelSelector", "annotationSelector")

_TERM = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<absent>[\w./-]+)"
    r"|(?P<key>[\w./-]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[\w.-]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?)\s*$"
)

Requirement = Callable[[Mapping[str, str]], bool]


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    return [p for p in parts if p.strip()]


_SET_OPS: dict[str, Callable[[str | None, set[str]], bool]] = {
    "in": lambda got, values: got in values,
    "notin": lambda got, values: got not in values,
}
_EQ_OPS: dict[str, Callable[[str | None, str], bool]] = {
    "=": lambda got, want: got == want,
    "==": lambda got, want: got == want,
    "!=": lambda got, want: got != want,
}


def _requirement(term: str) -> Requirement:
    m = _TERM.match(term)
    if not m:
        raise ValueError(f"cannot read selector term {term.strip()!r}")
    if m["absent"]:
        return lambda labels, k=m["absent"]: k not in labels
    key = m["key"]
    if m["op"]:
        return lambda labels, f=_EQ_OPS[m["op"]], v=m["value"]: f(labels.get(key), v)
    if m["setop"]:
        values = {v.strip() for v in m["values"].split(",") if v.strip()}
        return lambda labels, f=_SET_OPS[m["setop"]]: f(labels.get(key), values)
    return lambda labels: key in labels


def selector(text: str) -> Requirement:
    """A function telling whether a label map satisfies a selector; ValueError when malformed."""
    requirements = [_requirement(t) for t in _split(text)]
    return lambda labels: all(r(labels) for r in requirements)


@dataclass(frozen=True)
class Target:
    """A compiled target selector."""

    fields: tuple[tuple[str, str], ...] = ()

    def matches(self, job: Mapping[str, Any]) -> bool:
        """Whether a job document (plain data) is selected."""
        return all(_CHECKS[name](job, value) for name, value in self.fields)


def _meta(job: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = job.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _whole(pattern: str, value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(pattern, value) is not None


def _api(job: Mapping[str, Any]) -> tuple[str, str]:
    api = job.get("apiVersion")
    group, _, version = api.rpartition("/") if isinstance(api, str) else ("", "", "")
    return group, version


_CHECKS: dict[str, Callable[[Mapping[str, Any], str], bool]] = {
    "group": lambda job, p: _whole(p, _api(job)[0]),
    "version": lambda job, p: _whole(p, _api(job)[1]),
    "kind": lambda job, p: _whole(p, job.get("kind")),
    "name": lambda job, p: _whole(p, _meta(job).get("name")),
    "namespace": lambda job, p: _whole(p, _meta(job).get("namespace") or ""),
    "labelSelector": lambda job, s: selector(s)(_meta(job).get("labels") or {}),
    "annotationSelector": lambda job, s: selector(s)(_meta(job).get("annotations") or {}),
}


def compile_target(fields: Mapping[str, str]) -> Target:
    """A Target from a selector mapping; ValueError names the field that is malformed."""
    for name, value in fields.items():
        if name in ("labelSelector", "annotationSelector"):
            try:
                selector(value)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        else:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"{name}: {value!r} is not a regular expression ({exc})") from None
    return Target(tuple(sorted(fields.items())))
