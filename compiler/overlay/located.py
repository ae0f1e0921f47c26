"""Values that remember where they were written, so merged jobs still point at real lines.

An overlay mixes a job file with patches from overlay files.  Each value is a `Node` holding
its source file and line:col; merging and patching move nodes around, and `to_document`
turns the result back into a loader Document whose diagnostics name the file and line each
value came from (a bad replica count set by `overlays/prod/overlay.yaml` is reported there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import Diagnostic
from ..loader import Document, Mark, PathT, Source, format_path


@dataclass(frozen=True)
class Node:
    """A value (dict of Nodes, list of Nodes, or scalar) and where it was written."""

    value: Any
    source: Source
    mark: Mark
    key_mark: Mark | None = None  # the mapping key this value sits under, when there is one

    def get(self, key: str) -> Node | None:
        """The child under a mapping key (None when absent or when this is no mapping)."""
        return self.value.get(key) if isinstance(self.value, dict) else None

    def diagnostic(self, code: str, message: str, *, key: bool = False, field: PathT = (), **kw: Any) -> Diagnostic:
        """A finding at this value (or at its key) in its own file."""
        mark = self.key_mark if key and self.key_mark else self.mark
        return Diagnostic(
            code, message, self.source.path, mark.line, mark.col,
            field=format_path(field) if field else None, source_line=self.source.line(mark.line), **kw,
        )


Remap = Callable[[Mark], Mark]


def _same(mark: Mark) -> Mark:
    return mark


def from_document(doc: Document, path: PathT = (), remap: Remap = _same, source: Source | None = None) -> Node:
    """The Node tree of a document (or of the value at `path` in it).

    `remap` and `source` re-home marks, for YAML embedded in a block scalar of another file.
    """
    src = source or doc.source

    def build(value: Any, here: PathT) -> Node:
        mark = remap(doc.value_marks.get(here, doc.locate(here)))
        key = doc.key_marks.get(here)
        if isinstance(value, dict):
            inner: Any = {k: build(v, (*here, k)) for k, v in value.items()}
        elif isinstance(value, list):
            inner = [build(v, (*here, i)) for i, v in enumerate(value)]
        else:
            inner = value
        return Node(inner, src, mark, remap(key) if key else None)

    value: Any = doc.data
    for part in path:
        value = value[part]
    return build(value, path)


def size(node: Node, cap: int) -> int:
    """How many values the tree holds, counted up to `cap` + 1 (a JSON patch `copy` shares
    subtrees, so a few operations can describe a tree too big to walk whole)."""
    count, stack = 0, [node]
    while stack and count <= cap:
        value = stack.pop().value
        count += 1
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count


def plain(node: Node) -> Any:
    """The node's value as plain data."""
    if isinstance(node.value, dict):
        return {k: plain(v) for k, v in node.value.items()}
    if isinstance(node.value, list):
        return [plain(v) for v in node.value]
    return node.value


def scalar(value: Any, like: Node) -> Node:
    """A new value written where `like` was written (images: and labels: set values this way)."""
    return Node(value, like.source, like.mark, like.key_mark)


class OverlaidDocument(Document):
    """A job document after overlays: each path may come from a different file."""

    sources: dict[PathT, Source]

    def _resolve(self, path: PathT, key: bool = False) -> tuple[PathT, Mark]:
        """Document.locate, also telling which path's mark was used."""
        path = tuple(path)
        order = (self.key_marks, self.value_marks) if key else (self.value_marks, self.key_marks)
        probe = path
        while True:
            for marks in order:
                if probe in marks:
                    return probe, marks[probe]
            if not probe:
                return (), Mark(1, 1)
            probe = probe[:-1]
            order = (self.key_marks, self.value_marks)

    def source_of(self, path: PathT) -> Source:
        """The file the value at `path` (or its nearest written ancestor) came from."""
        found, _ = self._resolve(path)
        return self.sources.get(found, self.source)

    def locate(self, path: PathT, *, key: bool = False) -> Mark:
        return self._resolve(path, key)[1]

    def locate_text(self, path: PathT, needle: str, nth: int = 0) -> Mark:
        start = self.locate(path)
        src = self.source_of(path)
        offset = src.offset(start)
        hit = None
        for _ in range(nth + 1):
            found = src.text.find(needle, offset)
            if found < 0:
                return start
            hit, offset = found, found + len(needle)
        return src.mark(hit) if hit is not None else start

    def diagnostic_at(self, code: str, message: str, mark: Mark, path: PathT = (), **kw: Any) -> Diagnostic:
        src = self.source_of(path)
        return Diagnostic(
            code=code, message=message, path=src.path, line=mark.line, col=mark.col,
            field=format_path(path) if path else None, source_line=src.line(mark.line), **kw,
        )

    def diagnostic(self, code: str, message: str, path: PathT = (), *, key: bool = False, **kw: Any) -> Diagnostic:
        found, mark = self._resolve(path, key)
        src = self.sources.get(found, self.source)
        return Diagnostic(
            code=code, message=message, path=src.path, line=mark.line, col=mark.col,
            field=format_path(path) if path else None, source_line=src.line(mark.line), **kw,
        )


def to_document(node: Node, like: Document) -> OverlaidDocument:
    """A Document of the node tree, keeping the original job file as its main source."""
    value_marks: dict[PathT, Mark] = {}
    key_marks: dict[PathT, Mark] = {}
    sources: dict[PathT, Source] = {}

    def flat(n: Node, here: PathT) -> Any:
        value_marks[here] = n.mark
        if n.key_mark is not None:
            key_marks[here] = n.key_mark
        if n.source is not like.source:
            sources[here] = n.source
        if isinstance(n.value, dict):
            return {k: flat(v, (*here, k)) for k, v in n.value.items()}
        if isinstance(n.value, list):
            return [flat(v, (*here, i)) for i, v in enumerate(n.value)]
        return n.value

    data = flat(node, ())
    doc = OverlaidDocument(like.source, like.index, data, value_marks, key_marks)
    doc.sources = sources
    return doc
