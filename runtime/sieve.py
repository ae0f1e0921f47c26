"""Members of JSON objects taken out of the text unparsed: what the runtime keeps as bytes, or
does not read, never becomes Python objects.

A record's spec and status are anyone's who may update the record (its status subresource):
the CRD keeps unknown fields under a pod template and in status.runtime, and 1.3 MB of
`{"a":0}` there is ~31 MiB of Python objects parsed. Parsed and dropped at once, such text
still costs its parse at every watch event, list page and write answer of the record, and
each parse leaves the allocator's memory scattered: ten records so filled took the runtime to
193-225 MiB of its 128 (issue 21 round 2), though never two were parsed at once. So a dense
record's text (nesting.DENSE_VALUES) has its spec and status lifted out before it is parsed
(`lift`): the cache keeps them as the bytes they are (trim.record), and what the runtime reads
of them is parsed from those bytes alone, itself sieved (trim.spec_of drops the record's pod
templates, which the runtime never reads: its pods come from the PodTemplates; a status read
whole keeps only the ledger's members and what fits the job's status, worker._read_status).

The scan is the tokenizer of runtime.nesting (strings skipped whole, brackets counted) in a
Python loop: ~0.1 s a dense MB, allocating nothing that lives, and only for dense text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Any

from . import nesting

LIFTED = "\x00flatjob:lifted:"  # a lifted value's stand-in: a string no object the API server stores has there (spec and status are objects)
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_OPEN, _CLOSE = (ord("["), ord("{")), (ord("]"), ord("}"))
_SPACE = b" \t\r\n"
_BRACE, _COLON = ord("{"), ord(":")
_BRACKETS = re.compile(rb'(?:[^"\[\]{}]+|"(?:[^"\\]|\\.)*")*(?:([\[{])|[\]}])', re.DOTALL)  # what lies before a bracket, and the bracket (group 1: an opening one)


def members(depths: Collection[int], keys: Collection[str] | None) -> Callable[[int, bytes], bool]:
    """Which members `lift` takes out: those named in `keys` (None: every one) of each object
    opened at one of `depths` (1: the text's own object)."""
    wanted = None if keys is None else {b'"' + k.encode() + b'"' for k in keys}
    return lambda depth, key: depth in depths and (wanted is None or key in wanted)


def lift(raw: bytes, depths: Collection[int] | Callable[[int, bytes], bool], keys: Collection[str] | None = None) -> tuple[bytes, list[bytes]]:
    """`raw` with the value of each member `depths` selects (`members(depths, keys)`, or a
    function of an object's depth and a member's key as its JSON text) replaced by a stand-in
    string naming its index in the list returned beside: the values' own text, unparsed, cut
    past nesting.CUT_DEPTH. Only objects and arrays are lifted (a scalar costs its size); what
    a lifted value holds is never looked at. Text that is not JSON comes out as some text that
    is not JSON either (the decoder says why)."""
    select = depths if callable(depths) else members(depths, keys)
    parts: list[bytes] = []
    values: list[bytes] = []
    stack: list[bool] = []  # per open container: whether it is an object
    copied = 0  # raw is copied to the output up to here
    tokens = _TOKENS.finditer(raw)
    while True:
        for m in tokens:
            c = raw[m.start()]
            if c in _OPEN:
                stack.append(c == _BRACE)
                continue
            if c in _CLOSE:
                if stack:
                    stack.pop()
                continue
            if not stack or not stack[-1] or not select(len(stack), m.group()):
                continue
            at = _skip(raw, m.end())
            if at >= len(raw) or raw[at] != _COLON:
                continue  # a string value, not a key
            at = _skip(raw, at + 1)
            if at < len(raw) and raw[at] in _OPEN:
                break
        else:
            break
        end, deepest = _end(raw, at)
        value = raw[at:end]
        parts += [raw[copied:at], f'"{_marker(len(values))}"'.encode()]
        values.append(nesting.cut(value) if deepest > nesting.CUT_DEPTH else value)
        copied = end
        tokens = _TOKENS.finditer(raw, end)
    parts.append(raw[copied:])
    return b"".join(parts), values


def _end(raw: bytes, at: int) -> tuple[int, int]:
    """Where the object or array opened at `at` ends, and how deep it nests (each step of the
    loop takes what lies before a bracket, strings included, in C)."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(raw, at):
        if m.lastindex:
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
            if depth == 0:
                return m.end(), deepest
    return len(raw), deepest  # not JSON: the rest (the decoder then says why)


def _skip(raw: bytes, at: int) -> int:
    while at < len(raw) and raw[at] in _SPACE:
        at += 1
    return at


def _marker(index: int) -> str:
    return f"\\u0000{LIFTED[1:]}{index}"


def restore(value: Any, values: list[Any]) -> Any:
    """Put each lifted value back (its bytes, or what `values` holds instead) where its stand-in
    is in the parsed text; a stand-in that names no value goes (someone wrote one: it is no
    lifted value). Walks what was parsed: what was lifted is not there."""
    if isinstance(value, dict):
        for key, v in list(value.items()):
            if isinstance(v, str) and v.startswith(LIFTED):
                index = v[len(LIFTED) :]
                if index.isdigit() and int(index) < len(values):
                    value[key] = values[int(index)]
                else:
                    del value[key]
            elif isinstance(v, (dict, list)):
                restore(v, values)
    elif isinstance(value, list):
        for v in value:
            restore(v, values)
    return value


def loads(raw: bytes, select: Callable[[int, bytes], bool]) -> Any:
    """The JSON text parsed with the members `select` picks lifted out (as bytes) when it is
    dense, and parsed whole otherwise (nesting.loads either way)."""
    if nesting.json_values(raw) <= nesting.DENSE_VALUES:
        return nesting.loads(raw)
    text, values = lift(raw, select)
    return restore(nesting.loads(text), values)
