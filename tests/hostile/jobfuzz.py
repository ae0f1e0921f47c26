"""Job-shaped hostile input: real jobs and overlays with their values replaced by strangers'.

The YAML fuzzing of test_fuzz.py rarely gets past the reader: its specs are not jobs.  These
strategies start from every example job (all kinds, both ColossalAI shapes) and replace values
at random places (a list where a string belongs, `env: 1`, a mapping as an env name, huge or
non-finite numbers, names with `=`, `$()`, control characters or no ASCII at all), delete
fields, add unknown ones and repeat list items, or give each container numbers as run-local
reads them (numbered: MASTER_PORT, --master_port, a resourceFieldRef); overlays get random namespaces, labels,
images and strategic-merge or JSON patches built the same way.  Used by test_fuzz.py in the
suite (bounded) and by hand for longer runs:

    FLATJOB_FUZZ_EXAMPLES=5000 python -m pytest -n0 tests/hostile/test_fuzz.py -k shaped
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/local/*.yaml")])
SEEDS: list[dict[str, Any]] = [d for p in EXAMPLES for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)]

STRINGS = [
    "", "x", "A=B", "MY.VAR", "日本", "é", "$(rank)", "$(type)", "$(service.worker[0].host)", "$(replicas[worker])",
    "$(id)", "a;b", "`id`", "'", '"', "\\", "-", "--flag", "a b", "a,b", "a=b=c", "\x1b[31m", "\r", "\n", "\x00",
    "..", "/", "/t9k/hostfile", "../x", "t9k://pvc/a/b", "t9k://minio/s/b/p", "Never", "OnFailure", "ExitCode", "Always",
    "gpu", "cpu", "auto", "0", "-1", "1e400", "500m", "2Gi", ".nan", "true", "worker", "master", "launcher", "python",
    "a" * 64, "a" * 300, "A" * 5000,
]
# Numbers as text where run-local reads one (ports, quantities, a downward-API resource): Unicode
# digits str.isdigit takes, more digits than int() converts, values past every bound (issue 21).
NUMBER_TEXTS = [
    "29500", "0", "65535", "65536", "²", "٣٠٠٠", "9" * 4400, "1e5000", "1e999999", "1e-999999", "9223372036854775807",
    "9223372036854775808", "8Ei", "1e16", "500m", "-1", "1_0", " 1", "0x10",
]
FLAGS = [f"--master_port={n}" for n in NUMBER_TEXTS[:8]] + ["--rdzv_endpoint=h:" + "9" * 4400, "--master-port ²"]
QUANTITIES = ["1e5000", "1e999999", "9223372036854775807", "9223372036854775808", "8Ei", "1e16", "500m", "2Gi", "1e-999999", 10**30]
RESOURCES = ["limits.cpu", "limits.memory", "requests.cpu", "requests.memory", "limits.ephemeral-storage", "limits.nvidia.com/gpu"]
DIVISORS = [None, "1", "1m", "1Mi", "1Gi", "1k", "1e-999999", "0", "²"]
STRINGS += NUMBER_TEXTS[4:9] + FLAGS[:2]
NUMBERS = [0, 1, -1, 2, 3, 63, 64, 1000, 10_001, 2**31, 2**63, 2**64, -(2**63) - 1, 1.5, -0.0, 1e300, math.inf, -math.inf, math.nan]
OTHERS: list[Any] = [None, True, False, [], {}, [1], ["a", "b"], [{}], [None], {"a": 1}, {"name": {"a": 1}}, {"": ""}, {"$patch": "delete"}, [{"name": "x"}, {"name": "x"}]]
KEYS = ["name", "value", "type", "replicas", "spec", "template", "env", "containers", "$patch", "<<", "", "unknown", "restartPolicy", "valueFrom", "metadata", "labels"]
# Deep-copied as drawn: the mutations below edit what they placed, never the pools.
values = st.one_of(st.sampled_from(STRINGS), st.sampled_from(NUMBERS), st.sampled_from(OTHERS), st.text(max_size=8), st.integers()).map(copy.deepcopy)


def paths(data: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a document (the root excluded)."""
    out = []
    if isinstance(data, dict):
        for k, v in data.items():
            out.append((*here, k))
            out.extend(paths(v, (*here, k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.append((*here, i))
            out.extend(paths(v, (*here, i)))
    return out


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    for p in path[:-1]:
        data = data[p]
    return data


@st.composite
def mutated(draw: st.DrawFn, seed: dict[str, Any] | None = None) -> dict[str, Any]:
    """An example job (or `seed`) with one to six values replaced, fields removed or added."""
    doc = copy.deepcopy(seed if seed is not None else draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        where = paths(doc)
        if not where:
            break
        path = draw(st.sampled_from(where))
        parent, last = _parent(doc, path), path[-1]
        action = draw(st.integers(0, 9))
        if action <= 5:
            parent[last] = draw(values)
        elif action == 6 and isinstance(parent, dict):
            del parent[last]
        elif action == 7 and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[last]))
        elif action == 8 and isinstance(parent[last], dict):
            parent[last][draw(st.sampled_from(KEYS))] = draw(values)
        elif isinstance(parent[last], list):
            parent[last].append(draw(values))
    return doc


def dump(doc: Any) -> str:
    """YAML as a user would write it (non-finite floats as .nan/.inf, any string quoted as needed)."""
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=2**20)


@st.composite
def json_op(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    where = ["/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path) for path in paths(doc)] or ["/spec"]
    op: dict[str, Any] = {"op": draw(st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "x", None]))}
    if draw(st.integers(0, 9)):
        op["path"] = draw(st.one_of(st.sampled_from(where), st.sampled_from(["", "/", "/spec/-", "/spec/replicaSpecs/-", "/x~2", "spec", "/spec/replicaSpecs/9"]), values))
    if draw(st.booleans()):
        op["value"] = draw(st.one_of(values, mutated(doc).map(lambda d: d.get("spec"))))
    if draw(st.booleans()):
        op["from"] = draw(st.one_of(st.sampled_from(where), st.sampled_from(["", "/", "/spec", "/metadata"]), values))  # the root, and prefixes of a path (review of round 12)
    return op


@st.composite
def overlay(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """An overlay.yaml over `doc`: any of namespace, labels, images and patches, hostile or not."""
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["namespace"] = draw(st.one_of(st.sampled_from(["prod", "team-a", "../x", "A", ""]), values))
    if draw(st.booleans()):
        out[draw(st.sampled_from(["labels", "annotations", "commonLabels"]))] = draw(st.one_of(st.dictionaries(st.sampled_from(STRINGS), st.one_of(st.sampled_from(STRINGS), values), max_size=3), values))
    if draw(st.booleans()):
        out["images"] = draw(st.lists(st.one_of(st.fixed_dictionaries({"name": st.sampled_from(["pytorch/pytorch", "busybox"])}, optional={"newTag": st.sampled_from(STRINGS), "newName": values, "digest": values}), values), max_size=2))
    patches = []
    for _ in range(draw(st.integers(0, 3))):
        entry: dict[str, Any] = {}
        kind = draw(st.integers(0, 3))
        if kind == 0:
            patch = draw(mutated(doc))
            patch.pop("apiVersion", None)
            entry["patch"] = patch
        elif kind == 1:
            entry["patch"] = draw(st.lists(json_op(doc), max_size=4))
        elif kind == 2:
            entry["patch"] = dump(draw(mutated(doc)))
        else:
            entry[draw(st.sampled_from(["patch", "path"]))] = draw(values)
        if draw(st.booleans()):
            entry["target"] = draw(st.one_of(st.fixed_dictionaries({}, optional={k: st.sampled_from([".*", doc.get("kind") or "x", "(", "a+", "x|y", "a=b", "!a", "a in (x,y)", ""]) for k in ("kind", "name", "namespace", "labelSelector", "annotationSelector", "group", "version")}), values))
        patches.append(entry)
    if patches or draw(st.booleans()):
        out["patches"] = patches
    return out


@st.composite
def numbered(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with what run-local reads as numbers drawn into each container: MASTER_PORT,
    a store-port flag, a resource limit and a resourceFieldRef over it."""
    doc = copy.deepcopy(doc)
    lists = [_parent(doc, path)[path[-1]] for path in paths(doc) if path[-1] == "containers"]  # before any edit
    for c in (c for cs in lists if isinstance(cs, list) for c in cs if isinstance(c, dict)):
        resource = draw(st.sampled_from(RESOURCES))
        section, _, name = resource.partition(".")
        ref: dict[str, Any] = {"resource": resource, **({"divisor": d} if (d := draw(st.sampled_from(DIVISORS))) else {})}
        c["env"] = [*(c.get("env") if isinstance(c.get("env"), list) else []), {"name": "MASTER_PORT", "value": draw(st.sampled_from(NUMBER_TEXTS))}, {"name": "V", "valueFrom": {"resourceFieldRef": ref}}]
        c["resources"] = {section: {name: draw(st.sampled_from(QUANTITIES + NUMBER_TEXTS[:6]))}}
        c["args"] = [*(c.get("args") if isinstance(c.get("args"), list) else []), draw(st.sampled_from(FLAGS))]
    return doc


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, str | None]:
    """(job file text, krm stdin, overlay.yaml text or None)."""
    doc = draw(st.one_of(mutated(), st.sampled_from(SEEDS).flatmap(numbered)))  # numbered seeds pass lint often
    text = dump(doc)
    krm = dump({"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": [doc], **({"functionConfig": {"kind": "ConfigMap", "data": draw(st.dictionaries(st.sampled_from(["namespace", "scheduler", "x"]), values, max_size=2))}} if draw(st.booleans()) else {})})
    over = dump(draw(overlay(draw(st.sampled_from(SEEDS))))) if draw(st.booleans()) else None
    return text, krm, over
