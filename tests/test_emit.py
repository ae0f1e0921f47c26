"""flatjob.compiler.emit: the YAML that lands in git.

Covers:
- round trips of arbitrary trees through PyYAML (libyaml and pure SafeLoader, YAML 1.1) and
  ruamel.yaml (pure and C safe loaders, YAML 1.2), with every string the quoting rule must catch;
- which strings stay plain, which are quoted, and literal blocks with the right chomping;
- key order (priority keys, then code points), independence from insertion order and hash seed;
- the exact layout of a small Pod, so style regressions show as a failing diff;
- TypeError and ValueError naming the path of the offending node.
"""

from __future__ import annotations

import copy
import enum
import math
import os
import subprocess
import sys
import textwrap
from collections import OrderedDict
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from propertykit import examples
from ruamel.yaml import YAML

from flatjob.compiler.emit import PRIORITY_KEYS, dump, dump_all

try:
    import _ruamel_yaml  # noqa: F401  (ruamel.yaml's C extension)

    HAVE_RUAMEL_C = True
except ImportError:
    HAVE_RUAMEL_C = False


def _loaders() -> dict[str, tuple[Any, Any]]:
    """Return name -> (load one, load all) for every YAML reader available here."""
    loaders = {
        "pyyaml-py": (
            lambda s: yaml.load(s, Loader=yaml.SafeLoader),
            lambda s: list(yaml.load_all(s, Loader=yaml.SafeLoader)),
        ),
    }
    if yaml.__with_libyaml__:
        loaders["pyyaml-c"] = (
            lambda s: yaml.load(s, Loader=yaml.CSafeLoader),
            lambda s: list(yaml.load_all(s, Loader=yaml.CSafeLoader)),
        )
    flavours = {"ruamel-py": YAML(typ="safe", pure=True)}
    if HAVE_RUAMEL_C:
        flavours["ruamel-c"] = YAML(typ="safe")
    for name, y in flavours.items():
        loaders[name] = (y.load, lambda s, y=y: list(y.load_all(s)))
    return loaders


LOADERS = _loaders()


def same(a: Any, b: Any) -> bool:
    """Compare trees strictly: equal values and identical types (1 is not 1.0, not True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def assert_round_trips(obj: Any) -> str:
    """Dump ``obj`` and check that every loader reads back the same tree; return the text."""
    text = dump(obj)
    assert text.endswith("\n")
    for name, (load, _) in LOADERS.items():
        back = load(text)
        assert same(back, obj), f"{name} read back {back!r}\nfrom:\n{text}"
    return text


# --- strategies -------------------------------------------------------------------------------

NASTY = [
    "yes", "No", "on", "OFF", "y", "n", "Y", "N", "~", "null", "Null", "NULL", "true", "False",
    "0o12", "012", "0x1f", "0b101", "1e3", "1E+3", "1_000", "1:20", "-1:20", "190:20:30.15",
    ".inf", "-.inf", "+.INF", ".NaN", "nan", "1.", ".5", "-_1", "+_", "+", "-0", "0", "1.13.1",
    "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5",
    "-", "--", "---", "---x", "...", "- x", "-x", "a: b", "a:b", "a #b", "a#b", "#x",
    " lead", "trail ", "", " ", "\t", "a\tb", "multi\nline", "multi\nline\n", "multi\nline\n\n",
    "\nleading newline", "  indented\nblock", "\tindented\nblock", "\n", "\n\n", "a\r\nb",
    "café", "\u2028", "a\u2029b", "\x85", "\ufeff", "\ufeffa", "\x00", "\x7f", "\x9f", "\ufffe",
    "emoji 🙂", "中文\n注释\n", "\u00a0", "a\u00a0", "\u3000x\u3000", "=", "<<", "<<x",
    "!tag", "&a", "*a", "%x", "@x", "`x", "|", ">", "|x", ">-", "[x]", "{x}", "?", "? x", "?x",
    ",x", ":x", "key:", "'q'", '"dq"', "a'b", 'a"b', "a\\b", "ends\\", "\\", "\\n",
    "x" * 5000, "a: b " * 300, "word " * 400 + "end", "line\n" * 300, "中" * 1200,
    "trailing \nspaces \n", "a\n \nb", "a\n  ", " \n ", "x\n\t\ty\n", "|\n>\n", "a\n---\nb",
    "a\n...\n", "#!/bin/bash\nset -e\n",
]  # fmt: skip

# Characters that collide with YAML syntax, so random strings hit the quoting rule often.
YAML_ALPHABET = (
    "-?:,[]{}#&*!|>'\"%@`~=<. \t\n\r\\_+0123456789eExXoObBaFyYnNtTuUlL\x85\u2028\ufeff中"
)

strings = st.one_of(
    st.sampled_from(NASTY),
    st.text(st.characters(exclude_categories=("Cs",))),
    st.text(YAML_ALPHABET, max_size=12),
    st.from_regex(r"[-+]?[0-9_.:a-fA-FxXoObB+-]{1,10}", fullmatch=True),
)
scalars = st.one_of(
    strings,
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)
trees = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(strings, children, max_size=4)
    ),
    max_leaves=12,
)

PROPERTY = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=examples(400),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- round trips ------------------------------------------------------------------------------


def _string_examples(test: Any) -> Any:
    """Decorate ``test`` with an explicit example for every string in NASTY."""
    for s in reversed(NASTY):
        test = example(s)(test)
    return test


@PROPERTY
@given(strings)
@_string_examples
def test_any_string_round_trips_as_value_key_item_and_document(s: str) -> None:
    assert_round_trips(s)
    assert_round_trips({"k": s, s: [s, {s: s}], "nested": {"list": [[s], s]}})
    assert_round_trips([s, [s], {"a": s}])


@PROPERTY
@given(trees)
def test_any_tree_round_trips(tree: Any) -> None:
    assert_round_trips(tree)


@settings(PROPERTY, max_examples=examples(150))  # each example is up to four trees
@given(st.lists(trees, max_size=4))
def test_any_stream_round_trips(docs: list[Any]) -> None:
    text = dump_all(docs)
    for name, (_, load_all) in LOADERS.items():
        back = load_all(text)
        assert same(back, docs), f"{name} read back {back!r}\nfrom:\n{text}"


@pytest.mark.parametrize(
    "f", [0.0, -0.0, 0.1, 1.5, -2.25, 1e-05, 1e16, 1e300, 5e-324, 1.7976931348623157e308, 3.0]
)
def test_floats_round_trip_under_both_schemas(f: float) -> None:
    text = assert_round_trips({"f": f})
    assert "e" not in text or "." in text  # YAML 1.1 needs a dot before the exponent


def test_long_keys_use_the_explicit_form() -> None:
    key = "k" * 1100
    text = assert_round_trips({"a": 1, key: {"b": [1, 2]}, "z": [key, {key: "v"}]})
    assert f"? {key}\n: b:" not in text  # the value sits on the ':' line at the key's indent
    assert f"? {key}\n:\n  b:\n" in text
    assert f"- ? {key}\n  : v\n" in text


# --- the quoting rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "s",
    [
        "nvcr.io/nvidia/pytorch:24.01-py3", "--nnodes=2", "--rdzv-endpoint=$(MASTER_ADDR):29500",
        "64Gi", "500m", "IfNotPresent", "app.kubernetes.io/name", "/workspace/.cache", "train.py",
        "http://example.com/a#frag", "a,b", "a[0]", "x: y".replace(": ", ":"), "中文注释", "emoji 🙂",
        "café", "a\\b", "ends\\", "-x", "+", "~user", "key=value", "1.2.3-rc1", "v1", "yes-no",
        "996eafde49d47287", "3f2a9c1be07d", "12ab", "1e3x", "_x", "__init__", "0xg",
    ],
)  # fmt: skip
def test_strings_every_reader_agrees_on_stay_plain(s: str) -> None:
    assert dump({"v": s}) == f"v: {s}\n"


@pytest.mark.parametrize(
    "s",
    [
        "yes", "No", "on", "OFF", "y", "n", "~", "null", "Null", "true", "0o12", "012", "0x1f",
        "1e3", "1_000", "1:20", ".inf", "-.inf", ".NaN", "2001-12-14", "-", "- x", "a: b", "a #b",
        "#x", " lead", "trail ", "", "=", "<<", "!tag", "&a", "*a", "%x", "@x", "`x", "[x]", "{x}",
        "?", "? x", ",x", "key:", "'q'", "0", "8", "-1", "1.5", "---", "...", "\u00a0",
        # legal plain in block context, but quoted to stay clear of every reader's edge cases:
        ":x", "?x", "Yes", "yEs", "inf", "NaN", "1.13.1", "---x", "...x", "2001-12-14 at noon",
    ],
)  # fmt: skip
def test_strings_a_reader_could_misread_are_double_quoted(s: str) -> None:
    text = dump({"v": s})
    assert text.startswith('v: "') and text.endswith('"\n'), text
    assert_round_trips({"v": s})


@pytest.mark.parametrize(
    ("s", "quoted"),
    [
        ('"dq"', r'"\"dq\""'),
        ("\t", r'"\t"'),
        ("\x00", r'"\u0000"'),
        ("\x7f", r'"\u007f"'),
        ("\x85", r'"\u0085"'),
        ("\u2028", r'"\u2028"'),
        ("\ufeff", r'"\ufeff"'),
        ("a\r\nb", r'"a\r\nb"'),
        ("中文\x01", '"中文\\u0001"'),
    ],
)
def test_double_quotes_escape_what_yaml_forbids_and_keep_other_text(s: str, quoted: str) -> None:
    assert dump(s) == quoted + "\n"


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("multi\nline", "v: |-\n  multi\n  line\n"),
        ("multi\nline\n", "v: |\n  multi\n  line\n"),
        ("multi\nline\n\n", "v: |+\n  multi\n  line\n\n"),
        ("\nleading newline", "v: |2-\n\n  leading newline\n"),
        ("  indented\nblock", "v: |2-\n    indented\n  block\n"),
        ("a\n\nb\n", "v: |\n  a\n\n  b\n"),
        ("\n", 'v: "\\n"\n'),
        ("a\r\nb\n", 'v: "a\\r\\nb\\n"\n'),
        ("a\u2028\nb", 'v: "a\\u2028\\nb"\n'),
    ],
)
def test_multi_line_strings_use_literal_blocks_with_the_right_chomping(
    s: str, expected: str
) -> None:
    assert dump({"v": s}) == expected
    assert_round_trips({"v": s})


def test_block_scalars_indent_under_list_items_and_at_top_level() -> None:
    script = "#!/bin/sh\nset -e\n  indented\n"
    text = assert_round_trips({"c": [{"args": ["-c", script]}], "top": [script]})
    assert text == (
        "c:\n- args:\n  - -c\n  - |\n    #!/bin/sh\n    set -e\n      indented\n"
        "top:\n- |\n  #!/bin/sh\n  set -e\n    indented\n"
    )
    assert dump(script) == "|\n  #!/bin/sh\n  set -e\n    indented\n"


@pytest.mark.parametrize("s", ["x" * 3000, "a: b " * 600, "word " * 700, "中" * 3000])
def test_long_strings_are_never_folded_or_wrapped(s: str) -> None:
    text = assert_round_trips({"v": s})
    assert text.count("\n") == 1
    assert not text.startswith("v: >")


# --- key order and determinism ----------------------------------------------------------------


def test_priority_keys_lead_then_code_point_order() -> None:
    d = {
        "zeta": 1, "spec": 2, "Alpha": 3, "name": 4, "_x": 5, "namespace": 6, "metadata": 7,
        "kind": 8, "apiVersion": 9, "étoile": 10, "beta": 11,
    }  # fmt: skip
    keys = [line.split(":")[0] for line in dump(d).splitlines()]
    assert keys == [*PRIORITY_KEYS, "Alpha", "_x", "beta", "zeta", "étoile"]


def _reversed_insertion(tree: Any) -> Any:
    """Rebuild ``tree`` with every dict's insertion order reversed."""
    if isinstance(tree, dict):
        return {k: _reversed_insertion(tree[k]) for k in reversed(list(tree))}
    if isinstance(tree, list):
        return [_reversed_insertion(x) for x in tree]
    return tree


@PROPERTY
@given(trees)
def test_output_ignores_insertion_order(tree: Any) -> None:
    assert dump(_reversed_insertion(tree)) == dump(tree)


collections = st.one_of(
    st.lists(trees, min_size=1, max_size=4), st.dictionaries(strings, trees, min_size=1, max_size=4)
)


@pytest.mark.slow  # 150 examples of four trees each (3 s): run by .ci/run after the README command
@PROPERTY
@given(collections, st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_a_subtree_shared_at_several_depths_is_written_as_if_copied(
    shared: Any, depths: list[int]
) -> None:
    """The emitter copies the text of a subtree it meets again; that must equal writing it anew."""
    doc: list[Any] = []
    for i, depth in enumerate(depths):
        node: Any = shared  # the same object, nested `depth` levels deep, under list and map
        for level in range(depth):
            node = {"k": node, "multi": "a\nb\n"} if (i + level) % 2 else [node, "x"]
        doc.append(node)
    doc.append(shared)
    expected = dump_all([copy.deepcopy(doc), copy.deepcopy(shared)])
    assert dump_all([doc, shared]) == expected
    assert dump(doc) == dump(copy.deepcopy(doc))


HASH_SEED_SCRIPT = textwrap.dedent(
    """
    import sys
    from flatjob.compiler.emit import dump_all
    words = {f"key-{i}" for i in range(200)} | {"name", "spec", "zz", "é", "中"}
    doc = {w: {x: len(x) for x in words} for w in words}  # set order follows the seed
    sys.stdout.write(dump_all([doc, sorted(words)]))
    """
)


def test_output_is_byte_identical_across_hash_seeds() -> None:
    outputs = []
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join(sys.path)}
        run = subprocess.run(
            [sys.executable, "-c", HASH_SEED_SCRIPT], env=env, capture_output=True, check=True
        )
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0].startswith(b"name:\n  name: ")


# --- exact layout -----------------------------------------------------------------------------

POD = {
    "spec": {
        "volumes": [
            {"name": "dshm", "emptyDir": {}},
            {"name": "hostfile", "configMap": {"name": "demo-hostfile", "items": []}},
        ],
        "schedulingGates": [{"name": "flatjob.dev/release"}],
        "containers": [
            {
                "resources": {"limits": {"nvidia.com/gpu": 8, "cpu": "16", "memory": "64Gi"}},
                "name": "worker",
                "image": "nvcr.io/nvidia/pytorch:24.01-py3",
                "command": ["torchrun", "--nnodes=2", "--rdzv-id=demo", "train.py"],
                "args": ["-c", "echo start\ntorchrun train.py\n"],
                "env": [
                    {"value": "0", "name": "RANK"},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "NOTE", "value": "训练任务"},
                ],
                "tty": False,
                "workingDir": None,
            }
        ],
        "hostname": "demo-worker-0",
        "restartPolicy": "Never",
    },
    "metadata": {
        "labels": {"app.kubernetes.io/name": "flatjob", "flatjob.dev/rank": "0"},
        "namespace": "team",
        "name": "demo-worker-0",
        "annotations": {"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"},
    },
    "kind": "Pod",
    "apiVersion": "v1",
}

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: demo-worker-0
  namespace: team
  annotations:
    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent
  labels:
    app.kubernetes.io/name: flatjob
    flatjob.dev/rank: "0"
spec:
  containers:
  - name: worker
    args:
    - -c
    - |
      echo start
      torchrun train.py
    command:
    - torchrun
    - --nnodes=2
    - --rdzv-id=demo
    - train.py
    env:
    - name: RANK
      value: "0"
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: NOTE
      value: 训练任务
    image: nvcr.io/nvidia/pytorch:24.01-py3
    resources:
      limits:
        cpu: "16"
        memory: 64Gi
        nvidia.com/gpu: 8
    tty: false
    workingDir: null
  hostname: demo-worker-0
  restartPolicy: Never
  schedulingGates:
  - name: flatjob.dev/release
  volumes:
  - name: dshm
    emptyDir: {}
  - name: hostfile
    configMap:
      name: demo-hostfile
      items: []
"""


def test_pod_layout_is_exactly_kubectl_style() -> None:
    assert dump(POD) == POD_YAML
    assert_round_trips(POD)


def test_stream_separates_documents_without_leading_or_trailing_marker() -> None:
    assert dump_all([]) == ""
    assert dump_all([{"a": 1}]) == "a: 1\n"
    assert dump_all([{"a": 1}, [], "x\n", None]) == "a: 1\n---\n[]\n---\n|\n  x\n---\nnull\n"
    assert dump_all(iter([POD, POD])) == f"{POD_YAML}---\n{POD_YAML}"


def test_nested_lists_and_empty_collections() -> None:
    tree = {"a": [[1, [2, 3]], [], {}, [{}], {"b": []}], "c": {}, "d": []}
    expected = "a:\n- - 1\n  - - 2\n    - 3\n- []\n- {}\n- - {}\n- b: []\nc: {}\nd: []\n"
    assert dump(tree) == expected
    assert_round_trips(tree)
    assert dump({}) == "{}\n"
    assert dump([]) == "[]\n"


class Phase(str, enum.Enum):
    """A str-valued Enum, as a model layer might hand over."""

    RUNNING = "Running"


class Port(enum.IntEnum):
    """An int-valued Enum."""

    SSH = 22


def test_subclasses_of_plain_types_are_written_as_their_base_type() -> None:
    tree = OrderedDict([("phase", Phase.RUNNING), ("ports", [Port.SSH]), (Phase.RUNNING, "k")])
    assert dump(tree) == dump({"phase": "Running", "ports": [22], "Running": "k"})
    assert dump(Phase.RUNNING) == "Running\n"
    assert dump([OrderedDict(a=1)]) == "- a: 1\n"


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tree", "path", "what"),
    [
        ({1: "a"}, "$", "mapping key 1 is int"),
        ({"metadata": {"labels": {None: "x"}}}, "$.metadata.labels", "mapping key None"),
        ({"spec": {"containers": [{"name": "a", "ports": (1, 2)}]}},
         "$.spec.containers[0].ports", "tuple"),
        ({"a": [1, 2, {3}]}, "$.a[2]", "set"),
        ({"metadata": {"labels": {"app.kubernetes.io/name": b"x"}}},
         '$.metadata.labels["app.kubernetes.io/name"]', "bytes"),
        ([[object()]], "$[0][0]", "object"),
        ({"a": OrderedDict(b=[1, (2,)])}, "$.a.b[1]", "tuple"),
        (Phase, "$", "EnumType"),
    ],
)  # fmt: skip
def test_unsupported_types_and_keys_raise_type_error_naming_the_path(
    tree: Any, path: str, what: str
) -> None:
    with pytest.raises(TypeError) as err:
        dump(tree)
    assert f"at {path})" in str(err.value)
    assert what in str(err.value)


@pytest.mark.parametrize(
    ("tree", "path"),
    [
        ({"a": {"b": math.nan}}, "$.a.b"),
        ({"a": [1.0, math.inf]}, "$.a[1]"),
        (-math.inf, "$"),
        ({"a": "x\ud800y"}, "$.a"),
        ({"a\udfff": 1}, "$"),
    ],
)
def test_values_no_manifest_can_hold_raise_value_error_naming_the_path(
    tree: Any, path: str
) -> None:
    with pytest.raises(ValueError, match=r"at \$") as err:
        dump(tree)
    assert f"at {path})" in str(err.value)


def test_stream_errors_name_the_document() -> None:
    with pytest.raises(TypeError, match=r"document 1, at \$\.spec\.x"):
        dump_all([{"spec": {}}, {"spec": {"x": {1, 2}}}])
