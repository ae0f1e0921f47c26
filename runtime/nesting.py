"""JSON nested deeper than the runtime's decoders take, cut instead of failing.

Whoever may write a record may nest a value under its status, or under a pod template in its
spec (the CRD keeps unknown fields there), as deep as the API server stores: 10 000 levels
(sigs.k8s.io/json's maxDepth).  Python's json decoder stops at its recursion limit (about
1 000) and orjson's encoder at 255 levels; either error used to end the namespace runtime's
watch, relisted and failing again, so one record's edit stopped every job's service (attacker
of issue 21, round 3).  Nothing the runtime reads lies deeper than about 20 levels, so a value
deeper than CUT_DEPTH is replaced by TOO_DEEP: what the runtime reads of that record is then
refused as any malformed value is (status.runtime: the record is refused), and what it does
not read costs nothing.  Typed objects (pods, PodTemplates, Secrets, Leases) cannot nest this
deep in a real API server; they go through the same functions all the same.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

CUT_DEPTH = 100
DUMP_DEPTH = 254  # containers orjson.dumps nests (`dumps` cuts a value deeper than this at CUT_DEPTH)
TOO_DEEP = f"(flatjob: a value nested deeper than {CUT_DEPTH} levels)"
_TOO_DEEP_JSON = json.dumps(TOO_DEEP).encode()
# A JSON string (escapes included) or one bracket: strings are skipped whole, in C. A string
# without its end (text cut short) runs to the text's end, else each of its escaped quotes would
# start a scan to the end (quadratic: 160 KB of `\"` took 106 s). Unrolled (one repeat an
# escape, not a character: the re module's stack held 122 MB over a 1 MB string matched a
# character a repeat), and possessive where Python has it (3.11).
_P = "+" if sys.version_info >= (3, 11) else ""
TOKENS = re.compile(f'"[^"\\\\]*{_P}(?:\\\\.[^"\\\\]*{_P})*{_P}(?:"|\\\\?\\Z)|[\\[\\]{{}}]'.encode(), re.DOTALL)
_OPEN, _CLOSE = (ord("["), ord("{")), (ord("]"), ord("}"))


def cut(raw: bytes, depth: int = CUT_DEPTH) -> bytes:
    """The JSON text with every value opened deeper than `depth` replaced by TOO_DEEP (text
    that is not JSON stays not JSON: the decoder then says why)."""
    parts: list[bytes] = []
    level, start, skipping = 0, 0, False
    for m in TOKENS.finditer(raw):
        c = raw[m.start()]
        if c in _OPEN:
            level += 1
            if level == depth + 1 and not skipping:
                parts.append(raw[start : m.start()])
                skipping = True
        elif c in _CLOSE:
            if level == depth + 1 and skipping:
                parts.append(_TOO_DEEP_JSON)
                start, skipping = m.end(), False
            level -= 1
    parts.append(raw[start:])
    return b"".join(parts)


T = TypeVar("T")

# JSON text of more than DENSE_VALUES values (json_values) is "dense": parsed only while this
# thread holds DENSE, and held parsed only until what the runtime keeps of it is taken
# (`loads_then`). Parsed, JSON costs up to ~25 times its bytes in Python objects (1.3 MB of
# `{"a":0}` is ~31 MiB; an object at etcd's 1.5 MiB, ~38 MiB), and the runtime parses on
# several threads at once (a watch's reader each, the cycles' requests): ten records whose
# statuses someone filled so, arriving together, were parsed side by side, over the runtime's
# 128 MiB (issue 21 round 2). So at most one dense text is parsed in the process at any time,
# whatever the number of jobs, watches or threads; a text under DENSE_VALUES (a pod is ~1 000
# values) is parsed at once. Acquire it only without the controller's TurnLock (a thread
# holding it may wait for that lock).
DENSE_VALUES = 20_000
DENSE = threading.RLock()


def json_values(raw: bytes) -> int:
    """At least the number of values json.loads makes Python objects of (each object, array,
    member and item begins with or follows a `{`, `[`, `,` or `:`; those inside strings are
    counted too), counted in C without parsing."""
    return raw.count(b"{") + raw.count(b"[") + raw.count(b",") + raw.count(b":")


def loads_then(raw: bytes, keep: Callable[[Any], T], decode: Callable[[bytes], Any] | None = None) -> T:
    """`keep(decode(raw))` (decode: `loads`), a dense text under DENSE: what is parsed and not
    kept is freed before another dense text is parsed."""
    decode = decode or loads
    if json_values(raw) <= DENSE_VALUES:
        return keep(decode(raw))
    with DENSE:
        return keep(decode(raw))


def loads(raw: bytes) -> Any:
    """json.loads, except that a value nested past the decoder's limit is cut (ValueError
    still for text that is not JSON)."""
    try:
        return json.loads(raw)
    except RecursionError:
        return json.loads(cut(raw))


def cut_value(value: Any, depth: int = CUT_DEPTH) -> Any:
    """A decoded value with every list or mapping deeper than `depth` replaced by TOO_DEEP."""
    if not isinstance(value, (dict, list)):
        return value
    if depth <= 0:
        return TOO_DEEP
    if isinstance(value, dict):
        return {k: cut_value(v, depth - 1) for k, v in value.items()}
    return [cut_value(v, depth - 1) for v in value]


def dumps(value: Any, option: int = 0) -> bytes:
    """orjson.dumps, except that a value nested past its 255 levels is cut first."""
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError as exc:
        if "recursion" not in str(exc).lower():
            raise
        return orjson.dumps(cut_value(value), option=option)
