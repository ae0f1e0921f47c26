"""YAML text to plain data plus the line:col of every key and value, built from libyaml's events.

libyaml (through PyYAML's C parser) turns the text into events at C speed; this module
builds dicts, lists and scalars from them in one loop, so that it can
(a) remember where each value came from, (b) reject what Kubernetes rejects (duplicate keys,
complex keys, tags it does not know) instead of silently keeping the last value,
(c) resolve scalars the way kubectl does (YAML 1.1; keys stay the text written: `on:` is
"on"), and (d) stop at the reading limits (limits.py) before building what a hostile file
asks for: nodes, alias and `<<` expansions and nesting are counted as events arrive, and
nothing recurses, so no nesting crashes the interpreter.  PyYAML's composer is not used: it
builds every node first and recurses in C (a segfault at ~100 000 levels).

An alias is built again where it is used (a fresh copy whose marks point at the anchor), as
Go's decoder does; `<<: *anchor` merges are applied with explicit keys winning.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode

from .errors import Diagnostic, unique
from .limits import RUN_SPLIT_HINT, Budget
from .source import Mark, Source

try:  # libyaml is optional in PyYAML; the pure-Python parser gives the same events, slower
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

PathT = tuple[str | int, ...]

_TAG = "tag:yaml.org,2002:"
MERGE = _TAG + "merge"
_STR = _TAG + "str"
_PLAIN_TAGS = {MappingStartEvent: (_TAG + "map",), SequenceStartEvent: (_TAG + "seq",)}
_CONSTRUCTOR = SafeConstructor()
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1
_DECIMAL = re.compile(r"[-+]?[0-9][0-9_]*")


def _int(value: str, tag: str) -> int | float | str:
    """An integer as Go's YAML decoder (sigs.k8s.io/yaml, used by kubectl) reads it.

    Beyond 64 bits Go gives up on the integer: a decimal becomes a float (if finite) and
    anything else (0x..., 0o...) stays a string. So does flatjob, which also keeps every
    integer printable (Python refuses str() of ints over 4300 digits).
    """
    if ":" in value:  # YAML 1.1's base 60 (`1:20` is 80 to PyYAML): Go's decoder keeps the string
        return value
    number = _CONSTRUCTOR.construct_yaml_int(ScalarNode(tag, value))
    if _INT64_MIN <= number <= _UINT64_MAX:
        return number
    if _DECIMAL.fullmatch(value):
        as_float = float(value.replace("_", ""))
        if math.isfinite(as_float):
            return as_float
    return value


_SCALARS: dict[str, Callable[[str, str], Any]] = {
    _TAG + "str": lambda v, t: v,
    _TAG + "null": lambda v, t: None,
    _TAG + "bool": lambda v, t: _CONSTRUCTOR.construct_yaml_bool(ScalarNode(t, v)),
    _TAG + "int": _int,
    _TAG + "float": lambda v, t: v if ":" in v else _CONSTRUCTOR.construct_yaml_float(ScalarNode(t, v)),  # base 60, as _int
    # Go's YAML decoder keeps timestamps as strings when the target is untyped; so do we.
    _TAG + "timestamp": lambda v, t: v,
    # PyYAML resolves a lone "=" and "<<" in value position to these; Go reads plain strings.
    _TAG + "value": lambda v, t: v,
    MERGE: lambda v, t: v,
}
# Tags Go's decoder reads as something else than the text a review shows.
_UNSHOWN_TAGS = {
    _TAG + "binary": "Kubernetes decodes !!binary (base64), so the cluster would get other text than this file shows; write the value itself",
}

# A mapping frame's state: what its next node is (else the key whose value comes next).
_KEY, _DISCARD_KEY, _DISCARD, _MERGE = object(), object(), object(), object()
_STARTS = (MappingStartEvent, SequenceStartEvent)
_ENDS = (MappingEndEvent, SequenceEndEvent)

Pair = tuple[str, Mark, int, int]  # a merged key, its mark, and its value's event range


def _two_merges(first: Mark) -> str:
    return f"duplicate merge key '<<' (first at line {first.line}); YAML readers disagree on which merge wins; merge a list instead: <<: [*first, *second]"


class LimitHit(Exception):
    """A reading limit was crossed: the file is not read further."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class _Anchor:
    """An anchored node: its events [start, end) (end -1 while open) and how many nodes it builds."""

    __slots__ = ("end", "mark", "size", "start")

    def __init__(self, start: int, mark: Mark) -> None:
        self.start, self.end, self.size, self.mark = start, -1, 0, mark


class _Frame:
    """An open sequence or mapping: its value, its path (None: built only to be dropped), what comes next."""

    __slots__ = ("anchor", "end", "explicit", "key", "merge_mark", "merged", "merges", "path", "pending", "value")

    def __init__(self, value: Any, path: PathT | None, anchor: _Anchor | None) -> None:
        self.value, self.path, self.anchor = value, path, anchor
        self.end = -1  # the index after its end event, once read
        self.key: Any = _KEY
        self.explicit: dict[str, Mark] = {}  # a mapping's own keys and where each is
        self.merges: list[tuple[int, int]] | None = None  # `<<` sources, as event ranges (made when met)
        self.merge_mark: Mark | None = None
        self.pending: list[Pair] | None = None  # merged pairs still to build, at the mapping's end
        self.merged: list[str] | None = None  # keys taken from merges, in order


class _Cursor:
    """A replay of recorded events (an alias, or a merged value) and the mark that caused it."""

    __slots__ = ("end", "origin", "pos")

    def __init__(self, start: int, end: int, origin: Mark) -> None:
        self.pos, self.end, self.origin = start, end, origin


_NEW_MARK = partial(tuple.__new__, Mark)  # Mark((line, col)) without NamedTuple's Python __new__


def _shown(text: str, width: int = 40) -> str:
    """Input text as a message quotes it: cut to `width` (a key or tag may be 1 MB)."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _mark(event: Event) -> Mark:
    return _NEW_MARK((event.start_mark.line + 1, event.start_mark.column + 1))


def _is_merge_key(event: Event) -> bool:
    """`<<` written plain (or tagged !!merge), as YAML 1.1's merge key."""
    return event.__class__ is ScalarEvent and (event.tag == MERGE or (event.tag is None and event.implicit[0] and event.value == "<<"))


class _Builder:
    """Builds the documents of one file from the parser's events, within the run's budget."""

    def __init__(self, source: Source, budget: Budget, loader: Any) -> None:
        self.source, self.budget, self.limits = source, budget, budget.limits
        self._get, self._resolve = loader.get_event, loader.resolve
        self.file_nodes = 0

    def begin(self) -> None:
        """Fresh state for the next document (anchors do not cross documents)."""
        self.value_marks: dict[PathT, Mark] = {}
        self.key_marks: dict[PathT, Mark] = {}
        self.problems: list[Diagnostic] = []
        self._reported: set[tuple[str, int, int, str]] = set()
        self.events: list[Event] = []  # this document's events, replayed for aliases and merges
        self.ends: dict[int, int] = {}  # a recorded collection's start index -> the index after its end
        self.anchors: dict[str, _Anchor] = {}
        self.replay: list[_Cursor] = []
        self.frames: list[_Frame] = []
        self.root: Any = None
        self._pairs_memo: dict[int, list[Pair]] = {}
        # Stop when the file's or the run's node budget is spent, whichever comes first.
        self._cap = min(self.limits.file_nodes, self.file_nodes + max(self.budget.nodes, 0))

    # --- events in: from the parser (recorded) or from a replay ---------------------------

    def _next(self) -> tuple[Event, int]:
        """The next event and its index in self.events."""
        while self.replay:
            cursor = self.replay[-1]
            if cursor.pos < cursor.end:
                cursor.pos += 1
                return self.events[cursor.pos - 1], cursor.pos - 1
            self.replay.pop()
        event = self._get()
        self.events.append(event)
        return event, len(self.events) - 1

    def _end_of(self, index: int) -> int:
        """The index after the recorded node that starts at `index`."""
        if self.events[index].__class__ not in _STARTS:
            return index + 1
        end = self.ends.get(index)
        if end is None:
            depth, i = 0, index
            while True:
                cls = self.events[i].__class__
                depth += 1 if cls in _STARTS else -1 if cls in _ENDS else 0
                i += 1
                if not depth:
                    break
            end = self.ends[index] = i
        return end

    def _where(self, event: Event) -> Mark:
        """Where a limit is reported: the alias or merge that replays the event, else the event."""
        return self.replay[0].origin if self.replay else _mark(event)

    def _origin(self, mark: Mark) -> Mark:
        return self.replay[0].origin if self.replay else mark

    def _problem(self, code: str, message: str, mark: Mark) -> None:
        """One finding, once per place: an alias or merge replays its anchor's events, and a
        finding made on each of 50 000 replays would each hold the line (which may be 1 MB)."""
        key = (code, mark.line, mark.col, message)
        if key in self._reported:
            return
        self._reported.add(key)
        self.problems.append(Diagnostic(code, message, self.source.path, mark.line, mark.col, source_line=self.source.line(mark.line)))

    def _limit(self, message: str, mark: Mark, hint: str | None = None) -> LimitHit:
        return LimitHit(Diagnostic("FJ105", f"{message}; flatjob stops reading this file here", self.source.path, mark.line, mark.col, source_line=self.source.line(mark.line), hint=hint))

    def _count(self, n: int, event: Event) -> None:
        """Count n more nodes built; stop when the file's or the run's budget is spent."""
        self.file_nodes += n
        if self.file_nodes > self._cap:
            raise self._spent(event)

    def _count_at(self, n: int, mark: Mark) -> None:
        """_count for nodes that have no event of their own here (the pairs a merge brings in)."""
        self.file_nodes += n
        if self.file_nodes > self._cap:
            raise self._spent_at(mark)

    def _spent(self, event: Event) -> LimitHit:
        return self._spent_at(self._where(event))

    def _spent_at(self, mark: Mark) -> LimitHit:
        if self._cap >= self.limits.file_nodes:
            return self._limit(f"more than {self.limits.file_nodes:,} YAML nodes in one file (an alias or << merge counts every node it copies)", mark)
        self.budget.spent = True
        return self._limit(f"more than {self.limits.run_nodes:,} YAML nodes in the files of this run together", mark, hint=RUN_SPLIT_HINT)

    # --- the loop ----------------------------------------------------------------------

    def build(self) -> Any:
        """Build the document whose DocumentStartEvent was just read; return its root value."""
        start = self.file_nodes
        try:
            return self._loop()
        finally:
            self.budget.nodes -= self.file_nodes - start

    def _loop(self) -> Any:
        get, events, frames, replay, plain = self._get, self.events, self.frames, self.replay, self._plain
        while True:
            if replay:
                event, index = self._next()
            else:
                event = get()
                index = len(events)
                events.append(event)
            cls = event.__class__
            top = frames[-1] if frames else None
            # Plain scalars in kept collections are most events: _plain builds them; the rest
            # (collections, aliases, anchors, merges, problems) goes to _other.
            if cls is ScalarEvent and event.anchor is None and top is not None and top.path is not None and top.pending is None and plain(top, event):
                continue
            if cls is DocumentEndEvent:
                return self.root
            self._other(cls, event, index, top)

    def _plain(self, top: _Frame, event: Event) -> bool:
        """A plain scalar key or value of a kept collection; False when it needs _other."""
        key, value = top.key, top.value
        sm = event.start_mark
        if type(value) is dict and key is _KEY:
            text = event.value
            if text == "<<" and _is_merge_key(event):
                return False
            self.file_nodes += 1
            if self.file_nodes > self._cap:
                raise self._spent(event)
            mark = _NEW_MARK((sm.line + 1, sm.column + 1))
            if text in top.explicit:
                self._duplicate(top, text, mark)
                return True
            top.explicit[text] = mark
            self.key_marks[(*top.path, text)] = mark  # type: ignore[misc]
            top.key = text
            return True
        is_list = type(value) is list
        if not is_list and type(key) is not str:
            return False
        self.file_nodes += 1
        if self.file_nodes > self._cap:
            raise self._spent(event)
        path = (*top.path, len(value)) if is_list else (*top.path, key)  # type: ignore[misc]
        self.value_marks[path] = _NEW_MARK((sm.line + 1, sm.column + 1))
        tag = event.tag
        if tag is None and not event.implicit[0]:
            scalar = event.value  # quoted or block: a string
        else:
            if tag is None or tag == "!":
                tag = self._resolve(ScalarNode, event.value, event.implicit)
            scalar = event.value if tag == _STR else self._scalar(event, tag)
        if is_list:
            value.append(scalar)
        else:
            value[key] = scalar
            top.key = _KEY
        return True

    def _other(self, cls: type, event: Event, index: int, top: _Frame | None) -> None:
        if cls in _ENDS:
            self._close(top, index)
        elif top is not None and top.key is _MERGE:
            self._merge_value(top, event, index)
        elif top is not None and top.key is _KEY and top.path is not None and type(top.value) is dict:
            self._key(top, event, index)
        elif cls is AliasEvent:
            self._alias(event)
        elif cls is ScalarEvent:
            self._place(self._scalar_node(event, index, top))
        else:
            self._open_collection(event, index, top)

    def _child_path(self, top: _Frame | None) -> PathT | None:
        """Where the next node of `top` goes (None: nowhere, it is dropped)."""
        if top is None:
            return ()
        if top.path is None:
            return None
        if type(top.value) is list:
            return (*top.path, len(top.value))
        return (*top.path, top.key) if type(top.key) is str else None

    def _begin_node(self, event: Event, index: int, path: PathT | None) -> _Anchor | None:
        """Count a node, record its mark at `path` (None: none) and register its anchor."""
        anchor = None
        if event.anchor is not None and not self.replay:
            name = event.anchor
            first = self.anchors.get(name)
            if first is not None:
                raise yaml.MarkedYAMLError(None, None, f"anchor {name!r} is defined twice (first at line {first.mark.line})", event.start_mark)
            anchor = self.anchors[name] = _Anchor(index, _mark(event))
        self._count(1, event)
        if path is not None:
            self.value_marks[path] = _mark(event)
        return anchor

    def _scalar_node(self, event: Event, index: int, top: _Frame | None) -> Any:
        anchor = self._begin_node(event, index, self._child_path(top))
        if anchor is not None:
            anchor.end, anchor.size = index + 1, 1
        tag = event.tag
        if tag is None or tag == "!":
            tag = self._resolve(ScalarNode, event.value, event.implicit)
        return self._scalar(event, tag)

    def _open_collection(self, event: Event, index: int, top: _Frame | None) -> None:
        before = self.file_nodes
        path = self._child_path(top)
        if event.anchor is None:  # most collections: count and mark inline
            anchor = None
            self.file_nodes += 1
            if self.file_nodes > self._cap:
                raise self._spent(event)
            if path is not None:
                sm = event.start_mark
                self.value_marks[path] = _NEW_MARK((sm.line + 1, sm.column + 1))
        else:
            anchor = self._begin_node(event, index, path)
        if len(self.frames) >= self.limits.depth:
            raise self._limit(f"collections nested more than {self.limits.depth} levels deep", self._where(event))
        if event.tag is not None and event.tag != "!" and event.tag not in _PLAIN_TAGS[event.__class__]:
            self._problem("FJ104", f"unsupported YAML tag {_shown(event.tag)!r}; Kubernetes accepts plain YAML only", _mark(event))
        if anchor is not None:
            anchor.size = before  # the node count before it; the difference is taken at its end
        self.frames.append(_Frame({} if event.__class__ is MappingStartEvent else [], path, anchor))

    def _close(self, top: _Frame | None, index: int) -> None:
        assert top is not None
        top.end = index + 1
        if top.merges and top.pending is None and top.path is not None:
            top.pending = self._merged_pairs(top)
            if self._next_merged(top):
                return
        self._place(self._finish(top))

    def _finish(self, top: _Frame) -> Any:
        """Pop a complete collection: close its anchor, put merged keys first (as written before)."""
        self.frames.pop()
        if top.anchor is not None:
            top.anchor.end = self.ends[top.anchor.start] = top.end
            top.anchor.size = self.file_nodes - top.anchor.size
        if top.merged:
            own = top.value
            value = {k: own[k] for k in top.merged}
            value.update((k, v) for k, v in own.items() if k not in value)
            return value
        return top.value

    def _place(self, value: Any) -> None:
        """Put a complete value where it belongs; finishing a mapping may complete its parent."""
        while True:
            if not self.frames:
                self.root = value
                return
            top = self.frames[-1]
            if type(top.value) is list:
                if top.path is not None:
                    top.value.append(value)
                return
            key = top.key
            if top.path is None or key is _DISCARD:
                top.key = _KEY
                return
            if key is _DISCARD_KEY:
                top.key = _DISCARD
                return
            top.value[key] = value
            top.key = _KEY
            if top.pending is None or self._next_merged(top):
                return
            value = self._finish(top)

    # --- mapping keys and merges ---------------------------------------------------------

    def _key(self, top: _Frame, event: Event, index: int) -> None:
        cls = event.__class__
        if cls is ScalarEvent:
            anchor = self._begin_node(event, index, None)
            if anchor is not None:
                anchor.end, anchor.size = index + 1, 1
            key_event = event
        elif cls is AliasEvent:
            anchor = self._resolve_alias(event)
            key_event = self.events[anchor.start] if anchor is not None else event
            if key_event.__class__ is ScalarEvent:
                self._count(1, event)
        else:
            key_event = event
        if key_event.__class__ is not ScalarEvent:
            self._problem("FJ104", "a mapping key must be a plain scalar, not a list or mapping", _mark(event))
            if cls is AliasEvent:
                top.key = _DISCARD
            else:
                top.key = _DISCARD_KEY
                self._open_collection(event, index, top)
            return
        if _is_merge_key(key_event):
            if top.merge_mark is not None:
                self._duplicate_merge(top, _mark(key_event))
                return
            top.key, top.merge_mark = _MERGE, self._origin(_mark(event))
            return
        text, mark = key_event.value, _mark(key_event)
        if text in top.explicit:
            self._duplicate(top, text, mark)
            return
        top.explicit[text] = mark
        self.key_marks[(*top.path, text)] = mark  # type: ignore[misc]
        top.key = text

    def _duplicate(self, top: _Frame, text: str, mark: Mark) -> None:
        first = top.explicit[text]
        self._problem("FJ101", f"duplicate key {_shown(text)!r} (first defined at line {first.line}); Kubernetes rejects duplicate keys", mark)
        top.key = _DISCARD

    def _duplicate_merge(self, top: _Frame, mark: Mark) -> None:
        """A second `<<` in one mapping: a duplicate key like any other (YAML keys are unique),
        and one readers resolve apart (go-yaml v2, kubectl's: the last merge wins; go-yaml v3
        refuses it; flatjob's first-wins would be a third reading), so it is reported, not merged."""
        self._problem("FJ101", _two_merges(top.merge_mark or mark), mark)
        top.key = _DISCARD

    def _merge_value(self, top: _Frame, event: Event, index: int) -> None:
        """The node after `<<`: an alias, a mapping, or a list of them; kept as event ranges."""
        top.key = _KEY
        cls = event.__class__
        if cls is SequenceStartEvent:
            self._count(1, event)
            while True:
                item, at = self._next()
                if item.__class__ is SequenceEndEvent:
                    return
                self._count(1, item)  # a list of a million aliases is a million nodes
                self._merge_source(top, item, at)
        self._merge_source(top, event, index)

    def _merge_source(self, top: _Frame, event: Event, index: int) -> None:
        cls = event.__class__
        if cls is AliasEvent:
            anchor = self._resolve_alias(event)
            if anchor is None:
                return
            if self.events[anchor.start].__class__ is MappingStartEvent:
                top.merges = top.merges or []
                top.merges.append((anchor.start, anchor.end))
                return
            mark = anchor.mark
        else:
            end = self._skip(event, index) if cls in _STARTS else index + 1
            if cls is MappingStartEvent:
                top.merges = top.merges or []
                top.merges.append((index, end))
                return
            mark = _mark(event)
        self._problem("FJ104", "a merge key (<<) must refer to a mapping", mark)

    def _skip(self, event: Event, index: int) -> int:
        """Read past a collection without building it yet (an inline merge source), counting
        its nodes as they are read; return the index after it."""
        self._count(1, event)
        depth = 1
        while depth:
            if len(self.frames) + depth > self.limits.depth:
                raise self._limit(f"collections nested more than {self.limits.depth} levels deep", self._where(event))
            event, index = self._next()
            cls = event.__class__
            if cls in _ENDS:
                depth -= 1
                continue
            self._count(1, event)
            if cls in _STARTS:
                depth += 1
        return index + 1

    def _merged_pairs(self, top: _Frame) -> list[Pair]:
        """The pairs a mapping inherits, last first (they are popped): the first source to name
        a key wins, its own keys win over all.  Every pair a source brings in counts as a node
        (its key), whether it is built or overridden: `<<: [*a, *a, ...]` costs what it reads."""
        seen: set[str] = set()
        out: list[Pair] = []
        mark = top.merge_mark or Mark(1, 1)
        for start, end in top.merges or ():
            pairs = self._pairs(start, end, 0)
            self._count_at(len(pairs), mark)
            for pair in pairs:
                if pair[0] not in top.explicit and pair[0] not in seen:
                    seen.add(pair[0])
                    out.append(pair)
        out.reverse()
        return out

    def _pairs(self, start: int, end: int, depth: int) -> list[Pair]:
        """A recorded mapping's pairs, its own merges applied (memoized: sources repeat); merges
        of merges nest at most limits.depth deep (each level is a recursion)."""
        found = self._pairs_memo.get(start)
        if found is not None:
            return found
        if depth >= self.limits.depth:
            raise self._limit(f"<< merges of merges nested more than {self.limits.depth} levels deep", self.replay[0].origin if self.replay else _mark(self.events[start]))
        own: list[Pair] = []
        merged: list[Pair] = []
        events = self.events
        first_merge: Mark | None = None
        i = start + 1
        while i < end - 1:
            key_end = self._end_of(i)
            value_end = self._end_of(key_end)
            key = events[i]
            if key.__class__ is AliasEvent:
                anchor = self.anchors.get(key.anchor)
                key = events[anchor.start] if anchor is not None and anchor.end >= 0 else key
            if _is_merge_key(key) and first_merge is not None:  # an inline merge source is never built: checked here
                self._problem("FJ101", _two_merges(first_merge), _mark(key))
            elif _is_merge_key(key):
                first_merge = _mark(key)
                merged.extend(self._merge_pairs_of(key_end, value_end, depth + 1))
            elif key.__class__ is ScalarEvent:
                own.append((key.value, _mark(key), key_end, value_end))
            i = value_end
        names = {p[0] for p in own}
        seen: set[str] = set()
        result = []
        for pair in merged:
            if pair[0] not in names and pair[0] not in seen:
                seen.add(pair[0])
                result.append(pair)
        result.extend(own)
        self._pairs_memo[start] = result
        return result

    def _merge_pairs_of(self, start: int, end: int, depth: int) -> list[Pair]:
        """The pairs a recorded `<<` value brings: of an alias, a mapping, or each item of a list."""
        event = self.events[start]
        items = [start]
        if event.__class__ is SequenceStartEvent:
            items, i = [], start + 1
            while i < end - 1:
                items.append(i)
                i = self._end_of(i)
        out: list[Pair] = []
        for i in items:
            item = self.events[i]
            if item.__class__ is AliasEvent:
                anchor = self.anchors.get(item.anchor)
                if anchor is None or anchor.end < 0:
                    continue
                i = anchor.start
            if self.events[i].__class__ is MappingStartEvent:
                out.extend(self._pairs(i, self._end_of(i), depth))
        return out

    def _next_merged(self, top: _Frame) -> bool:
        """Start building the next inherited pair of a mapping at its end; False when none is left."""
        if not top.pending:
            return False
        key, mark, start, end = top.pending.pop()
        self.key_marks[(*top.path, key)] = mark  # type: ignore[misc]
        top.key = key
        top.merged = top.merged or []
        top.merged.append(key)
        self.replay.append(_Cursor(start, end, self._origin(top.merge_mark or mark)))
        return True

    # --- aliases and scalars -------------------------------------------------------------

    def _alias(self, event: Event) -> None:
        """Build the anchored node again here: replay its events, once the budget allows it."""
        anchor = self._resolve_alias(event)
        if anchor is None:
            self._place(None)
            return
        if self.file_nodes + anchor.size > self.limits.file_nodes or anchor.size > self.budget.nodes:
            self._count(anchor.size, event)  # raises, at the alias: the expansion is too big
        self.replay.append(_Cursor(anchor.start, anchor.end, self._origin(_mark(event))))

    def _resolve_alias(self, event: Event) -> _Anchor | None:
        anchor = self.anchors.get(event.anchor)
        if anchor is None:
            raise yaml.MarkedYAMLError(None, None, f"found undefined alias {event.anchor!r}", event.start_mark)
        if anchor.end < 0:
            self._problem("FJ104", f"alias *{event.anchor} is used inside its own anchor (a recursive structure, which Kubernetes YAML cannot hold)", _mark(event))
            return None
        return anchor

    def _scalar(self, event: Event, tag: str) -> Any:
        """A scalar's value by its (resolved) tag: kubectl's reading of YAML 1.1."""
        make = _SCALARS.get(tag)
        if make is None:
            self._problem("FJ104", _UNSHOWN_TAGS.get(tag) or f"unsupported YAML tag {_shown(tag)!r}; Kubernetes accepts plain YAML only", _mark(event))
            return event.value
        try:
            return make(event.value, tag)
        except (ConstructorError, ValueError, KeyError, IndexError, OverflowError):  # only an explicit tag can fail: !!bool x, !!int ""
            self._problem("FJ104", f"{_shown(event.value)!r} is not a valid {tag.replace(_TAG, '!!')} value", _mark(event))
            return event.value


def documents(source: Source, budget: Budget) -> Iterator[tuple[Any, dict[PathT, Mark], dict[PathT, Mark], list[Diagnostic]]]:
    """(data, value marks, key marks, problems) per document of a source, in order.

    Raises yaml.YAMLError for text the parser rejects and LimitHit when a limit is crossed;
    documents before either have already been yielded.
    """
    loader = _Loader(source.text)
    builder = _Builder(source, budget, loader)
    limits, count = budget.limits, 0
    directive = _directive_past(source.text, limits.file_directives)
    if directive is not None:  # libyaml reads every directive before the first document's event: counted before parsing
        loader.dispose()
        raise builder._limit(f"more than {limits.file_directives:,} YAML directives (%TAG, %YAML) in one file", directive)
    try:
        loader.get_event()  # StreamStartEvent
        while not isinstance(start := loader.get_event(), StreamEndEvent):  # DocumentStartEvent
            count += 1
            if count > limits.file_documents or budget.documents <= 0:
                what = f"more than {limits.file_documents:,} YAML documents in one file" if count > limits.file_documents else f"more than {limits.run_documents:,} YAML documents in the files of this run together"
                run_wide = count <= limits.file_documents
                budget.spent = budget.spent or run_wide
                raise builder._limit(what, _mark(start), hint=RUN_SPLIT_HINT if run_wide else None)
            budget.documents -= 1
            builder.begin()
            if start.version is not None and tuple(start.version) != (1, 1):
                builder._problem("FJ104", _version_problem(start.version), _directive_mark(source.text, start))
            data = builder.build()
            # Each problem once: an alias built twice meets its anchor's problems twice.
            yield data, builder.value_marks, builder.key_marks, unique(builder.problems)
    except yaml.MarkedYAMLError as exc:
        if not _too_deep(exc):
            raise
        # The YAML library's own nesting limit (libyaml in PyYAML 6.0.4: 1000 levels, met while
        # it scans ahead) is flatjob's limit too: the same FJ105 whichever stops first.
        mark = exc.problem_mark
        at = Mark(mark.line + 1, mark.column + 1) if mark is not None else Mark(1, 1)
        raise builder._limit(f"collections nested more than {budget.limits.depth} levels deep", at) from None
    finally:
        loader.dispose()


# A `%` starting a line, where YAML 1.1 (libyaml) starts one: after CR LF, LF, CR, NEL, LS or PS
# (review of round 13: 50 000 directives split by CR alone passed the LF-only count).
_BREAK = r"\r\n|[\r\n\x85\u2028\u2029]"
# The `%` leads (a lookbehind, not an alternation before it): the engine then skips to each `%`
# instead of trying the breaks at every character (0.15 s per 4 MiB file of `---` lines).
_DIRECTIVE = re.compile(r"(?:\A|(?<=[\r\n\x85\u2028\u2029]))%")


def _directive_past(text: str, limit: int) -> Mark | None:
    """Where a line starting with `%` (a directive, at most: a document's own lines starting
    with `%` at column 1 are as rare) is the limit's first past, if any."""
    if text.count("%") <= limit:
        return None  # too few to be past it, wherever they are: one pass at memory speed
    for n, match in enumerate(_DIRECTIVE.finditer(text), 1):
        if n > limit:
            return Mark(len(re.findall(_BREAK, text[: match.end() - 1])) + 1, 1)
    return None


def _version_problem(version: tuple[int, int]) -> str:
    """Why a `%YAML` directive other than 1.1 is refused (docs/architecture.md, YAML version)."""
    return (
        f"%YAML {version[0]}.{version[1]}: flatjob reads YAML 1.1, as kubectl does (its go-yaml v2 refuses any other"
        " version: 'found incompatible YAML document'), and a 1.2 reader would read yes/no/on/off and 017 otherwise;"
        " remove the directive"
    )


def _directive_mark(text: str, start: Event) -> Mark:
    """The line of the last `%YAML` directive before a document's start (libyaml marks the `---`)."""
    end = start.start_mark.index
    found = None
    for match in _VERSION_DIRECTIVE.finditer(text, 0, end):
        found = match
    if found is None:
        return _mark(start)
    return Mark(len(re.findall(_BREAK, text[: found.start()])) + 1, 1)


_VERSION_DIRECTIVE = re.compile(r"(?:\A|(?<=[\r\n\x85\u2028\u2029]))%YAML[ \t]")


def _too_deep(exc: yaml.MarkedYAMLError) -> bool:
    """Whether the parser gave up on nesting (libyaml: `exceeded maximum nesting depth`)."""
    return "nesting depth" in (exc.problem or "")


__all__ = ["MERGE", "LimitHit", "PathT", "documents"]
