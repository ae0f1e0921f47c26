"""Strategic merge of a patch into a job, with T9k's list keys (kubectl's rules otherwise).

- A mapping merges key by key; a key set to null is removed.
- A keyed list (listkeys.py: replicaSpecs by type, containers/env/volumes by name...) merges
  item by item: an item whose key matches is merged into it, a new key is appended.
- Any other list, and any scalar, is replaced.
- `$patch: replace` on a mapping replaces it; `$patch: delete` on a mapping or a keyed list
  item removes it; a `- $patch: replace` item in a keyed list replaces the whole list.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import Diagnostic
from ..loader import PathT
from .listkeys import list_keys, pattern
from .located import Node

DIRECTIVE = "$patch"
DIRECTIVES = ("replace", "delete", "merge")


@dataclass
class Merge:
    """One merge run: the diagnostics it found (errors point at the patch's lines)."""

    problems: list[Diagnostic] = field(default_factory=list)

    def node(self, base: Node | None, patch: Node, path: PathT) -> Node | None:
        """Merge `patch` into `base` at `path`; None means the value is deleted."""
        if isinstance(patch.value, dict):
            return self._mapping(base, patch, path)
        if isinstance(patch.value, list):
            return self._list(base, patch, path)
        return patch

    def _directive(self, patch: Node, path: PathT) -> str:
        d = patch.get(DIRECTIVE)
        if d is None:
            return "merge"
        if d.value not in DIRECTIVES:
            self.problems.append(d.diagnostic("FJ601", f"unknown $patch directive {d.value!r}; use replace or delete", field=path))
            return "merge"
        return str(d.value)

    def _mapping(self, base: Node | None, patch: Node, path: PathT) -> Node | None:
        directive = self._directive(patch, path)
        if directive == "delete":
            return None
        into = base if base is not None and isinstance(base.value, dict) and directive == "merge" else None
        out: dict[str, Node] = dict(into.value) if into is not None else {}
        for key, value in patch.value.items():
            if key == DIRECTIVE:
                continue
            if key.startswith("$"):
                self.problems.append(value.diagnostic("FJ601", f"unsupported patch directive {key!r}; flatjob supports $patch only", key=True, field=(*path, key)))
                continue
            if value.value is None:
                out.pop(key, None)
                continue
            merged = self.node(out.get(key), value, (*path, key))
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        anchor = into if into is not None else patch
        return Node(out, anchor.source, anchor.mark, base.key_mark if base is not None else patch.key_mark)

    def _list(self, base: Node | None, patch: Node, path: PathT) -> Node | None:
        keys = list_keys(pattern(path))
        items = patch.value
        replacing = any(i.get(DIRECTIVE) is not None and i.get(DIRECTIVE).value == "replace" and len(i.value) == 1 for i in items if isinstance(i.value, dict))
        if keys is None or base is None or not isinstance(base.value, list) or replacing:
            return self._fresh(patch, path, keys)
        out = list(base.value)
        for item in items:
            self._item(out, item, keys, path)
        return Node(out, base.source, base.mark, base.key_mark)

    def _fresh(self, patch: Node, path: PathT, keys: tuple[str, ...] | None) -> Node:
        """A list taken from the patch alone (atomic list, new list or `$patch: replace`)."""
        items = [i for i in patch.value if not (isinstance(i.value, dict) and set(i.value) == {DIRECTIVE})]
        out: list[Node] = []
        for item in items:
            if keys is not None and isinstance(item.value, dict):
                merged = self.node(None, item, (*path, len(out)))
                if merged is not None:
                    out.append(merged)
            else:
                out.append(item)
        return Node(out, patch.source, patch.mark, patch.key_mark)

    def _item(self, out: list[Node], item: Node, keys: tuple[str, ...], path: PathT) -> None:
        """Merge one keyed-list item into `out` in place."""
        if not isinstance(item.value, dict):
            self.problems.append(item.diagnostic("FJ601", f"{path[-1]} items are mappings identified by {keys[0]!r}; got a {type(item.value).__name__}", field=path))
            return
        found = list(self._matches(out, item, keys))
        delete = self._directive(item, path) == "delete"
        if found == [] and not any(item.get(k) is not None for k in keys):
            self.problems.append(item.diagnostic("FJ601", f"a {path[-1]} item in a patch needs {keys[0]!r} to say which item it changes", field=path))
            return
        if len(found) > 1:
            key = next(k for k in keys if item.get(k) is not None)
            self.problems.append(item.diagnostic(
                "FJ601", f"{len(found)} {path[-1]} items have {key} {item.get(key).value!r}; the patch cannot tell which to change",
                field=path, hint="use a JSON 6902 patch (op/path/value) to change one of them",
            ))
            return
        if not found:
            if not delete:
                merged = self.node(None, item, (*path, len(out)))
                if merged is not None:
                    out.append(merged)
            return
        index = found[0]
        merged = self.node(out[index], item, (*path, index))
        if merged is None:
            del out[index]
        else:
            out[index] = merged

    @staticmethod
    def _matches(out: list[Node], item: Node, keys: tuple[str, ...]) -> Iterator[int]:
        """Indices of base items with the patch item's key (fallback keys narrow or stand in)."""
        wanted = [(k, item.get(k).value) for k in keys if item.get(k) is not None]
        if not wanted:
            return iter(())
        first_key, first_value = wanted[0]
        hits = [i for i, n in enumerate(out) if isinstance(n.value, dict) and n.get(first_key) is not None and n.get(first_key).value == first_value]
        for k, v in wanted[1:]:
            narrowed = [i for i in hits if out[i].get(k) is not None and out[i].get(k).value == v]
            if len(hits) > 1 and narrowed:
                hits = narrowed
        return iter(hits)


def strategic_merge(base: Node, patch: Node) -> tuple[Node | None, list[Diagnostic]]:
    """Merge a patch (a job-shaped mapping) into a job; returns the result and any problems."""
    run = Merge()
    return run.node(base, patch, ()), run.problems
