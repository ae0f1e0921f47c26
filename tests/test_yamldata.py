"""YAML to data within the reading limits (compiler/yamldata.py, compiler/limits.py), in process.

Covers: aliases are copies whose marks point at the anchor; `<<` merges as Go's decoder
applies them (explicit keys win, the first source wins, a source's own merges first);
recursive aliases, merge sources that are not mappings, tags on collections and explicit
tags whose value is empty are FJ104, never an exception; each limit (file nodes counting
expansions, run nodes, depth, file bytes, run bytes) stops at the line:col where it was
crossed, before the objects it asks for exist; the limits are far above the real corpus;
the parse of every real spec is the same data as PyYAML's safe_load.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import corpus_files, corpus_params

from flatjob.compiler.limits import Budget, Limits
from flatjob.compiler.loader import parse
from flatjob.compiler.reading import read_text


def one(text: str, limits: Limits | None = None) -> tuple[object, list[tuple[int, int, str]]]:
    docs, problems = parse(text, "t.yaml", Budget(limits) if limits else None)
    return (docs[0].data if docs else None), [(p.line, p.col, p.code) for p in problems]


def test_an_alias_is_a_copy_marked_at_its_anchor() -> None:
    docs, _ = parse("a: &x {b: 1}\nc: *x\n")
    data = docs[0].data
    assert data == {"a": {"b": 1}, "c": {"b": 1}} and data["a"] is not data["c"]
    assert docs[0].value_marks[("c", "b")] == (1, 11) and docs[0].key_marks[("c", "b")] == (1, 8)


def test_merges_as_go_applies_them() -> None:
    text = "base: &b {x: 1, y: 2}\nmid: &m {<<: *b, x: 3}\nother: &o {y: 9, z: 9}\nm:\n  <<: [*m, *o]\n  z: 0\n"
    data, problems = one(text)
    assert problems == []
    assert data["mid"] == {"y": 2, "x": 3}  # explicit keys win
    assert data["m"] == {"x": 3, "y": 2, "z": 0}  # first source wins; explicit wins over all
    assert list(data["m"]) == ["y", "x", "z"]  # merged keys first (mid's own merge first), then its own


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("a: &a [1, *a]\n", [(1, 11, "FJ104")]),
        ("a: &a {<<: *a}\n", [(1, 12, "FJ104")]),
        ("a: &s 1\nb: {<<: *s}\n", [(1, 4, "FJ104")]),
        ("a: !custom {b: 1}\n", [(1, 4, "FJ104")]),
        ("a: !!set {b}\n", [(1, 4, "FJ104")]),
        ("a: !!omap [b]\n", [(1, 4, "FJ104")]),
        ('a: !!int ""\n', [(1, 4, "FJ104")]),
        ('a: !!float ""\n', [(1, 4, "FJ104")]),
        ("a: *nowhere\n", [(1, 4, "FJ100")]),
        ("a: &x 1\nb: &x 2\n", [(2, 4, "FJ100")]),
        ("? [k]\n: v\nb: 1\n", [(1, 3, "FJ104")]),
        ("a: 1\na: 2\n", [(2, 1, "FJ101")]),
        # hx17: go-yaml v2 (kubectl) lets the last of two merges win, go-yaml v3 refuses them
        ("a: &a {x: 1}\nb: &b {x: 2}\nc:\n  <<: *a\n  <<: *b\n", [(5, 3, "FJ101")]),
        ("a: &a {x: 1}\nc: {<<: *a, !!merge <<: {x: 2}}\n", [(2, 13, "FJ101")]),
        ("a: &a {x: 1}\nc: {<<: {<<: *a, <<: {x: 2}}}\n", [(2, 18, "FJ101")]),
        # hx17: kubectl's go-yaml v2 refuses every %YAML but 1.1 ('found incompatible YAML document')
        ("%YAML 1.2\n---\na: yes\n", [(1, 1, "FJ104")]),
        ("a: 1\n...\n%YAML 1.2\n---\nb: on\n", [(3, 1, "FJ104")]),
    ],
    ids=["recursive-alias", "recursive-merge", "merge-of-a-scalar", "local-tag-on-map", "set", "omap", "empty-int", "empty-float", "undefined-alias", "anchor-twice", "complex-key", "duplicate-key", "two-merge-keys", "two-merge-keys-one-tagged", "two-merge-keys-in-an-inline-source", "yaml-1.2", "yaml-1.2-second-document"],
)
def test_what_kubernetes_cannot_hold_is_a_diagnostic(text: str, found: list[tuple[int, int, str]]) -> None:
    assert one(text)[1] == found


def test_a_yaml_1_1_directive_is_what_flatjob_reads() -> None:
    assert one("%YAML 1.1\n---\na: yes\n") == ({"a": True}, [])


SMALL = Limits(file_bytes=200, run_bytes=300, file_nodes=40, run_nodes=60, depth=5)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a: [[[[[1]]]]]\n", (1, 8)),  # the 6th level opens at column 8
        ("a: &x [1, 2, 3, 4, 5, 6, 7, 8, 9]\nb: [*x, *x, *x, *x]\n", (2, 13)),  # the alias that would pass 40
        ("a: &x {k: 1, l: 2, m: 3, n: 4, o: 5}\nb: {<<: *x}\nc: {<<: *x}\nd: {<<: *x}\ne: {<<: [*x, *x]}\n", None),
        ("[" + "1, " * 50 + "1]\n", (1, 119)),  # the 40th item is the 41st node
    ],
    ids=["depth", "alias-fan-out", "merges", "flow-list"],
)
def test_each_limit_stops_where_it_is_crossed(text: str, where: tuple[int, int] | None) -> None:
    data, found = one(text, SMALL)
    assert data is None and [f[2] for f in found] == ["FJ105"]
    if where is not None:
        assert found[0][:2] == where


def test_the_yaml_librarys_own_nesting_limit_is_fj105(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whichever limit stops a deep file first, flatjob's or the YAML library's (libyaml in
    PyYAML 6.0.4 gives up at 1000 levels while scanning ahead), it is FJ105 at the library's
    mark: the same code on every PyYAML version the project allows."""
    from flatjob.compiler import yamldata

    class Deep(yamldata._Loader):  # type: ignore[misc,valid-type]
        def get_event(self) -> object:
            mark = yaml.Mark("<input>", 0, 0, 6, None, None)
            raise yaml.scanner.ScannerError("while increasing flow level", None, "exceeded maximum nesting depth", mark)

    monkeypatch.setattr(yamldata, "_Loader", Deep)
    data, found = one("a: 1\n", SMALL)
    assert data is None and found == [(1, 7, "FJ105")]


def test_the_run_budget_is_shared_by_files() -> None:
    budget = Budget(SMALL)
    text = "[" + "1, " * 24 + "1]\n"  # 26 nodes
    assert parse(text, "a.yaml", budget)[1] == [] and parse(text, "b.yaml", budget)[1] == []
    assert [p.code for p in parse(text, "c.yaml", budget)[1]] == ["FJ105"]  # 78 > 60


def test_file_bytes_stop_at_the_position(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("a: 1\n" * 100)
    text, problem = read_text(path, Budget(SMALL))
    assert text is None and problem is not None and (problem.line, problem.col, problem.code) == (41, 1, "FJ105")
    budget = Budget(SMALL)
    small = tmp_path / "small.yaml"
    small.write_text("a: 1\n" * 30)  # 150 bytes: each fits the file limit, two fill the run's 300
    assert read_text(small, budget)[1] is None and read_text(small, budget)[1] is None
    problem = read_text(small, budget)[1]
    assert problem is not None and problem.code == "FJ105" and budget.bytes == 0


@pytest.mark.parametrize("path", corpus_params(corpus_files("t9k")), ids=lambda p: p.name)
def test_real_specs_read_as_pyyaml_reads_them_far_below_the_limits(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    budget = Budget()
    docs, problems = parse(text, path.name, budget)
    assert problems == []
    assert [d.data for d in docs] == list(yaml.safe_load_all(text))
    assert budget.limits.run_nodes - budget.nodes < budget.limits.file_nodes // 100


@pytest.mark.parametrize(("text", "value"), [
    ("replicas: 1:20\n", "1:20"),  # PyYAML's YAML 1.1 base 60: 80 pods where T9k reads a string (review 21, round 3)
    ("t: -1:30:00\n", "-1:30:00"),
    ("f: 1:20.5\n", "1:20.5"),
    ("n: 1_000\n", 1000),  # go-yaml v2 drops '_' too
    ("n: 0x10\n", 16),
])
def test_numbers_are_what_gos_yaml_decoder_reads(text: str, value: object) -> None:
    data, problems = one(text)
    assert problems == [] and list(data.values()) == [value]
