"""The pattern tree podspec.spec_values walks finds what each pattern walked alone finds, in
the same order, and podspec._walk (level by level) finds what the recursive generator it
replaced found: so diagnostics neither change nor move."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from propertykit import examples

from flatjob.compiler.validate import podspec

PATTERNS = [tuple(check[0]) if kind == "field" else tuple(check[:-3]) for kind, check in podspec._CHECKS]
LEAVES = st.one_of(st.integers(-5, 70000), st.text(max_size=4), st.none(), st.lists(st.integers(), max_size=2))


def _place(spec: dict[str, Any], pattern: tuple[str, ...], value: Any, draw: Any) -> None:
    """Put value where pattern names, building lists of 1-2 items and choosing a container list."""
    node: Any = spec
    for i, head in enumerate(pattern):
        last = i == len(pattern) - 1
        if head == "*":
            if not isinstance(node, list) or not node:
                return
            node = node[draw(st.integers(0, len(node) - 1))]
            continue
        key = draw(st.sampled_from(["initContainers", "containers"])) if head == podspec.CONTAINERS else head
        if not isinstance(node, dict):
            return
        if last:
            node[key] = value
        else:
            following = pattern[i + 1]
            default: Any = [{} for _ in range(draw(st.integers(1, 2)))] if following == "*" else {}
            node = node.setdefault(key, default)


@st.composite
def specs(draw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for index in draw(st.lists(st.integers(0, len(PATTERNS) - 1), max_size=12)):
        _place(spec, PATTERNS[index], draw(LEAVES), draw)
    return spec


def _recursive_walk(value: Any, pattern: tuple[str, ...], at: tuple[Any, ...]) -> Any:
    """The walk as it was: a generator, depth first."""
    if not pattern:
        yield at, value
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        for i, item in enumerate(value if isinstance(value, list) else []):
            yield from _recursive_walk(item, rest, (*at, i))
    elif head == podspec.CONTAINERS:
        for field in ("initContainers", "containers"):
            yield from _recursive_walk(value.get(field) if isinstance(value, dict) else None, rest, (*at, field))
    elif isinstance(value, dict) and head in value:
        yield from _recursive_walk(value[head], rest, (*at, head))


def _one_by_one(spec: dict[str, Any]) -> list[tuple[int, tuple[Any, ...], Any]]:
    return [(i, path, value) for i, pattern in enumerate(PATTERNS) for path, value in podspec._walk(spec, pattern, ("spec",))]


@settings(max_examples=examples(300), deadline=None)
@given(specs())
def test_the_tree_finds_what_each_pattern_finds_in_the_same_order(spec: dict[str, Any]) -> None:
    found: list[tuple[int, tuple[Any, ...], Any]] = []
    podspec._matches(spec, podspec._TREE, ("spec",), found)
    found.sort(key=lambda m: m[0])
    assert found == _one_by_one(spec)


@settings(max_examples=examples(300), deadline=None)
@given(specs())
def test_the_level_walk_finds_what_the_recursive_walk_found(spec: dict[str, Any]) -> None:
    for pattern in PATTERNS:
        assert podspec._walk(spec, pattern, ("spec",)) == list(_recursive_walk(spec, pattern, ("spec",)))


def test_every_pattern_is_in_the_tree_once() -> None:
    leaves: list[int] = []

    def collect(node: dict[str, Any]) -> None:
        for head, child in node.items():
            if head == podspec._LEAF:
                leaves.extend(child)
            else:
                collect(child)

    collect(podspec._TREE)
    assert sorted(leaves) == list(range(len(PATTERNS)))
