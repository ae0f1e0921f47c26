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

The scan around lifted values is runtime.nesting's tokenizer (strings skipped whole, brackets
counted); a lifted value's end is found by a check of its grammar (_STEPS), a Python step per
bracket of a container holding a container: 0.04-0.27 s a dense 1.3 MB record, 1.4-2.3 times
json.loads (bench/sieve_cpu.py), linear, allocating nothing that lives, and only for dense
text. tests/runtime/test_sieve_fuzz.py holds it to json.loads.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from collections.abc import Callable, Collection
from typing import Any

from . import nesting

LIFTED = "\x00flatjob:lifted:"  # a lifted value's stand-in begins so, then this lift's own random mark: no text anyone wrote can name a lifted value
# Possessive repeats (Python 3.11; the runtime's image): no backtracking into them, and no stack
# held per repeat (a greedy group repeated over a 1 MB string held 122 MB of the re module's
# stack). Python 3.10 matches the same text, with that stack.
_P = b"+" if sys.version_info >= (3, 11) else b""
_SPACE = b" \t\r\n"
_BRACE, _BRACKET, _COLON = ord("{"), ord("["), ord(":")
_OPEN, _CLOSE = (ord("["), ord("{")), (ord("]"), ord("}"))
# A JSON string (escapes included, to the text's end if it has none) or one bracket: the scan of
# the text around what is lifted, strings skipped whole in C (runtime.nesting's own).
_TOKENS = nesting.TOKENS

# A lifted value is checked against JSON's grammar as its end is found (RFC 8259 in UTF-8: what
# Go's encoder writes and orjson reads back), so text cut short or broken inside it is refused
# (ValueError) as json.loads refuses it, never kept as a status. Each step matches, in C, what
# lies up to the next bracket that opens or closes a container holding a container; a container
# of scalars alone (`{"a":0}`, `[1,2]`) is matched whole, so the loop turns once per bracket of
# a nested container only.
_WS = rb"[ \t\n\r]*" + _P
_UTF8 = rb"[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2}"
_PLAIN = rb"[\x20\x21\x23-\x5b\x5d-\x7f]*" + _P
_STR = rb'"' + _PLAIN + rb'(?:(?:\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}|' + _UTF8 + rb")" + _PLAIN + rb")*" + _P + rb'"'
_NUM = rb"-?(?:0|[1-9][0-9]*" + _P + rb")(?:\.[0-9]+" + _P + rb")?(?:[eE][+-]?[0-9]+" + _P + rb")?"
_SCALAR = rb"(?:" + _STR + rb"|" + _NUM + rb"|true|false|null)"
_MEMBER = _STR + _WS + rb":" + _WS
_MORE = rb")*" + _P
_FLAT = (rb"(?:\{" + _WS + rb"(?:\}|" + _MEMBER + _SCALAR + _WS + rb"(?:," + _WS + _MEMBER + _SCALAR + _WS + _MORE + rb"\})"
         rb"|\[" + _WS + rb"(?:\]|" + _SCALAR + _WS + rb"(?:," + _WS + _SCALAR + _WS + _MORE + rb"\]))")
_LEAF = rb"(?:" + _SCALAR + rb"|" + _FLAT + rb")"
_MEMBERS = rb"(?:" + _MEMBER + _LEAF + _WS + rb"," + _WS + _MORE + _MEMBER + rb"(?:[\[{]|" + _LEAF + _WS + rb"\})"
_ITEMS = rb"(?:" + _LEAF + _WS + rb"," + _WS + _MORE + rb"(?:[\[{]|" + _LEAF + _WS + rb"\])"
# What may follow, up to the next bracket, by where the scan is: 0 in an array, 2 in an object;
# plus 1 once a value came before in it.
_STEPS = [re.compile(_WS + rb"(?:\]|" + _ITEMS + rb")").match, re.compile(_WS + rb"(?:\]|," + _WS + _ITEMS + rb")").match,
          re.compile(_WS + rb"(?:\}|" + _MEMBERS + rb")").match, re.compile(_WS + rb"(?:\}|," + _WS + _MEMBERS + rb")").match]
_ARRAY, _OBJECT = 0, 2


def members(depths: Collection[int], keys: Collection[str] | None) -> Callable[[int, bytes], bool]:
    """Which members `lift` takes out: those named in `keys` (None: every one) of each object
    opened at one of `depths` (1: the text's own object)."""
    wanted = None if keys is None else {b'"' + k.encode() + b'"' for k in keys}
    return lambda depth, key: depth in depths and (wanted is None or key in wanted)


class Lifted(list[bytes]):
    """The values `lift` took out, in order, and the mark its stand-ins carry."""

    def __init__(self, mark: str) -> None:
        super().__init__()
        self.mark = mark


def lift(raw: bytes, depths: Collection[int] | Callable[[int, bytes], bool], keys: Collection[str] | None = None) -> tuple[bytes, Lifted]:
    """`raw` with the value of each member `depths` selects (`members(depths, keys)`, or a
    function of an object's depth and a member's key as its JSON text, compact and unescaped)
    replaced by a stand-in string naming its index in the list returned beside: the values' own
    text, unparsed, cut where nesting.dumps would cut it parsed (past nesting.DUMP_DEPTH). Only
    objects and arrays are lifted (a scalar costs its size). A lifted value's text is checked
    against JSON's grammar, never parsed: ValueError when it is not JSON (the rest of the text
    is left to its decoder, which says why when it is not)."""
    select = depths if callable(depths) else members(depths, keys)
    parts: list[bytes] = []
    values = Lifted(secrets.token_hex(8))
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
            if not stack or not stack[-1] or not select(len(stack), _key(m.group())):
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
        parts += [raw[copied:at], b'"' + _marker(values.mark, len(values)).encode() + b'"']
        values.append(nesting.cut(value) if deepest > nesting.DUMP_DEPTH and _depth(value) > nesting.DUMP_DEPTH else value)
        copied = end
        tokens = _TOKENS.finditer(raw, end)
    parts.append(raw[copied:])
    return b"".join(parts), values


def _key(text: bytes) -> bytes:
    """A key's JSON text as `select` is asked about it: without escapes (`"sp\\u0065c"` is the
    key "spec" to any decoder; Go's encoder writes it plain)."""
    if b"\\" not in text:
        return text
    try:
        return json.dumps(json.loads(text), ensure_ascii=False).encode()
    except ValueError:  # not JSON (UnicodeEncodeError: a lone surrogate): its decoder says why
        return text


def _end(raw: bytes, at: int) -> tuple[int, int]:
    """Where the object or array opened at `at` ends, and at least how deep it nests (one more
    than it does at most: a container of scalars is matched whole); ValueError where it is not
    JSON. Each step matches, in C, what lies up to the next bracket (_STEPS)."""
    steps = _STEPS
    outer: list[int] = []  # the kinds of the containers around the innermost one
    kind = _OBJECT if raw[at] == _BRACE else _ARRAY
    state, pos, deepest = kind, at + 1, 0
    while True:
        m = steps[state](raw, pos)
        if m is None:
            raise ValueError(f"a lifted value is not JSON at byte {pos} (of {len(raw)})")
        pos = m.end()
        c = raw[pos - 1]
        if c in (_BRACE, _BRACKET):
            outer.append(kind)
            kind = state = _OBJECT if c == _BRACE else _ARRAY
            if len(outer) > deepest:
                deepest = len(outer)
        elif outer:
            kind = outer.pop()
            state = kind + 1
        else:
            return pos, deepest + 2


def _depth(value: bytes) -> int:
    """How deep a lifted value nests, exactly (`_end` may say one more)."""
    level = deepest = 0
    for m in _TOKENS.finditer(value):
        c = value[m.start()]
        if c in _OPEN:
            level += 1
            deepest = max(deepest, level)
        elif c in _CLOSE:
            level -= 1
    return deepest


def _skip(raw: bytes, at: int) -> int:
    while at < len(raw) and raw[at] in _SPACE:
        at += 1
    return at


def _marker(mark: str, index: int) -> str:
    return f"\\u0000{LIFTED[1:]}{mark}:{index}"


def restore(value: Any, values: Lifted, instead: Callable[[bytes], Any] | None = None) -> Any:
    """Put each lifted value back (its bytes, or `instead` of them) where its stand-in is in the
    parsed text. Only this lift's stand-ins are replaced: a string someone wrote like one is
    theirs, kept as json.loads keeps it. Walks what was parsed, without recursion (what was
    lifted is not there)."""
    prefix = f"{LIFTED}{values.mark}:"
    todo = [value]
    while todo:
        node = todo.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, v in items:
            if isinstance(v, str):
                if isinstance(node, dict) and v.startswith(prefix):
                    got = values[int(v[len(prefix) :])]
                    node[key] = got if instead is None else instead(got)
            elif isinstance(v, (dict, list)):
                todo.append(v)
    return value


def loads(raw: bytes, select: Callable[[int, bytes], bool]) -> Any:
    """The JSON text parsed with the members `select` picks lifted out (as bytes) when it is
    dense, and parsed whole otherwise (nesting.loads either way)."""
    if nesting.json_values(raw) <= nesting.DENSE_VALUES:
        return nesting.loads(raw)
    text, values = lift(raw, select)
    return restore(nesting.loads(text), values)
