"""Which jobs a patch applies to: kustomize's target selector over T9k jobs.

Fields: group, version, kind, name, namespace (regular expressions matched whole, as in
kustomize), labelSelector and annotationSelector (Kubernetes selector syntax:
`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`, comma-separated).

kustomize matches with Go's RE2, which takes linear time; Python's `re` backtracks, and
`(a|aa)*b` against a 63-letter job name would run for centuries (the Argo CD plugin serves
every Application).  So a target's expression may repeat only what cannot overlap itself:
no repetition of a group that holds a repetition or an alternative, no back-references or
look-arounds, at most MAX_REPEATS repetitions in all, and it is matched only against values
of at most MAX_SUBJECT characters (longer ones are no valid group, version, kind, namespace
or job name, and match nothing).  Selectors are parsed once, with terms of bounded length.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

try:  # the parser of `re`, to check an expression's shape (sre_parse before Python 3.11)
    from re import _parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _parser  # type: ignore[no-redef]

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


MAX_TERM = 1024  # characters in one selector term (a key is at most 317, a value 63)
MAX_REPEATS = 3  # repetitions in one target expression
MAX_SUBJECT = 63  # characters of a value a target expression is matched against


def _requirement(term: str) -> Requirement:
    if len(term) > MAX_TERM:
        raise ValueError(f"selector term of {len(term):,} characters; at most {MAX_TERM} are read")
    m = _TERM.match(term.strip())
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


Check = Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class Target:
    """A compiled target selector: the fields as written, and one check per field."""

    fields: tuple[tuple[str, str], ...] = ()
    checks: tuple[Check, ...] = ()

    def matches(self, job: Mapping[str, Any]) -> bool:
        """Whether a job document (plain data) is selected."""
        return all(check(job) for check in self.checks)


def _meta(job: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = job.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _api(job: Mapping[str, Any]) -> tuple[str, str]:
    api = job.get("apiVersion")
    group, _, version = api.rpartition("/") if isinstance(api, str) else ("", "", "")
    return group, version


# What each field matches against, from a job's plain data.
_SUBJECTS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "group": lambda job: _api(job)[0],
    "version": lambda job: _api(job)[1],
    "kind": lambda job: job.get("kind"),
    "name": lambda job: _meta(job).get("name"),
    "namespace": lambda job: _meta(job).get("namespace") or "",
}
_MAPS = {"labelSelector": "labels", "annotationSelector": "annotations"}


def _whole(expression: re.Pattern[str]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and len(value) <= MAX_SUBJECT and expression.fullmatch(value) is not None


_LITERAL = re.compile(r"[A-Za-z0-9_-]*")  # no character of these is special to `re` outside a [...]


def _equal(text: str) -> Callable[[Any], bool]:
    """What _whole(re.compile(text)) does for a text without special characters, with no parse."""
    return lambda value: isinstance(value, str) and len(value) <= MAX_SUBJECT and value == text


def _check(name: str, value: str) -> Check:
    """The check of one field; ValueError (naming the field) when it is malformed or unsafe."""
    if name in _MAPS:
        try:
            wanted = selector(value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        field = _MAPS[name]
        return lambda job: wanted(_strings(_meta(job).get(field)))
    subject = _SUBJECTS[name]
    if _LITERAL.fullmatch(value):  # most targets name a kind or a job: compare, as the expression would
        equal = _equal(value)
        return lambda job: equal(subject(job))
    try:
        expression = re.compile(value)
    except (re.error, OverflowError, RecursionError) as exc:  # a{4294967296}: OverflowError; 1 500 nested groups: RecursionError
        raise ValueError(f"{name}: {value[:80]!r} is not a regular expression Python compiles ({type(exc).__name__}: {str(exc)[:80]})") from None
    why = _unsafe(value)
    if why:
        raise ValueError(f"{name}: {value!r} {why}")
    matches = _whole(expression)
    return lambda job: matches(subject(job))


def _strings(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


_REPEATS = {_parser.MAX_REPEAT, _parser.MIN_REPEAT, getattr(_parser, "POSSESSIVE_REPEAT", _parser.MAX_REPEAT)}
_ATOMIC = getattr(_parser, "ATOMIC_GROUP", None)  # (?>...), Python 3.11+
_FORBIDDEN = {_parser.GROUPREF: "refers back to a group", _parser.GROUPREF_EXISTS: "refers back to a group", _parser.ASSERT: "looks around", _parser.ASSERT_NOT: "looks around"}


def _unsafe(pattern: str) -> str | None:
    """Why an expression could backtrack for an unbounded time, or None (module docstring)."""
    repeats = 0
    stack: list[tuple[Any, bool]] = [(_parser.parse(pattern), False)]
    while stack:
        items, repeated = stack.pop()
        for op, arg in items:
            if op in _FORBIDDEN:
                return f"{_FORBIDDEN[op]}, which kustomize's expressions cannot do"
            if op in _REPEATS:
                repeats += 1
                if repeated:
                    return "repeats a repetition (like (a+)+), which can take exponential time to match"
                stack.append((arg[2], True))
            elif op is _parser.BRANCH:
                if repeated:
                    return "repeats an alternative (like (a|aa)*), which can take exponential time to match"
                stack.extend((branch, False) for branch in arg[1])
            elif op is _parser.SUBPATTERN:
                stack.append((arg[-1], repeated))
            elif op is _ATOMIC:
                stack.append((arg, repeated))
    if repeats > MAX_REPEATS:
        return f"has {repeats} repetitions; at most {MAX_REPEATS} are allowed (matching time grows with the power of their number)"
    return None


def compile_target(fields: Mapping[str, str]) -> Target:
    """A Target from a selector mapping; ValueError names the field that is malformed."""
    ordered = tuple(sorted(fields.items()))
    return Target(ordered, tuple(_check(name, value) for name, value in ordered))
