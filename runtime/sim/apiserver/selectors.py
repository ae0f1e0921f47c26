"""Label and field selectors in kube-apiserver's syntax.

Labels (k8s.io/apimachinery/pkg/labels/selector.go): `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
`k notin (a,b)`, `k`, `!k`, `k>1`, `k<1`, comma-separated; `!=` and `notin` also match objects
without the label.  Fields (k8s.io/apimachinery/pkg/fields/selector.go): `f=v`, `f==v`, `f!=v`;
each resource supports only its own field labels (pods: pkg/registry/core/pod/strategy.go
ToSelectableFields), others are 400 BadRequest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .status import bad_request

Predicate = Callable[[Mapping[str, str]], bool]
_TERM = re.compile(r"\s*(!?)\s*([A-Za-z0-9][-A-Za-z0-9_./]*)\s*(?:(==|=|!=|>|<)\s*([^,\s]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*")


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _requirement(term: str) -> Predicate:
    m = _TERM.fullmatch(term)
    if m is None:
        raise bad_request(f"unable to parse requirement: found '{term.strip()}', expected: identifier")
    bang, key, op, value, setop, values = m.groups()
    if bang:
        if op or setop:
            raise bad_request(f"unable to parse requirement: found '{term.strip()}', expected: identifier")
        return lambda labels: key not in labels
    if setop:
        wanted = {v.strip() for v in values.split(",")}
        if setop == "in":
            return lambda labels: key in labels and labels[key] in wanted
        return lambda labels: key not in labels or labels[key] not in wanted
    if op is None:
        return lambda labels: key in labels
    if op in ("=", "=="):
        return lambda labels: labels.get(key) == value
    if op == "!=":
        return lambda labels: labels.get(key) != value
    try:
        bound = int(value)
    except ValueError:
        raise bad_request(f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: {value}") from None
    if op == ">":
        return lambda labels: _int(labels.get(key)) is not None and _int(labels.get(key)) > bound  # type: ignore[operator]
    return lambda labels: _int(labels.get(key)) is not None and _int(labels.get(key)) < bound  # type: ignore[operator]


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def label_selector(text: str | None) -> Predicate:
    """A predicate over an object's labels; empty or absent selects everything."""
    if not text or not text.strip():
        return lambda labels: True
    reqs = [_requirement(t) for t in _split(text)]
    return lambda labels: all(r(labels) for r in reqs)


def label_selector_of(match: Mapping[str, str]) -> str:
    """The selector text for equality on every label (as clients build it)."""
    return ",".join(f"{k}={v}" for k, v in sorted(match.items()))


_ESCAPED = re.compile(r"\\(.)")


def field_terms(text: str | None) -> list[tuple[str, str, str]]:
    """Parse a field selector into (field, op, value) terms; op is `=` or `!=`."""
    if not text or not text.strip():
        return []
    out = []
    for term in re.split(r"(?<!\\),", text):
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*", term)
        if m is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, value = m.groups()
        out.append((field, "!=" if op == "!=" else "=", _ESCAPED.sub(r"\1", value)))
    return out


def field_selector(text: str | None, fields_of: Callable[[Any], Mapping[str, str]], supported: frozenset[str], unsupported: Callable[[str], Exception]) -> Callable[[Any], bool]:
    """A predicate over objects; a field the resource does not support is refused."""
    terms = field_terms(text)
    for field, _, _ in terms:
        if field not in supported:
            raise unsupported(field)
    if not terms:
        return lambda obj: True

    def match(obj: Any) -> bool:
        fields = fields_of(obj)
        return all((fields.get(f, "") == v) == (op == "=") for f, op, v in terms)

    return match


def single_name(text: str | None) -> str | None:
    """The name a `metadata.name=<name>` selector pins, if it does."""
    names = [v for f, op, v in field_terms(text) if f == "metadata.name" and op == "="]
    return names[0] if len(names) == 1 else None
