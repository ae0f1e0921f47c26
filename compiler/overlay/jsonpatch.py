"""JSON patches (RFC 6902: add, remove, replace, move, copy, test) applied to a job's Node tree.

For what a strategic merge cannot say: an item of an unkeyed list (`/spec/replicaSpecs/1/...`
works too), inserting at a position, or a test that guards a patch.  Paths are JSON pointers
(RFC 6901, `~1` for `/` and `~0` for `~`); errors point at the operation in the overlay file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..errors import Diagnostic
from .located import Node, plain

OPS = ("add", "remove", "replace", "move", "copy", "test")
_INDEX = re.compile(r"0|[1-9][0-9]*")  # RFC 6901's array-index


class PatchError(Exception):
    """An operation that cannot apply; carries the message shown at the operation's line."""


def pointer(text: str) -> list[str]:
    """The tokens of a JSON pointer ('' is the whole document)."""
    if text == "":
        return []
    if not text.startswith("/"):
        raise PatchError(f"path {text!r} is not a JSON pointer: it must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in text[1:].split("/")]


def _index(token: str, size: int, *, insert: bool) -> int:
    """A list position from a pointer token ('-' appends when inserting)."""
    if insert and token == "-":
        return size
    if _INDEX.fullmatch(token) is None:  # ASCII digits only (str.isdigit takes superscripts and Arabic-Indic digits), no leading zero
        raise PatchError(f"{token!r} is not a list index")
    if len(token) > len(str(size)):
        raise PatchError(f"index {token[:20]}{'...' if len(token) > 20 else ''} is out of range (the list has {size} items)")
    index = int(token)
    if index > size or (index == size and not insert):
        raise PatchError(f"index {index} is out of range (the list has {size} items)")
    return index


def get(node: Node, tokens: list[str]) -> Node:
    """The node at a pointer."""
    for depth, token in enumerate(tokens):
        if isinstance(node.value, dict):
            if token not in node.value:
                raise PatchError(f"/{'/'.join(tokens[: depth + 1])} does not exist")
            node = node.value[token]
        elif isinstance(node.value, list):
            node = node.value[_index(token, len(node.value), insert=False)]
        else:
            raise PatchError(f"/{'/'.join(tokens[:depth])} is a {type(node.value).__name__}, not a mapping or list")
    return node


Change = Callable[[Node, str], Any]


def _edit(node: Node, tokens: list[str], change: Change) -> Node:
    """Copy the path down to the parent of the last token and let `change` edit that parent."""
    if not tokens:
        raise PatchError("the whole document cannot be edited; patch a field")
    if len(tokens) == 1:
        return replace(node, value=change(node, tokens[0]))
    child = get(node, tokens[:1])
    edited = _edit(child, tokens[1:], change)
    if isinstance(node.value, dict):
        return replace(node, value={**node.value, tokens[0]: edited})
    items = list(node.value)
    items[_index(tokens[0], len(items), insert=False)] = edited
    return replace(node, value=items)


def _add(value: Node) -> Change:
    def change(parent: Node, token: str) -> Any:
        if isinstance(parent.value, dict):
            return {**parent.value, token: value}
        if isinstance(parent.value, list):
            items = list(parent.value)
            items.insert(_index(token, len(items), insert=True), value)
            return items
        raise PatchError(f"cannot add {token!r} to a {type(parent.value).__name__}")

    return change


def _remove(parent: Node, token: str) -> Any:
    if isinstance(parent.value, dict):
        if token not in parent.value:
            raise PatchError(f"{token!r} does not exist, so it cannot be removed")
        return {k: v for k, v in parent.value.items() if k != token}
    items = _items(parent, token, "remove")
    del items[_index(token, len(items), insert=False)]
    return items


def _items(parent: Node, token: str, verb: str) -> list[Any]:
    """A copy of the list the pointer's last token indexes; a scalar holds no field (list() of a
    string made its characters items, of a number raised TypeError: exit 3, hx22)."""
    if not isinstance(parent.value, list):
        raise PatchError(f"cannot {verb} {token!r} of a {type(parent.value).__name__}: it holds no fields")
    return list(parent.value)


def _replace(value: Node) -> Change:
    def change(parent: Node, token: str) -> Any:
        if isinstance(parent.value, dict):
            if token not in parent.value:
                raise PatchError(f"{token!r} does not exist; use op: add to create it")
            return {**parent.value, token: replace(value, key_mark=parent.value[token].key_mark)}
        items = _items(parent, token, "replace")
        items[_index(token, len(items), insert=False)] = value
        return items

    return change


def apply_op(root: Node, op: str, path: list[str], value: Node | None, source: list[str] | None) -> Node:
    """One operation; raises PatchError when it cannot apply."""
    if op == "test":
        if value is None or plain(get(root, path)) != plain(value):
            raise PatchError(f"test failed: /{'/'.join(path)} is {plain(get(root, path))!r}")
        return root
    if not path:
        raise PatchError(f"op {op} on the whole document is not allowed; patch a field")
    if op in ("move", "copy"):
        assert source is not None
        if op == "move" and (not source or source == path[: len(source)]) and source != path:  # RFC 6902 4.4
            raise PatchError(f"cannot move /{'/'.join(source)} into itself (/{'/'.join(path)})")
        moved = get(root, source)
        if op == "move":
            root = _edit(root, source, _remove)
        return _edit(root, path, _add(moved))
    if op == "remove":
        return _edit(root, path, _remove)
    assert value is not None
    return _edit(root, path, _add(value) if op == "add" else _replace(value))


def json_patch(root: Node, ops: Node) -> tuple[Node, list[Diagnostic]]:
    """Apply a list of operations in order; the first that fails stops the patch."""
    for entry in ops.value:
        problem = _shape(entry)
        if problem:
            return root, [problem]
        op, where = entry.get("op"), entry.get("path")
        try:
            source = pointer(entry.get("from").value) if op.value in ("move", "copy") else None  # RFC 6902 ignores it elsewhere
            root = apply_op(root, op.value, pointer(where.value), entry.get("value"), source)
        except PatchError as exc:
            return root, [where.diagnostic("FJ601", f"{op.value} {where.value}: {exc}")]
    return root, []


def _shape(entry: Node) -> Diagnostic | None:
    """Why an operation is malformed (missing op, path, value or from), else None."""
    if not isinstance(entry.value, dict):
        return entry.diagnostic("FJ602", "a JSON patch operation is a mapping with op and path")
    op, where = entry.get("op"), entry.get("path")
    if op is None or op.value not in OPS:
        got = f"op {op.value!r}" if op is not None else "no op"
        return (op or entry).diagnostic("FJ602", f"{got}; a JSON patch op is one of {', '.join(OPS)}")
    if where is None or not isinstance(where.value, str):
        return entry.diagnostic("FJ602", f"op {op.value} needs a path (a JSON pointer such as /spec/replicaSpecs/0/replicas)")
    if op.value in ("add", "replace", "test") and "value" not in entry.value:
        return entry.diagnostic("FJ602", f"op {op.value} needs a value")
    if op.value in ("move", "copy") and not isinstance((entry.get("from") or entry).value, str):
        return entry.diagnostic("FJ602", f"op {op.value} needs from (a JSON pointer)")
    return None
