"""Read the enumerations and key defaults that Kubernetes states only in description prose.

The OpenAPI v2 documents behind kubernetes-validate carry no `enum` for most string enums
(imagePullPolicy, restartPolicy, protocol, Service type, ...); their allowed values are
written in the field description instead. `trim.py` calls `enum_from_prose` for every
string field and `default_from_prose` for list-map key fields. The parser is deliberately
narrow: a phrase it does not fully understand yields None rather than a guessed enum,
because a wrong enum would reject manifests the API server accepts.
"""

from __future__ import annotations

import re

_WORD = r"[A-Za-z][A-Za-z0-9]*"
_QUOTED_CHARS = r"[A-Za-z0-9][A-Za-z0-9._/-]*"

# One enum value: "X", 'X', `X`, `"X"` or a bare identifier (group 4).
_VALUE = re.compile(
    rf'"({_QUOTED_CHARS})"|\'({_QUOTED_CHARS})\'|`"?({_QUOTED_CHARS})"?`|({_WORD})(?![A-Za-z0-9_-])'
)
# Between two values: a comma, "and"/"or", or a stray full stop when the list clearly goes on
# ("In, NotIn, Exists, DoesNotExist. Gt, and Lt.").
_SEPARATOR = re.compile(
    rf"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+|\.\s+(?={_WORD},)"
)
# What may follow the last value: the end of a sentence, a line or the text.
_LIST_END = re.compile(r"\s*(?:\.(?:\s|$)|;|\n|$)")

# Phrases that introduce an inline list, and whether bare lowercase words count as values.
_INLINE_LEAD_INS: tuple[tuple[re.Pattern[str], bool], ...] = (
    (re.compile(r"\bone of:?\s+", re.IGNORECASE), True),
    (re.compile(r"\b(?:valid|allowed|supported|possible) (?:values|options|operators|reasons)"
                r"(?: are| is)?:?\s+", re.IGNORECASE), True),
    (re.compile(r"\bvalues defined by this API group are\s+", re.IGNORECASE), True),
    (re.compile(r"\b(?:must|can) be\s+", re.IGNORECASE), False),
    (re.compile(r"\bsupports\s+", re.IGNORECASE), False),
)

# Phrases that introduce a list of "Term: explanation" / "Term - explanation" items.
_TERM_LEAD_IN = re.compile(
    r"\b(?:valid options are|options are|possible values are|allowed values are|can be one of"
    r"|may have \d+ possible values|possible enum values):",
    re.IGNORECASE,
)
_TERM = re.compile(
    rf"(?:^|(?<=\. )|(?<=: ))[ \t]*(?:-|\d+\))?[ \t]*`?\"?({_WORD})\"?`?(?:[ \t]+\(default\))?"
    r"(?::|[ \t]+-[ \t])",
    re.MULTILINE,
)
# The OpenAPI v3 form: "Possible enum values:" then one "- `\"X\"` means ..." line per value.
_BULLET = re.compile(rf'^[ \t]*-[ \t]+`"?({_QUOTED_CHARS})"?`', re.MULTILINE)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")

# A lone allowed value: 'the only allowed value is "Always"', 'only one possible value: "X"'.
_SINGLE = re.compile(
    rf'\bonly (?:allowed|possible|valid|one possible) value(?: is|:)\s+"({_QUOTED_CHARS})"',
    re.IGNORECASE,
)

_DEFAULT = re.compile(rf'\bDefaults? (?:is|to) "?({_WORD})"?(?:\.|\s|$)')


def _inline_list(text: str, start: int, bare_lowercase: bool) -> tuple[str, ...] | None:
    """Parse `A, B, or C.` at `start`; None unless it is a clean list of two or more values."""
    values: list[str] = []
    pos = start
    while True:
        match = _VALUE.match(text, pos)
        if match is None:
            return None
        bare = match.group(4)
        if bare is not None and not bare_lowercase and not bare[0].isupper():
            return None
        values.append(next(g for g in match.groups() if g is not None))
        pos = match.end()
        separator = _SEPARATOR.match(text, pos)
        if separator is None or not _VALUE.match(text, separator.end()):
            break
        pos = separator.end()
    if len(values) < 2 or _LIST_END.match(text, pos) is None:
        return None
    return tuple(values)


def _term_list(text: str, start: int) -> tuple[str, ...] | None:
    """Collect `Term: ...` or `- `"Term"`` items after a colon lead-in, up to a blank line."""
    body = text[start:].lstrip()
    gap = _BLANK_LINE.search(body)
    if gap is not None:
        body = body[: gap.start()]
    for pattern in (_TERM, _BULLET):
        terms = tuple(m.group(1) for m in pattern.finditer(body))
        if len(terms) >= 2:
            return terms
    return None


def enum_from_prose(description: str) -> tuple[str, ...] | None:
    """Return the allowed values a description spells out, or None when it names none."""
    for lead in _TERM_LEAD_IN.finditer(description):
        terms = _term_list(description, lead.end())
        if terms:
            return terms
    for pattern, bare_lowercase in _INLINE_LEAD_INS:
        for lead in pattern.finditer(description):
            values = _inline_list(description, lead.end(), bare_lowercase)
            if values:
                return values
    single = _SINGLE.search(description)
    return (single.group(1),) if single else None


def default_from_prose(description: str) -> str | None:
    """Return the default a description states ('Defaults to "TCP"'), or None."""
    match = _DEFAULT.search(description)
    return match.group(1) if match else None
