"""Read YAML job specs into plain data plus the line:col of every key and value.

libyaml's composer (through PyYAML) builds the node tree with marks at C speed; this module
turns nodes into plain dicts/lists/scalars itself so that it can (a) remember where each
value came from, (b) reject what Kubernetes rejects (duplicate keys, complex keys) instead
of silently keeping the last value, and (c) resolve scalars the way kubectl does (YAML 1.1).
Keys are always taken as written text (`on:` stays the string "on").
"""

from __future__ import annotations

import bisect
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import Diagnostic
from .keys import T9K_GROUP

try:  # libyaml is optional in PyYAML; the pure-Python composer gives the same marks, slower
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

PathT = tuple[str | int, ...]

T9K_KINDS = ("GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob")
YAML_SUFFIXES = (".yaml", ".yml")

_TAG = "tag:yaml.org,2002:"
_CONSTRUCTOR = SafeConstructor()
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1
_DECIMAL = re.compile(r"[-+]?[0-9][0-9_]*")


def _int(node: ScalarNode) -> int | float | str:
    """An integer as Go's YAML decoder (sigs.k8s.io/yaml, used by kubectl) reads it.

    Beyond 64 bits Go gives up on the integer: a decimal becomes a float (if finite) and
    anything else (0x..., 0o...) stays a string. So does flatjob, which also keeps every
    integer printable (Python refuses str() of ints over 4300 digits).
    """
    value = _CONSTRUCTOR.construct_yaml_int(node)
    if _INT64_MIN <= value <= _UINT64_MAX:
        return value
    if _DECIMAL.fullmatch(node.value):
        as_float = float(node.value.replace("_", ""))
        if math.isfinite(as_float):
            return as_float
    return node.value


_SCALARS = {
    _TAG + "str": lambda n: n.value,
    _TAG + "null": lambda n: None,
    _TAG + "bool": lambda n: _CONSTRUCTOR.construct_yaml_bool(n),
    _TAG + "int": _int,
    _TAG + "float": lambda n: _CONSTRUCTOR.construct_yaml_float(n),
    # Go's YAML decoder keeps timestamps as strings when the target is untyped; so do we.
    _TAG + "timestamp": lambda n: n.value,
    _TAG + "binary": lambda n: n.value,
    # PyYAML resolves a lone "=" and "<<" in value position to these; Go reads plain strings.
    _TAG + "value": lambda n: n.value,
    _TAG + "merge": lambda n: n.value,
}


@dataclass(frozen=True)
class Mark:
    """A 1-based line and column in a source file."""

    line: int
    col: int


# What YAML counts as a line break (YAML 1.1, as libyaml's marks do); str.splitlines also
# breaks at \v, \f and \x1c-\x1e, which would put quoted lines out of step with the marks.
_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


@dataclass
class Source:
    """One input file's text, kept so diagnostics can quote the offending line."""

    path: str
    text: str
    _starts: list[int] | None = field(default=None, repr=False)
    _ends: list[int] | None = field(default=None, repr=False)

    def _index(self) -> tuple[list[int], list[int]]:
        if self._starts is None or self._ends is None:
            starts, ends = [0], []
            for m in _BREAK.finditer(self.text):
                ends.append(m.start())
                starts.append(m.end())
            ends.append(len(self.text))
            self._starts, self._ends = starts, ends
        return self._starts, self._ends

    def line(self, n: int) -> str | None:
        """Return line n (1-based) without its line break, or None when out of range."""
        starts, ends = self._index()
        if not 0 < n <= len(starts) or (n == len(starts) and starts[-1] == len(self.text) and n > 1):
            return None
        return self.text[starts[n - 1] : ends[n - 1]]

    def offset(self, mark: Mark) -> int:
        """Character offset of a 1-based line:col mark (clamped to the text)."""
        starts, _ = self._index()
        if mark.line > len(starts):
            return len(self.text)
        return min(starts[max(mark.line, 1) - 1] + max(mark.col, 1) - 1, len(self.text))

    def mark(self, offset: int) -> Mark:
        """The 1-based line:col of a character offset."""
        starts, _ = self._index()
        line = bisect.bisect_right(starts, offset)
        return Mark(line, offset - starts[line - 1] + 1)


@dataclass
class Document:
    """One YAML document: its data and where each value (and each mapping key) sits."""

    source: Source
    index: int  # position of the document in its file, 0-based
    data: Any
    value_marks: dict[PathT, Mark]
    key_marks: dict[PathT, Mark]

    @property
    def path(self) -> str:
        return self.source.path

    def locate(self, path: PathT, *, key: bool = False) -> Mark:
        """Find the mark for a field path, falling back to the nearest existing ancestor.

        `key=True` prefers the mapping key (for unknown fields); a path that does not exist
        (a missing field) resolves to its parent's key, where the user would add it.
        """
        path = tuple(path)
        if key and path in self.key_marks:
            return self.key_marks[path]
        if path in self.value_marks and not key:
            return self.value_marks[path]
        if path in self.key_marks:
            return self.key_marks[path]
        if path in self.value_marks:
            return self.value_marks[path]
        while path:
            path = path[:-1]
            if path in self.key_marks:
                return self.key_marks[path]
            if path in self.value_marks:
                return self.value_marks[path]
        return self.value_marks.get((), Mark(1, 1))

    def locate_text(self, path: PathT, needle: str, nth: int = 0) -> Mark:
        """Find the nth occurrence of `needle` in the source from a value's start (for $(...) refs)."""
        start = self.locate(path)
        text = self.source.text
        offset = self.source.offset(start)
        for _ in range(nth + 1):
            found = text.find(needle, offset)
            if found < 0:
                return start
            hit, offset = found, found + len(needle)
        return self.source.mark(hit)

    def diagnostic_at(self, code: str, message: str, mark: Mark, path: PathT = (), **kw: Any) -> Diagnostic:
        """Build a Diagnostic at an explicit mark (used for positions inside a scalar)."""
        return Diagnostic(
            code=code,
            message=message,
            path=self.source.path,
            line=mark.line,
            col=mark.col,
            field=format_path(path) if path else None,
            source_line=self.source.line(mark.line),
            **kw,
        )

    def diagnostic(self, code: str, message: str, path: PathT = (), *, key: bool = False, **kw: Any) -> Diagnostic:
        """Build a Diagnostic pointing at `path` in this document."""
        return self.diagnostic_at(code, message, self.locate(path, key=key), path, **kw)


def format_path(path: Iterable[str | int]) -> str:
    """Render a field path the way kubectl explain and users write it: spec.replicaSpecs[0].type."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


class _Builder:
    """Converts one composed node tree into plain data, recording marks and problems."""

    def __init__(self, source: Source):
        self.source = source
        self.value_marks: dict[PathT, Mark] = {}
        self.key_marks: dict[PathT, Mark] = {}
        self.problems: list[Diagnostic] = []

    def _problem(self, code: str, message: str, node: Node) -> None:
        line, col = node.start_mark.line + 1, node.start_mark.column + 1
        self.problems.append(
            Diagnostic(code, message, self.source.path, line, col, source_line=self.source.line(line))
        )

    def build(self, node: Node, path: PathT = ()) -> Any:
        self.value_marks[path] = Mark(node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if isinstance(node, SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        self._problem("FJ104", f"unsupported YAML node {type(node).__name__}", node)  # pragma: no cover
        return None

    def _scalar(self, node: ScalarNode) -> Any:
        make = _SCALARS.get(node.tag)
        if make is None:
            self._problem("FJ104", f"unsupported YAML tag {node.tag!r}; Kubernetes accepts plain YAML only", node)
            return node.value
        try:
            return make(node)
        except (ConstructorError, ValueError, KeyError):  # only an explicit tag can fail: !!bool x
            shown = node.value if len(node.value) <= 40 else node.value[:37] + "..."
            self._problem("FJ104", f"{shown!r} is not a valid {node.tag.replace(_TAG, '!!')} value", node)
            return node.value

    def _mapping(self, node: MappingNode, path: PathT) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in self._flatten(node):
            if not isinstance(key_node, ScalarNode):
                self._problem("FJ104", "a mapping key must be a plain scalar, not a list or mapping", key_node)
                continue
            key = key_node.value
            child = (*path, key)
            if key in out:
                first = self.key_marks[child]
                self._problem(
                    "FJ101",
                    f"duplicate key {key!r} (first defined at line {first.line}); Kubernetes rejects duplicate keys",
                    key_node,
                )
                continue
            self.key_marks[child] = Mark(key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = self.build(value_node, child)
        return out

    def _flatten(self, node: MappingNode) -> list[tuple[Node, Node]]:
        """Apply YAML merge keys (`<<: *anchor`), as Go's decoder does; explicit keys win."""
        pairs: list[tuple[Node, Node]] = []
        merged: list[tuple[Node, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _TAG + "merge":
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for src in sources:
                    if isinstance(src, MappingNode):
                        merged.extend(self._flatten(src))
                    else:
                        self._problem("FJ104", "a merge key (<<) must refer to a mapping", src)
            else:
                pairs.append((key_node, value_node))
        explicit = {k.value for k, _ in pairs if isinstance(k, ScalarNode)}
        seen: set[str] = set()
        inherited = []
        for k, v in merged:
            if isinstance(k, ScalarNode) and k.value not in explicit and k.value not in seen:
                seen.add(k.value)
                inherited.append((k, v))
        return inherited + pairs


def parse(text: str, path: str = "<input>") -> tuple[list[Document], list[Diagnostic]]:
    """Parse a YAML stream into documents; syntax errors become diagnostics at their line."""
    source = Source(path, text)
    docs: list[Document] = []
    problems: list[Diagnostic] = []
    try:
        for index, node in enumerate(yaml.compose_all(text, Loader=_Loader)):
            if node is None:
                continue
            builder = _Builder(source)
            data = builder.build(node)
            problems.extend(builder.problems)
            docs.append(Document(source, index, data, builder.value_marks, builder.key_marks))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = exc.problem or "invalid YAML"
        if exc.context:
            what = f"{exc.context}: {what}"
        problems.append(Diagnostic("FJ100", f"YAML syntax error: {what}", path, line, col, source_line=source.line(line)))
    except yaml.reader.ReaderError as exc:  # a character YAML forbids: an offset, no mark
        position = exc.position
        if _Loader is not yaml.SafeLoader:  # libyaml counts UTF-8 bytes, marks count characters
            position = len(text.encode("utf-8")[:position].decode("utf-8", "ignore"))
        line, col = source.mark(position).line, source.mark(position).col
        char = ord(exc.character) if isinstance(exc.character, str) else exc.character
        what = f"unacceptable character #x{char:04x}: {exc.reason}" if isinstance(char, int) else exc.reason
        problems.append(Diagnostic("FJ100", f"YAML syntax error: {what}", path, line, col, source_line=source.line(line)))
    except yaml.YAMLError as exc:
        message = " ".join(str(exc).split())
        problems.append(Diagnostic("FJ100", f"YAML syntax error: {message}", path, 1, 1, source_line=source.line(1)))
    return docs, problems


def read_source(path: Path) -> tuple[str | None, Diagnostic | None]:
    """Read a file as UTF-8 text; failures become an FJ103 diagnostic, never an exception."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        return None, Diagnostic("FJ103", "is a directory", str(path))
    except OSError as exc:
        return None, Diagnostic("FJ103", f"cannot read: {exc.strerror or exc}", str(path))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, _not_utf8(str(path), raw, exc)
    return text, None


def _not_utf8(path: str, raw: bytes, exc: UnicodeDecodeError) -> Diagnostic:
    """FJ103 at the line and column of the first byte that is not UTF-8."""
    bom = 3 if raw.startswith(b"\xef\xbb\xbf") else 0  # utf-8-sig counts from after the BOM
    start = exc.start + bom
    begin = max(raw.rfind(b"\n", 0, start) + 1, bom)
    end = raw.find(b"\n", start)
    line_bytes = raw[begin : end if end >= 0 else len(raw)].rstrip(b"\r")
    col = len(raw[begin:start].decode("utf-8", "replace")) + 1
    return Diagnostic(
        "FJ103", f"not UTF-8 text: byte 0x{raw[start:start + 1].hex()} cannot be decoded (save the file as UTF-8)",
        path, raw.count(b"\n", 0, start) + 1, col, source_line=line_bytes.decode("utf-8", "replace"),
    )


def is_job_candidate(data: Any) -> bool:
    """A document flatjob must check: T9k's API group, or a T9k kind with no apiVersion.

    A T9k kind under a misspelt group (batch.tensorstak.dev) is checked too, so the typo is
    reported instead of the job silently vanishing from a folder scan.
    """
    if not isinstance(data, dict):
        return False
    api = data.get("apiVersion")
    kind_is_t9k = isinstance(data.get("kind"), str) and _looks_like_t9k_kind(data["kind"])
    if isinstance(api, str):
        group = api.split("/", 1)[0]
        return group == T9K_GROUP or (kind_is_t9k and _near_group(group))
    return api is None and kind_is_t9k


def _near_group(group: str) -> bool:
    """Whether an API group is a likely misspelling of T9k's (not flatjob's own records)."""
    import difflib

    return difflib.SequenceMatcher(None, group.lower(), T9K_GROUP).ratio() >= 0.8


def _looks_like_t9k_kind(kind: str) -> bool:
    folded = kind.lower()
    return any(folded == k.lower() for k in T9K_KINDS)


def iter_yaml_files(paths: Iterable[str]) -> Iterator[tuple[Path, bool]]:
    """Yield (file, named_explicitly) for each path; directories are walked in sorted order."""
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.endswith(YAML_SUFFIXES):
                        yield Path(root) / name, False
        else:
            yield p, True


@dataclass
class Loaded:
    """The job documents found under some paths, plus what went wrong reading them."""

    jobs: list[Document] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: list[tuple[Path, str]] = field(default_factory=list)  # every file read, with its text


def load_paths(paths: Iterable[str]) -> Loaded:
    """Load every T9k job document under `paths`; other YAML in a scanned folder is skipped."""
    loaded = Loaded()
    for file, explicit in iter_yaml_files(paths):
        text, problem = read_source(file)
        if problem is not None:
            if explicit or problem.message != "is a directory":
                loaded.diagnostics.append(problem)
            continue
        assert text is not None
        loaded.files.append((file, text))
        docs, problems = parse(text, str(file))
        loaded.diagnostics.extend(problems)
        jobs = [d for d in docs if is_job_candidate(d.data)]
        loaded.jobs.extend(jobs)
        if explicit and not jobs and not any(p.is_error for p in problems):
            loaded.diagnostics.append(
                Diagnostic(
                    "FJ102",
                    "no T9k job in this file (expected apiVersion batch.tensorstack.dev/v1beta1 and a job kind)",
                    str(file),
                    1,
                    1,
                    source_line=Source(str(file), text).line(1),
                )
            )
    return loaded
