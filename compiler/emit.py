"""Deterministic YAML text for rendered manifests, near the speed of ``json.dumps``.

The compiler's last step: ``dump``/``dump_all`` turn plain trees (dict with str keys, list, str,
int, bool, None, finite float) into the files committed to git, so the same tree gives the same
bytes on any machine, Python version or hash seed, whatever order its dicts were built in.

Layout is kubectl's: block style, two-space indent, list items level with their parent key
(``containers:`` / ``- name: a``), ``{}`` and ``[]`` for empty collections.  At every level the
keys ``apiVersion kind metadata name namespace spec`` come first, in that order, then the rest in
code-point order, so reordering fields in a spec never shows up as a diff.

Quoting rule.  A string is written plain only when all three hold:

1. every character is printable ASCII or printable non-ASCII that no reader treats as a line
   break, byte-order mark or non-printable (no tab, control, DEL, C1, U+2028/2029, U+FEFF,
   U+FFFE/FFFF, and no NBSP, which would read as a stray space in review);
2. the scanner would take it whole as one plain scalar: it does not start with a space, an
   indicator (``?:,[]{}#&*!|>'"%@`` and backtick) or a dash followed by a space or nothing, nor
   with a document marker, does not end with a space or ``:``, and holds no ``": "`` or ``" #"``;
3. no schema would resolve it to something else: the null and bool words of YAML 1.1 and 1.2 in
   any letter case (``~ null y n yes no on off true false``), ``=``, ``<<``, ``.inf``/``.nan``
   forms, anything that starts like a date (``2001-12-14``), anything with a ``0x``/``0o``/``0b``
   prefix and hex digits after it, and anything made of an optional sign, then digits, ``_``,
   ``.`` and ``:``, then optionally ``e`` and more of them (``012 1_000 1:20 1e3 .5 -_1 1.13.1``).
   Hex hashes such as ``3f2a9c1be07d`` or ``996eafde4`` stay plain: no reader takes them as numbers.

Rule 3 is a superset of the implicit resolvers of YAML 1.1 (PyYAML, and go-yaml v2 as used by
kubectl) and of the YAML 1.2 core schema (ruamel.yaml, go-yaml v3), so a plain scalar reads back
as the same string under both; over-approximating only costs quotes on strings such as ``1.13.1``.
Any other string is double-quoted with JSON's escapes, which are all valid YAML escapes, plus
``\\uXXXX`` for what JSON leaves raw but YAML forbids or reads as a break; other non-ASCII text
(Chinese comments, emoji) stays as-is.  A value with a newline whose characters may all appear
raw uses a literal block (``|``, ``|-``, ``|+``; indentation indicator when it starts with
whitespace or a newline); otherwise it is double-quoted on one line.  Nothing is ever folded or
wrapped.  Keys are never block scalars, and a key whose text exceeds 1000 bytes uses the explicit
``? key`` form, since YAML 1.1 readers cap implicit keys at 1024 characters.

Subclasses of the plain types (a str- or int-valued Enum, an OrderedDict) are written as their
base type.  Other types and non-str keys raise TypeError (a programming error); NaN, infinities and
lone surrogates raise ValueError, because no Kubernetes manifest can carry them (the API takes
JSON, and a file must be valid UTF-8).  Both name the path of the offending node.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from json.encoder import encode_basestring
from typing import Any

__all__ = ["PRIORITY_KEYS", "dump", "dump_all"]

PRIORITY_KEYS = ("apiVersion", "kind", "metadata", "name", "namespace", "spec")
_PRIORITY = frozenset(PRIORITY_KEYS)

# Printable non-ASCII that no YAML reader treats as a break or a BOM (U+0085, U+00A0 excluded here).
_NON_ASCII = "\u00a1-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff"
_PLAIN_CHARS = re.compile(f"[ -~{_NON_ASCII}]+")
_BLOCK_CHARS = re.compile(f"[\t\n -~\u00a0{_NON_ASCII}]+")
_PLAIN_BREAKERS = re.compile(r"""^[ ?:,\[\]{}#&*!|>'"%@`]|^-(?: |$)|^(?:---|\.\.\.)|: |:$| #| $""")
_RESOLVABLE = re.compile(
    r"(?:~|null|y|n|yes|no|on|off|true|false|=|<<"
    r"|[-+]?\.?(?:inf|infinity|nan)"
    r"|[-+]?0[box][0-9a-f_]*|(?:[-+]?[0-9.]|[-+]_)[0-9_.:]*(?:e[-+]?[0-9_.:]*)?)\Z"
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}",
    re.IGNORECASE,
)
_SURROGATE = re.compile("[\ud800-\udfff]")
# Left raw by JSON but forbidden in YAML, or read as a line break / BOM by YAML 1.1.
_JSON_RAW_YAML_BAD = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
_LONG_KEY = 1000  # UTF-8 bytes; YAML 1.1 readers reject implicit keys over 1024 characters
_CHOMP = {0: "-", 1: ""}  # trailing newlines -> chomping indicator; two or more keep ("+")


class _Unrepresentable(Exception):
    """Raised inside the emitter; collects the path on the way out, then becomes the real error."""

    def __init__(self, kind: type[Exception], reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason, self.path = kind, reason, []


def _escape(match: re.Match[str]) -> str:
    """Write one character that must not appear raw as a YAML ``\\u`` escape."""
    return f"\\u{ord(match[0]):04x}"


def _inline(s: str) -> str:
    """Return ``s`` as a one-line scalar: plain when every loader reads it back as this string."""
    if _PLAIN_CHARS.fullmatch(s) and not _PLAIN_BREAKERS.search(s) and not _RESOLVABLE.match(s):
        return str.__str__(s)
    if _SURROGATE.search(s):
        raise _Unrepresentable(
            ValueError, "string holds a lone surrogate, which UTF-8 cannot carry"
        )
    return _JSON_RAW_YAML_BAD.sub(_escape, encode_basestring(s))


def _literal(s: str) -> tuple[str, list[str]]:
    """Return the header and lines of ``s`` as a literal block scalar, keeping it byte-exact."""
    trailing = len(s) - len(s.rstrip("\n"))
    header = "|2" if s[0] in " \t\n" else "|"
    lines = (s[:-1] if trailing else s).split("\n")
    return header + _CHOMP.get(trailing, "+"), lines


def _value_text(s: str) -> str | tuple[str, list[str]]:
    """Decide how a string value is written: one-line text, or (header, lines) for a block."""
    if "\n" in s and _BLOCK_CHARS.fullmatch(s) and s.strip("\n"):
        return _literal(s)
    return _inline(s)


def _key_text(k: str, ind: str) -> tuple[str, bool]:
    """Return ``k:`` (or the indent-bound explicit ``? k`` form if long) and if it is reusable."""
    text = _inline(k)
    if len(text.encode()) > _LONG_KEY:
        return f"? {text}\n{ind}:", False
    return f"{text}:", True


def _key_order(d: dict[str, Any]) -> list[str]:
    """Return the keys of ``d`` in output order: priority keys first, then code-point order."""
    for k in d:
        if not isinstance(k, str):
            raise _Unrepresentable(TypeError, f"mapping key {k!r} is {type(k).__name__}, not str")
    rest = sorted(k for k in d if k not in _PRIORITY)
    return [k for k in PRIORITY_KEYS if k in d] + rest


def _float_text(f: float) -> str:
    """Write a finite float so YAML 1.1 (needs a dot and signed exponent) and 1.2 agree on it."""
    if not math.isfinite(f):
        raise _Unrepresentable(ValueError, f"float {f!r} has no JSON form, so no manifest holds it")
    text = float.__repr__(f)
    mantissa, e, exponent = text.partition("e")
    return f"{mantissa}.0e{exponent}" if e and "." not in mantissa else text


_SCALARS: dict[type, Callable[[Any], str]] = {
    bool: {True: "true", False: "false"}.__getitem__,
    int: int.__repr__,
    type(None): lambda _: "null",
    float: _float_text,
    dict: lambda _: "{}",  # reached only when empty
    list: lambda _: "[]",
}
_BASES = (str, dict, list, int, float)  # subclasses (str-valued Enums...) are written as these


def _base(v: Any) -> Any:
    """Return ``v`` as its plain base type, or raise TypeError for anything not in a manifest."""
    for base in _BASES:
        if isinstance(v, base):
            return str.__str__(v) if base is str else base(v)
    raise _Unrepresentable(TypeError, f"cannot emit {type(v).__name__} {v!r:.60}")


def _position(items: list[Any], item: Any) -> int:
    """Return the index of ``item`` (by identity) in ``items``, for error paths only."""
    return next(i for i, x in enumerate(items) if x is item)


def _block(text: tuple[str, list[str]], ind: str) -> str:
    """Return a literal block's header line and its lines, indented by ``ind``."""
    header, lines = text
    return header + "\n" + "".join([f"{ind}{line}\n" if line else "\n" for line in lines])


class _Emitter:
    """One call's output pieces, plus caches of decided scalars and key orders for that call."""

    __slots__ = ("keys", "orders", "out", "seen", "values")

    def __init__(self) -> None:
        self.out: list[str] = []
        self.values: dict[str, str | tuple[str, list[str]]] = {}
        self.keys: dict[str, str] = {}
        self.orders: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        # id -> (node, indent, text or None): a subtree met again (pods of one replica type
        # share their volumes, resources...) is written once per indent and then copied.  The
        # node is held so its id cannot be reused within the call; trees are not mutated meanwhile.
        self.seen: dict[int, tuple[Any, str, str | None]] = {}

    def shared(self, write: Callable[[Any, str], None], node: Any, ind: str) -> None:
        """Write a non-empty collection via ``write``, copying its text when already written."""
        hit = self.seen.get(id(node))
        if hit is None or hit[0] is not node or hit[1] != ind:
            self.seen[id(node)] = (node, ind, None)
            write(node, ind)
        elif hit[2] is not None:
            self.out.append(hit[2])
        else:
            out = self.out
            start = len(out)
            write(node, ind)
            self.seen[id(node)] = (node, ind, "".join(out[start:]))

    def pairs(self, d: dict[str, Any], tk: tuple[str, ...], ind: str) -> list[tuple[str, str]]:
        """Return (key, key text) in output order, remembered for this key tuple when reusable."""
        keys = self.keys
        pairs = []
        reusable = True
        for k in _key_order(d):
            kt = keys.get(k)
            if kt is None:
                kt, fixed = _key_text(k, ind)
                if fixed:
                    keys[k] = kt
                reusable = reusable and fixed
            pairs.append((k, kt))
        if reusable:
            self.orders[tk] = pairs
        return pairs

    def write_wrapped(self, write: Callable[[Any, str], None], wrapped: Any, ind: str) -> None:
        """Write a subclass-typed entry wrapped as its base type, keeping its error path single."""
        try:
            write(wrapped, ind)
        except _Unrepresentable as e:
            del e.path[-1]
            raise

    def mapping(self, d: dict[str, Any], ind: str) -> None:
        """Write a non-empty mapping whose first key the caller has already positioned."""
        out, values = self.out, self.values
        tk = tuple(d)
        pairs = self.orders.get(tk) or self.pairs(d, tk, ind)
        sub = ind + "  "
        lead = ""
        try:
            for k, kt in pairs:
                v = d[k]
                t = type(v)
                if t is str:
                    text = values.get(v) or values.setdefault(v, _value_text(v))
                    if type(text) is not str:
                        text = _block(text, sub)[:-1]
                    out.append(f"{lead}{kt} {text}\n")
                elif t is dict and v:
                    out.append(f"{lead}{kt}\n{sub}")
                    self.shared(self.mapping, v, sub)
                elif t is list and v:
                    out.append(f"{lead}{kt}\n{ind}")
                    self.shared(self.sequence, v, ind)
                elif t in _SCALARS:
                    out.append(f"{lead}{kt} {_SCALARS[t](v)}\n")
                else:
                    wrapped = {k: _base(v)}
                    out.append(lead)
                    self.write_wrapped(self.mapping, wrapped, ind)
                lead = ind
        except _Unrepresentable as e:
            e.path.append(k)
            raise

    def sequence(self, items: list[Any], ind: str) -> None:
        """Write a non-empty list whose first dash the caller has already positioned."""
        out, values = self.out, self.values
        sub = ind + "  "
        lead = ""
        try:
            for v in items:
                t = type(v)
                if t is str:
                    text = values.get(v) or values.setdefault(v, _value_text(v))
                    if type(text) is not str:
                        text = _block(text, sub)[:-1]
                    out.append(f"{lead}- {text}\n")
                elif t is dict and v:
                    out.append(f"{lead}- ")
                    self.shared(self.mapping, v, sub)
                elif t is list and v:
                    out.append(f"{lead}- ")
                    self.shared(self.sequence, v, sub)
                elif t in _SCALARS:
                    out.append(f"{lead}- {_SCALARS[t](v)}\n")
                else:
                    wrapped = [_base(v)]
                    out.append(lead)
                    self.write_wrapped(self.sequence, wrapped, ind)
                lead = ind
        except _Unrepresentable as e:
            e.path.append(_position(items, v))
            raise

    def document(self, doc: Any) -> str:
        """Return one document: a block collection, or a lone scalar written as a list item."""
        self.out = out = []
        if type(doc) not in _SCALARS and type(doc) is not str:
            doc = _base(doc)
        if type(doc) is dict and doc:
            self.mapping(doc, "")
        elif type(doc) is list and doc:
            self.sequence(doc, "")
        else:
            self.write_wrapped(self.sequence, [doc], "")
            out[0] = out[0][2:]  # drop the "- "; a top-level block scalar is indented by 2 too
        return "".join(out)


def _path_text(path: list[str | int]) -> str:
    """Render a collected path (innermost first) as ``$.spec.containers[0]["a.b/c"]``."""
    parts = ["$"]
    for p in reversed(path):
        if isinstance(p, int):
            parts.append(f"[{p}]")
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", p):
            parts.append(f".{p}")
        else:
            parts.append(f"[{encode_basestring(p)}]")
    return "".join(parts)


def dump_all(docs: Iterable[Any]) -> str:
    """Return a YAML stream of ``docs``, separated by ``---`` lines, with no leading marker."""
    emitter = _Emitter()
    texts = []
    for i, doc in enumerate(docs):
        try:
            texts.append(emitter.document(doc))
        except _Unrepresentable as e:
            raise e.kind(f"{e.reason} (document {i}, at {_path_text(e.path)})") from None
    return "---\n".join(texts)


def dump(obj: Any) -> str:
    """Return one YAML document for ``obj``, ending with a newline."""
    try:
        return _Emitter().document(obj)
    except _Unrepresentable as e:
        raise e.kind(f"{e.reason} (at {_path_text(e.path)})") from None
