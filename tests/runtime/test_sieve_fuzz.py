"""runtime.sieve against json.loads: differential properties over JSON as an API server (Go's
encoding/json) or a proxy could send it.

sieve cuts JSON text by hand (a regex scan and a grammar check in C, runtime/sieve.py); these
properties pin that what it gives, lifted values parsed back, is what json.loads gives, and that
through the trim (trim.record, trim.status_read, trim.spec_of) the cache holds the same. Texts
are drawn with every escape form a writer may use (Go's \\u003c for <, \\u2028, \\u escapes with
surrogate pairs, raw UTF-8, every character escaped, keys included), numbers with exponents and
negative zero, empty and duplicate-keyed objects, keys the sieve looks for inside strings and at
other depths, whitespace between any two tokens, nesting past nesting.CUT_DEPTH and
nesting.DUMP_DEPTH; then cut short or broken (a dropped connection, a corrupt proxy).

Decided and pinned here: a duplicate key keeps its last value (Go's decoder and json.loads
both), whether or not its values are lifted. Where json.loads is laxer than RFC 8259 (NaN,
Infinity, UTF-8 encoded surrogates, none of which Go writes), a lifted value is refused
(ValueError), as orjson refuses it when the status is read.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from propertykit import examples

from flatjob.runtime import nesting, sieve, trim


class Obj(list):  # type: ignore[type-arg]
    """An object as (key, value) pairs, so a key may come twice."""


class Num(str):
    """A number written as this text."""


WATCHED = ["spec", "status", "runtime", "object", "items", "metadata", "template", "env", "resources", "ports", "attempt", "released"]
TRICKY = ['"spec":{', '{"status":[', "\\", '"', "}]", "<&>", "\u2028\u2029", "\U0001f600", "é", "\x00\x1f", "\\u0000", sieve.LIFTED + "0"]
NUMBERS = ["-0", "-0.0", "0e0", "1e+21", "1E-7", "-1.5e-07", "5e-324", "1.7976931348623157e308", "123456789012345678"]

keys = st.sampled_from(WATCHED) | st.text(max_size=8) | st.sampled_from(TRICKY)
scalars = (st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
           | st.sampled_from(NUMBERS).map(Num) | st.text(max_size=10) | st.sampled_from(TRICKY))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.lists(st.tuples(keys, inner), max_size=4).map(Obj), max_leaves=24)


def _deep(value: Any, levels: int, obj: bool) -> Any:
    for i in range(levels):
        value = Obj([("spec" if i % 3 else "a", value)]) if obj else [value]
    return value


deep = st.builds(_deep, values, st.sampled_from([nesting.CUT_DEPTH, nesting.CUT_DEPTH + 1, nesting.DUMP_DEPTH - 1, nesting.DUMP_DEPTH, nesting.DUMP_DEPTH + 1, 300]), st.booleans())
MODES = ("go", "raw", "ascii", "all")


def _string(s: str, mode: str) -> str:
    if mode == "raw":
        return json.dumps(s, ensure_ascii=False)
    if mode == "ascii":
        return json.dumps(s)  # \u escapes, surrogate pairs past the BMP
    if mode == "all":
        units = s.encode("utf-16-be")
        return '"' + "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2)) + '"'
    out = json.dumps(s, ensure_ascii=False)  # Go: raw UTF-8, <>& and U+2028/9 escaped
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        out = out.replace(c, esc)
    return out


def encode(value: Any, rnd: random.Random, spaced: bool) -> bytes:
    """`value` as JSON text, each string in an escape form of its own, whitespace at random
    between tokens when `spaced`."""

    def ws() -> str:
        return rnd.choice(["", "", " ", "\n", "\t", "\r\n  "]) if spaced else ""

    def enc(v: Any) -> str:
        if v is None or isinstance(v, bool):
            return json.dumps(v)
        if isinstance(v, Num):
            return str(v)
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return rnd.choice([repr(v), f"{v:e}", f"{v:E}", json.dumps(v)])
        if isinstance(v, str):
            return _string(v, rnd.choice(MODES))
        if isinstance(v, Obj):
            return "{" + ws() + ("," + ws()).join(enc(k) + ws() + ":" + ws() + enc(x) + ws() for k, x in v) + "}"
        return "[" + ws() + ("," + ws()).join(enc(x) + ws() for x in v) + "]"

    return (ws() + enc(value) + ws()).encode("utf-8", "surrogatepass")


def expected(value: Any, select: Any, depth: int = 1) -> Any:
    """json.loads's value with each member `select` picks that is an object or array marked
    lifted, as sieve.lift gives it back (cut past nesting.DUMP_DEPTH, as nesting.dumps cuts)."""
    if isinstance(value, list):
        return [expected(v, select, depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        key = json.dumps(k, ensure_ascii=False).encode("utf-8", "surrogatepass")
        if isinstance(v, (dict, list)) and select(depth, key):
            out[k] = ("lifted", nesting.cut_value(v) if _depth(v) > nesting.DUMP_DEPTH else v)
        else:
            out[k] = expected(v, select, depth + 1)
    return out


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def parsed_back(value: Any) -> Any:
    if isinstance(value, bytes):
        return ("lifted", json.loads(value))
    if isinstance(value, list):
        return [parsed_back(v) for v in value]
    if isinstance(value, dict):
        return {k: parsed_back(v) for k, v in value.items()}
    return value


SELECTS = {
    "record-event": sieve.members((2,), trim.RECORD_LIFT),
    "record-page": sieve.members((3,), trim.RECORD_LIFT),
    "status-page": trim.STATUS_LIFT,
    "spec-unread": sieve.members((2, 3), trim.UNREAD),
    "every-member": sieve.members((1,), None),
}


def _sieved(raw: bytes, select: Any) -> Any:
    text, lifted = sieve.lift(raw, select)
    return sieve.restore(json.loads(text), lifted)


def _event(body: Any) -> Obj:
    return Obj([("type", "MODIFIED"), ("object", body)])


def _page(body: Any) -> Obj:
    return Obj([("kind", "List"), ("metadata", Obj()), ("items", [body])])


documents = st.one_of(values, deep, values.map(_event), values.map(_page), deep.map(_event), deep.map(_page))


@settings(max_examples=examples(400))
@given(documents, st.sampled_from(sorted(SELECTS)), st.randoms(use_true_random=False), st.booleans())
def test_sieve_gives_what_json_loads_gives(doc: Any, which: str, rnd: random.Random, spaced: bool) -> None:
    raw = encode(doc, rnd, spaced)
    select = SELECTS[which]
    assert parsed_back(_sieved(raw, select)) == expected(json.loads(raw), select)


def test_a_duplicate_key_keeps_its_last_value_lifted_or_not() -> None:
    select = SELECTS["record-event"]
    for raw in (b'{"object":{"spec":{"a":1},"spec":{"b":2}}}', b'{"object":{"spec":{"a":1},"spec":3}}', b'{"object":{"spec":3,"spec":[4]}}',
                b'{"object":{"spec":{"a":1}},"object":{"spec":{"b":2}}}', b'{"object":{"sp\\u0065c":{"a":1},"spec":{"b":2}}}'):
        assert parsed_back(_sieved(raw, select)) == expected(json.loads(raw), select), raw
    assert json.loads(_sieved(b'{"object":{"spec":{"a":1},"spec":{"b":2}}}', select)["object"]["spec"]) == {"b": 2}


def _mutated(raw: bytes, how: str, at: int, byte: int) -> bytes:
    at %= len(raw) + 1
    if how == "cut":
        return raw[:at]
    if how == "drop":
        return raw[:at] + raw[at + 1 :]
    if how == "insert":
        return raw[:at] + bytes([byte]) + raw[at:]
    return raw[:at] + bytes([byte]) + raw[at + 1 :]


def _strict(raw: bytes) -> bool:
    """Whether the text is JSON by RFC 8259 in UTF-8 (json.loads also takes NaN, Infinity and
    UTF-8 encoded surrogates)."""

    def refuse(name: str) -> None:
        raise ValueError(name)

    try:
        raw.decode("utf-8")
        json.loads(raw, parse_constant=refuse)
    except ValueError:
        return False
    return True


@settings(max_examples=examples(400))
@given(documents, st.sampled_from(sorted(SELECTS)), st.randoms(use_true_random=False), st.booleans(),
       st.sampled_from(["cut", "drop", "insert", "replace"]), st.integers(0, 10**6), st.sampled_from(b'{}[]",:\\ 0-e.nN\x00\xc3\xed\xff'))
def test_broken_text_is_refused_as_json_loads_refuses_it(doc: Any, which: str, rnd: random.Random, spaced: bool, how: str, at: int, byte: int) -> None:
    """A text cut short or broken: a ValueError (what kube.Transport and HttpWatch catch) where
    json.loads refuses it, the same value where it takes it; never another exception."""
    raw = _mutated(encode(doc, rnd, spaced), how, at, byte)
    select = SELECTS[which]
    try:
        reference = expected(json.loads(raw), select)
    except ValueError:
        reference = ValueError
    try:
        got = parsed_back(_sieved(raw, select))
    except ValueError:
        assert reference is ValueError or not _strict(raw)
        return
    assert got == reference


HOSTILE = {  # texts cut short whose scan was quadratic or ran on the re module's stack
    "escaped quotes cut": b'{"object":{"spec":{"m":"' + b'\\"' * 100_000,
    "escaped quotes and a backslash cut": b'{"object":{"spec":{"m":"' + b'\\"' * 100_000 + b"\\",
    "a string cut outside": b'{"object":{"a":"' + b'\\"' * 100_000,
    "brackets cut": b'{"object":{"spec":' + b"[" * 100_000,
    "members cut": b'{"object":{"spec":{' + b'"a":1,' * 50_000,
    "a flat array wrongly closed": b'{"object":{"spec":[' + b"1," * 100_000 + b"1}}",
}


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_text_cut_short_is_refused_in_one_pass(raw: bytes) -> None:
    with pytest.raises(ValueError):
        _sieved(raw, SELECTS["record-event"])
    nesting.cut(raw)  # (the base's scan took 106 s over 160 KB of the first)


# Through the trim: what the cache keeps of a record is the same, sieved or parsed whole.
records = st.builds(
    lambda extra, template, status, runtime, dup: Obj([
        ("apiVersion", "flatjob.dev/v1beta1"), ("kind", "GenericJob"),
        ("metadata", Obj([("name", "j"), ("annotations", Obj([("spec", '"status":{'), ("x", sieve.LIFTED + "0")]))])),
        ("spec", Obj([("replicaSpecs", [Obj([("type", "worker"), ("replicas", 2), ("template", template)])]), *extra])),
        ("status", Obj([("phase", "Running"), ("runtime", Obj([("attempt", 2), *runtime])), *status])),
        *([("status", Obj([("phase", "Failed")]))] if dup else []),
    ]),
    st.lists(st.tuples(keys, values), max_size=3), values | deep, st.lists(st.tuples(keys, values), max_size=3),
    st.lists(st.tuples(st.sampled_from(["released", "x", "restarts"]), values), max_size=2), st.booleans(),
)


def _kept(rec: dict[str, Any]) -> Any:
    return {**rec, "spec": trim.spec_of(rec), "status": trim.status_of(rec)}


@settings(max_examples=examples(200))
@given(records, st.randoms(use_true_random=False), st.booleans())
def test_the_cache_keeps_the_same_record_sieved_or_parsed(rec: Obj, rnd: random.Random, spaced: bool) -> None:
    raw = encode(_event(rec), rnd, spaced)
    whole = trim.record(json.loads(raw)["object"])
    sieved = trim.record(_sieved(raw, SELECTS["record-event"])["object"])
    assert _kept(sieved) == _kept(whole)


@settings(max_examples=examples(200))
@given(records, st.randoms(use_true_random=False), st.booleans())
def test_a_status_read_keeps_the_same_sieved_or_parsed(rec: Obj, rnd: random.Random, spaced: bool) -> None:
    raw = encode(_page(rec), rnd, spaced)
    limit = trim.STATUS_BASE  # every member fits: a member's size near the limit is pinned below

    def read(item: dict[str, Any]) -> Any:
        try:
            return json.loads(nesting.dumps(trim.status_read(item["status"], limit)))  # as the cycle writes it
        except ValueError:
            return ValueError

    assert read(_sieved(raw, trim.STATUS_LIFT)["items"][0]) == read(json.loads(raw)["items"][0])


def test_a_lifted_member_is_measured_as_written() -> None:
    """Known and kept: a lifted member is measured by the text the API server wrote, which is
    never shorter than its compact form (Go escapes <, > and &); one whose text is over the
    limit and whose compact form is not is dropped (status_read) or its size cached (record),
    where parsed it is kept. Go writes no whitespace, so only those escapes can tip it."""
    member = {"note": "<" * 100}
    raw = json.dumps({"items": [{"spec": {}, "status": {"x": member}}]}).replace("<", "\\u003c").encode()
    limit = len(json.dumps(member, separators=(",", ":"))) + 10
    assert trim.status_read(json.loads(raw)["items"][0]["status"], limit) == {"x": member}
    assert trim.status_read(_sieved(raw, trim.STATUS_LIFT)["items"][0]["status"], limit) == {}


def test_a_long_string_costs_its_size_to_scan() -> None:
    """The scan's strings were a repeat a character, each held on the re module's stack: 1 MB
    strings took sieve.lift and nesting.cut to 117-119 MiB (the runtime's limit is 128)."""
    raw = b'{"object":{"spec":{"m":"' + b"x" * 1_000_000 + '\\"é"},"metadata":{"a":"'.encode() + b"y" * 1_000_000 + b'"}}}'
    for scan in (lambda: sieve.lift(raw, (2,), ("spec",)), lambda: nesting.cut(raw)):
        tracemalloc.start()
        scan()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 2 * len(raw)
