"""GenericJob's $(...) variables, resolved at compile time instead of in a controller.

Forms (T9k user manual, GenericJob): $(type), $(rank), $(replicas[<type>]),
$(service.<type>[<rank>].host), $(service.port[<name>]).  Anything else in $(...) is left
for Kubernetes, which expands $(ENV_VAR) from the container's env; `$$(` is Kubernetes'
escape and is kept as written (Kubernetes turns it into a literal `$(`).  A reference that
looks like one of ours but cannot be resolved is an error, not silent text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

_REF = re.compile(r"\$(\$?)\(([^()]*)\)")
_REPLICAS = re.compile(r"replicas\[([^\[\]]*)\]")
_HOST = re.compile(r"service\.([^.\[\]]+)\[([^\[\]]*)\]\.host")
_PORT = re.compile(r"service\.port\[([^\[\]]*)\]")
OURS = ("type", "rank")


@dataclass(frozen=True)
class Ref:
    """One $(...) occurrence: its inner text and its span in the string."""

    text: str  # the inner text, e.g. "service.worker[0].host"
    start: int  # offset of "$(" in the string
    end: int  # offset just past ")"

    @property
    def raw(self) -> str:
        return f"$({self.text})"


@dataclass(frozen=True)
class Context:
    """What a reference can resolve against: the job's replica layout and service ports."""

    job: str  # job name
    replicas: Mapping[str, int]  # type -> replica count
    ports: Mapping[str, int] | None  # port name -> port, or None when spec.service is unset
    address: Callable[[str, int], str]  # (type, rank) -> resolvable host name


class RefError(ValueError):
    """A $(...) reference that cannot be resolved; carries a fix hint when one is known."""

    def __init__(self, code: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.code = code
        self.hint = hint


def find_refs(value: str) -> list[Ref]:
    """Return the $(...) references in a string, skipping Kubernetes' $$( escapes."""
    return list(iter_refs(value))


def iter_refs(value: str) -> Iterator[Ref]:
    """find_refs, one at a time."""
    return (Ref(m.group(2), m.start(), m.end()) for m in _REF.finditer(value) if not m.group(1))


def distinct_refs(value: str) -> list[str]:
    """The texts of the $(...) references in a string, each once, in order of first use
    (escapes skipped): found in C, where iter_refs builds a Ref per occurrence."""
    return list(dict.fromkeys(text for escape, text in _REF.findall(value) if not escape))


def is_ours(text: str) -> bool:
    """Whether $(text) is a GenericJob variable (else it is left for Kubernetes)."""
    return text in OURS or text.startswith(("replicas[", "service.", "service["))


def _rank(raw: str) -> int:
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:  # int() takes "²"; int64 bound
        raise RefError("FJ500", f"rank {raw!r} is not a non-negative integer")
    return int(raw)


def _known_type(ctx: Context, name: str) -> int:
    if name not in ctx.replicas:
        from .validate.suggest import did_you_mean

        raise RefError("FJ500", f"no replica type {name!r} in this job", did_you_mean(name, ctx.replicas))
    return ctx.replicas[name]


def resolve(text: str, ctx: Context, rtype: str, rank: int) -> str:
    """Resolve one of our variables for the pod (rtype, rank); raise RefError if it cannot be."""
    if text == "type":
        return rtype
    if text == "rank":
        return str(rank)
    m = _REPLICAS.fullmatch(text)
    if m:
        return str(_known_type(ctx, m.group(1)))
    if text.startswith("service"):
        if ctx.ports is None:
            raise RefError("FJ501", "spec.service is not set, so there is no service to refer to", "add spec.service.ports (T9k only creates the service when it is set)")
        m = _PORT.fullmatch(text)
        if m:
            name = m.group(1)
            if name not in ctx.ports:
                from .validate.suggest import did_you_mean

                known = ", ".join(sorted(ctx.ports)) or "none"
                raise RefError("FJ502", f"spec.service.ports has no port named {name!r} (ports: {known})", did_you_mean(name, ctx.ports))
            return str(ctx.ports[name])
        m = _HOST.fullmatch(text)
        if m:
            count = _known_type(ctx, m.group(1))
            r = _rank(m.group(2))
            if r >= count:
                raise RefError("FJ500", f"rank {r} is out of range: type {m.group(1)!r} has {count} replica(s)")
            return ctx.address(m.group(1), r)
    forms = "$(type), $(rank), $(replicas[<type>]), $(service.<type>[<rank>].host), $(service.port[<name>])"
    raise RefError("FJ500", "not a GenericJob variable", f"the forms are {forms}")


def substitute(value: str, ctx: Context, rtype: str, rank: int) -> str:
    """Replace every one of our variables in `value`; others are kept for Kubernetes.

    Each distinct reference is resolved once per call (a value may repeat one 100 000 times).
    Without a `$$(` escape every `$(name)` in the text is a reference (a reference holds no
    parenthesis, so none overlaps another), so each distinct one is replaced in one pass of
    str.replace, not a Python call per occurrence.
    """
    if "$(" not in value:
        return value
    if "$$(" not in value:  # distinct references in order of first use: the same RefError first
        table = {text: resolve(text, ctx, rtype, rank) for text in distinct_refs(value) if is_ours(text)}
        if not any("$" in v for v in table.values()):  # else a replacement could make, with what follows it, another's text
            for text, resolved_text in table.items():
                value = value.replace(f"$({text})", resolved_text)
            return value
    resolved: dict[str, str] = {}

    def replacement(m: re.Match[str]) -> str:
        text = m.group(2)
        if m.group(1) or not is_ours(text):
            return m.group(0)
        found = resolved.get(text)
        if found is None:
            found = resolved[text] = resolve(text, ctx, rtype, rank)
        return found

    return _REF.sub(replacement, value)
