"""Overlay patches a stranger writes: JSON patch pointers, `from`, target expressions, and a
bounded fuzz of JSON patch operations (review 21, round 10: each of these gave exit 3, or
patched another list item than it named)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from propertykit import examples

from .kit import JOB, Sandbox, assert_clean_exit

# kit.JOB with a master before its workers: list index 1 is the worker type
_WORKER = JOB[JOB.index("    - type: worker"):]
TWO_TYPES = JOB.replace(_WORKER, _WORKER.replace("type: worker", "type: master").replace("replicas: 2", "replicas: 1") + _WORKER)


def _overlay(box: Sandbox, text: str) -> None:
    folder = box.repo / "overlays" / "prod"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "overlay.yaml").write_text(text, encoding="utf-8")


def _compile_and_plugin(box: Sandbox) -> list:
    box.freeze()
    runs = [box.compile("--overlay", "overlays/prod"), box.plugin(SOURCES="jobs", OVERLAY="overlays/prod")]
    for r in runs:
        assert_clean_exit(r, 1)
        assert any(code in ("FJ601", "FJ602") for code in r.codes()), r.output[-2000:]
    assert box.untouched()
    return runs


JSON_OPS = {
    # a pointer token that str.isdigit() takes but int() refuses
    "superscript-index": '{op: replace, path: "/spec/replicaSpecs/\u00b2", value: 3}',
    # a list index of more than 4 300 digits: int() refuses it (sys.int_info.str_digits_check_threshold)
    "5000-digit-index": '{op: replace, path: "/spec/replicaSpecs/' + "9" * 5000 + '", value: 3}',
    # `from` on an op that does not read it (RFC 6902 ignores it), not a string
    # hx22: a last token under a scalar: remove and replace copied the parent with list(), so a
    # number raised TypeError and a string became a list of its characters (exit 3 either way)
    "remove-under-a-number": "{op: remove, path: /spec/replicaSpecs/0/replicas/-}",
    "remove-under-a-string": "{op: remove, path: /spec/replicaSpecs/0/type/0}",
    "replace-under-a-string": "{op: replace, path: /metadata/name/0, value: x}",
    "replace-under-null": "{op: replace, path: /spec/replicaSpecs/0/template/metadata/0, value: x}",
}
# `from` on an op that does not read it, not a string: RFC 6902 ignores it (exit 3 before)
IGNORED_FROM = {
    "add-with-from-null": "{op: add, path: /metadata/labels, value: {a: b}, from: null}",
    "replace-with-from-int": "{op: replace, path: /spec/replicaSpecs/0/replicas, value: 3, from: 5}",
}


@pytest.mark.parametrize("op", list(JSON_OPS.values()), ids=list(JSON_OPS))
def test_json_patch_pointer_odd_tokens_are_diagnostics_not_crashes(box: Sandbox, op: str) -> None:
    box.job("a")
    _overlay(box, f"patches:\n  - target: {{kind: PyTorchTrainingJob}}\n    patch:\n      - {op}\n")
    _compile_and_plugin(box)


@pytest.mark.parametrize("op", list(IGNORED_FROM.values()), ids=list(IGNORED_FROM))
def test_json_patch_from_on_an_op_that_does_not_read_it_is_ignored(box: Sandbox, op: str) -> None:
    box.job("a")
    _overlay(box, f"patches:\n  - target: {{kind: PyTorchTrainingJob}}\n    patch:\n      - {op}\n")
    box.freeze()
    for r in (box.compile("--overlay", "overlays/prod"), box.plugin(SOURCES="jobs", OVERLAY="overlays/prod")):
        assert_clean_exit(r, 0)


def test_json_pointer_index_is_ascii_digits_only(box: Sandbox) -> None:
    """RFC 6901: an array index is ASCII digits. `\u0661` (ARABIC-INDIC DIGIT ONE) silently patches item 1."""
    box.job("a", TWO_TYPES.format(name="a"))
    _overlay(box, 'patches:\n  - target: {kind: PyTorchTrainingJob}\n    patch:\n      - {op: replace, path: "/spec/replicaSpecs/\u0661/replicas", value: 7}\n')
    box.freeze()
    r = box.compile("--overlay", "overlays/prod")
    assert_clean_exit(r, 1)  # exit 0 before: worker replicas 7
    assert "FJ601" in r.codes(), r.output[-2000:]


TARGETS = {
    "repeat-count-over-int32": '"a{4294967296}"',
    "repeat-count-huge": '"a{99999999999999999999}"',
    "nested-1500-groups": '"' + "(" * 1500 + "a" + ")" * 1500 + '"',
}


@pytest.mark.parametrize("name", list(TARGETS.values()), ids=list(TARGETS))
def test_target_expression_re_cannot_compile_is_a_diagnostic(box: Sandbox, name: str) -> None:
    box.job("a")
    _overlay(box, f"patches:\n  - target: {{name: {name}}}\n    patch: [{{op: replace, path: /spec/replicaSpecs/0/replicas, value: 3}}]\n")
    runs = _compile_and_plugin(box)
    for r in runs:
        assert any(f[:2] == ("overlay.yaml", 2) and f[3:] == ("error", "FJ602") for f in r.findings()), r.output[-2000:]


# "replicas", "type", "name": fields that hold a scalar, so a pointer can go on below one (hx22)
_TOKENS = st.sampled_from(["spec", "replicaSpecs", "0", "1", "-", "template", "metadata", "labels", "replicas", "type", "name", "\u00b2", "\u0661", "00", "~1", ""])
_POINTER = st.lists(_TOKENS, max_size=5).map(lambda t: "/" + "/".join(t) if t else "")
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "/spec"]), _POINTER)
_OP = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]), "path": _POINTER},
    optional={"value": _SCALAR, "from": _SCALAR},
)


@settings(max_examples=examples(300), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(_OP, min_size=1, max_size=3))
def test_fuzz_json_patches_never_raise(tmp_path_factory: pytest.TempPathFactory, ops: list) -> None:
    from flatjob.compiler.overlay import load_overlays
    from flatjob.compiler.pipeline import compile_paths

    root = tmp_path_factory.mktemp("fz")
    (root / "jobs").mkdir()
    (root / "jobs" / "a.yaml").write_text(TWO_TYPES.format(name="a"))
    (root / "ov").mkdir()
    (root / "ov" / "overlay.yaml").write_text(json.dumps({"patches": [{"target": {"kind": "PyTorchTrainingJob"}, "patch": ops}]}))
    cwd = os.getcwd()
    os.chdir(root)
    try:
        compile_paths(["jobs"], None, load_overlays(["ov"]))  # must return diagnostics, never raise
    finally:
        os.chdir(cwd)


# A JSON patch `move` from the whole document ('') or into itself (review of round 12: RecursionError).
@pytest.mark.parametrize(("source", "path"), [("", "/spec/x"), ("", "/"), ("", "/metadata/labels/a"), ("/spec", "/spec/x")])
def test_json_patch_move_from_the_root_or_into_itself_is_a_diagnostic(box: Sandbox, source: str, path: str) -> None:
    box.job()
    folder = box.repo / "overlays" / "prod"
    folder.mkdir(parents=True)
    (folder / "overlay.yaml").write_text(
        "patches:\n  - target: {kind: PyTorchTrainingJob}\n    patch:\n"
        f"      - {{op: move, from: '{source}', path: '{path}'}}\n"
    )
    box.freeze()
    for run_ in (box.compile("--overlay", "overlays/prod"), box.plugin(SOURCES="jobs", OVERLAY="overlays/prod")):
        assert_clean_exit(run_, 1)
        assert any(f[0] == "overlay.yaml" and f[4] in ("FJ601", "FJ602") for f in run_.findings()), run_.output[-1500:]
    assert box.untouched() and not box.out.exists()
