"""`flatjob lint` never crashes, whatever the input.

Covers: (a) arbitrary YAML trees, and job-shaped documents with random fields and values in
the places validation looks at (kind, metadata, replica specs, run config, elastic, rules,
pod templates, $(...) references); (b) real corpus files mutated (lines deleted, duplicated
or re-indented, scalars swapped for other types, truncation, garbage bytes, key renames).
Every run goes through the real CLI in-process with exceptions propagating, and must exit
0 or 1 with only well-formed findings in its output.
"""

from __future__ import annotations

import os
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import corpus_absent, corpus_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lintkit import FINDING, check_text_output, run_cli
from propertykit import examples

# Fixed and derandomized so CI is stable; to dig deeper locally:
#   FLATJOB_FUZZ_EXAMPLES=5000 FLATJOB_FUZZ_RANDOM=1 python -m pytest tests/test_lint_fuzz.py
FUZZ = settings(
    max_examples=int(os.environ.get("FLATJOB_FUZZ_EXAMPLES", examples(120))),
    derandomize=not os.environ.get("FLATJOB_FUZZ_RANDOM"),
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

KINDS = ["GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob", "DeepspeedJob", "Job"]

# fmt: off
FIELD_NAMES = [
    "replicas", "type", "template", "spec", "containers", "name", "image", "command", "args",
    "env", "value", "ports", "containerPort", "resources", "limits", "config", "run", "python",
    "module", "exec", "customCommand", "slotsPerWorker", "elastic", "enabled", "minReplicas",
    "maxReplicas", "expectedReplicas", "torchrunConfig", "procPerNode", "successRules",
    "failureRules", "service", "scheduler", "t9kScheduler", "priority", "queue", "runMode",
    "debug", "pause", "restartPolicy", "policy", "limit", "worker", "launcher", "torchConfig",
    "replicaSpecs", "script", "metadata", "labels", "volumeMounts", "mountPath",
    "imagePullPolicy",
]
# Strings that reach special paths: references, digits int() accepts but YAML does not, enums.
SPECIAL = [
    "gpu", "$(rank)", "$(service.worker[0].host)", "$(replicas[worker])", "$(service.port[http])",
    "$(type)$(rank)", "$(service.x[9].host)", "$(service.worker[$(rank)].host)", "$(rank",
    "$(service.worker[²].host)", "IfNotPresent", "1Gi", "worker", "master", "-1", "0", "",
    "²", "٣", "9" * 30, "0x" + "f" * 40,
]
CONTAINER_FIELDS = ["command", "args", "env", "ports", "resources", "imagePullPolicy",
                    "volumeMounts", "commands"]
ARGS = ["python", "$(rank)", "$(service.worker[1].host)", "--x", "$(replicas[ps])",
        "$(service.port[grpc])"]
# fmt: on

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(SPECIAL),
)
keys = st.one_of(
    st.sampled_from(FIELD_NAMES),
    st.text(string.ascii_letters, min_size=1, max_size=8),
    st.integers(-3, 3),
    st.none(),
    st.booleans(),
)
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=25,
)


@st.composite
def containers(draw: st.DrawFn) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": draw(st.sampled_from(["worker", "python", "launcher", "x", ""])),
        "image": "busybox",
    }
    for name in draw(st.lists(st.sampled_from(CONTAINER_FIELDS), max_size=4, unique=True)):
        c[name] = draw(
            st.one_of(
                st.lists(st.sampled_from(ARGS), max_size=3),
                st.lists(
                    st.fixed_dictionaries(
                        {"name": st.sampled_from(["A", "http", "A"]), "value": scalars}
                    ),
                    max_size=3,
                ),
                trees,
            )
        )
    return c


@st.composite
def templates(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(trees)
    return {"spec": {"containers": draw(st.lists(containers(), max_size=3))}}


@st.composite
def replica_specs(draw: st.DrawFn) -> list[Any]:
    specs = []
    for _ in range(draw(st.integers(0, 3))):
        spec = {
            "type": draw(
                st.sampled_from(["worker", "master", "launcher", "ps", "Worker", "w" * 70])
            ),
            "replicas": draw(st.one_of(st.integers(-2, 5), scalars)),
            "template": draw(templates()),
        }
        if draw(st.booleans()):
            spec["restartPolicy"] = draw(
                st.one_of(
                    st.sampled_from(["Never", "OnFailure", "Sometimes"]),
                    st.fixed_dictionaries(
                        {"policy": st.sampled_from(["Never", "Alwys"]), "limit": st.integers(-1, 3)}
                    ),
                    trees,
                )
            )
        specs.append(spec)
    return specs


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    """A job-shaped document: known fields in the right places, values right or wrong."""
    spec: dict[str, Any] = {}
    optional = {
        "replicaSpecs": replica_specs(),
        "worker": st.fixed_dictionaries(
            {"replicas": st.integers(-1, 3), "template": templates()}, optional={"command": trees}
        ),
        "config": st.fixed_dictionaries(
            {},
            optional={
                "run": st.fixed_dictionaries(
                    {}, optional={"python": trees, "module": trees, "exec": trees}
                ),
                "customCommand": scalars,
                "slotPerWorker": scalars,
                "slotsPerWorker": scalars,
                "otherArgs": st.lists(st.sampled_from(["--module", "--x"]), max_size=2),
            },
        ),
        "elastic": st.fixed_dictionaries(
            {"enabled": st.booleans()},
            optional={
                "minReplicas": st.integers(-1, 5),
                "maxReplicas": st.integers(-1, 5),
                "expectedReplicas": st.integers(-1, 6),
            },
        ),
        "torchrunConfig": st.fixed_dictionaries(
            {"enabled": st.booleans()},
            optional={
                "procPerNode": st.one_of(st.sampled_from(["gpu", "2", "gpus", "0"]), scalars)
            },
        ),
        "successRules": st.lists(
            st.dictionaries(
                st.sampled_from(["worker", "master", "nope"]),
                st.lists(st.one_of(st.integers(-1, 5), scalars), max_size=3),
                max_size=2,
            ),
            max_size=2,
        ),
        "service": st.fixed_dictionaries(
            {
                "ports": st.lists(
                    st.fixed_dictionaries(
                        {"name": st.sampled_from(["http", "grpc"]), "port": st.integers(-1, 70000)}
                    ),
                    max_size=2,
                )
            }
        ),
        "scheduler": st.fixed_dictionaries(
            {
                "t9kScheduler": st.fixed_dictionaries(
                    {"queue": scalars, "priority": st.integers(-5, 120)}
                )
            }
        ),
        "runMode": st.fixed_dictionaries(
            {},
            optional={
                "debug": st.fixed_dictionaries(
                    {"enabled": st.booleans()},
                    optional={
                        "replicaSpecs": st.lists(
                            st.fixed_dictionaries({"type": st.sampled_from(["worker", "wrker"])}),
                            max_size=2,
                        )
                    },
                ),
                "pause": st.fixed_dictionaries({"enabled": st.booleans()}),
            },
        ),
        "torchConfig": st.fixed_dictionaries({"script": trees}),
        "launcher": trees,
        "ssh": trees,
    }
    for name in draw(st.lists(st.sampled_from(sorted(optional)), max_size=6, unique=True)):
        spec[name] = draw(optional[name])
    for name, value in draw(
        st.dictionaries(st.sampled_from(FIELD_NAMES), trees, max_size=2)
    ).items():
        spec.setdefault(name, value)
    doc: dict[str, Any] = {
        "apiVersion": draw(
            st.sampled_from(["batch.tensorstack.dev/v1beta1", "batch.tensorstack.dev/v1"])
        ),
        "kind": draw(st.one_of(st.sampled_from(KINDS), scalars)),
        "metadata": draw(
            st.one_of(
                st.fixed_dictionaries(
                    {"name": st.sampled_from(["job", "My_Job", "a" * 70, "j-1"])},
                    optional={
                        "labels": st.dictionaries(
                            st.sampled_from(["a", "b/c", "-x"]), scalars, max_size=2
                        )
                    },
                ),
                trees,
            )
        ),
        "spec": draw(st.one_of(st.just(spec), st.just(spec), trees)),
    }
    for drop in draw(st.lists(st.sampled_from(["metadata", "spec", "kind"]), max_size=1)):
        doc.pop(drop)
    return doc


def assert_lint_sane(path: Path) -> None:
    """Lint one path through the CLI in every format; exit 0/1, no traceback, good shape."""
    result = run_cli("lint", str(path))
    assert result.exit_code in (0, 1), result.output
    found = check_text_output(result.output)
    assert (result.exit_code == 1) == any(m.group("severity") == "error" for m in found), (
        result.output
    )
    for fmt in ("json", "github", "sarif"):
        other = run_cli("lint", "--format", fmt, str(path))
        assert other.exit_code == result.exit_code, other.output
        assert "Traceback" not in other.output


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(data=trees)
def test_arbitrary_yaml_tree(workdir: Path, data: Any) -> None:
    path = workdir / "tree.yaml"
    path.write_text(_dump(data), encoding="utf-8")
    result = run_cli("lint", str(path))
    assert result.exit_code in (0, 1), result.output
    check_text_output(result.output)


@FUZZ
@given(docs=st.lists(jobs(), min_size=1, max_size=2))
def test_job_shaped_documents(workdir: Path, docs: list[dict[str, Any]]) -> None:
    path = workdir / "job.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=True), encoding="utf-8")
    assert_lint_sane(path)


# --- mutations of real files ---------------------------------------------------------------

CORPUS = corpus_files("t9k")
SWAPS = [
    "",
    "null",
    "[]",
    "{}",
    "1",
    "-1",
    "true",
    "'x'",
    "[a, b]",
    "{a: 1}",
    "&a x",
    "*a",
    "!!str 1",
    "!custom x",
    "|",
    ">-",
    "? x",
    "'",
    '"',
    "$(rank)",
    "!!bool x",
    "!!int x",
    "=",
    "<<",
    "²",
    "0x" + "f" * 4000,
    "9" * 5000,
    "-" + "9" * 400,
    ".nan",
    "!!binary x",
    "2001-12-14",
]
GARBAGE = [
    b"\x00",
    b"\xff\xfe",
    b"\xc3",
    b"\t",
    b"\x1b[31m",
    b"- ",
    b": ",
    b"{",
    b"]",
    b"&",
    b"*",
    b"%",
    b"---\n",
    b"...\n",
    b"\xe2\x80\xa8",
    b"\x85",
    b"\r",
    b"<<: *x\n",
    b"? ",
]


@st.composite
def mutations(draw: st.DrawFn) -> bytes:
    """A corpus file with one to three random edits."""
    raw = draw(st.sampled_from(CORPUS)).read_bytes()
    for _ in range(draw(st.integers(1, 3))):
        lines = raw.split(b"\n")
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        edit = draw(
            st.sampled_from(
                ["delete", "duplicate", "indent", "dedent", "swap", "truncate", "garbage", "rename"]
            )
        )
        if edit == "delete":
            del lines[i]
        elif edit == "duplicate":
            lines.insert(i, lines[i])
        elif edit == "indent":
            lines[i] = b" " * draw(st.integers(1, 4)) + lines[i]
        elif edit == "dedent":
            lines[i] = lines[i][draw(st.integers(1, 4)) :]
        elif edit == "swap" and b": " in lines[i]:
            head = lines[i].split(b": ", 1)[0]
            lines[i] = head + b": " + draw(st.sampled_from(SWAPS)).encode()
        elif edit == "truncate":
            raw = raw[: draw(st.integers(0, len(raw)))]
            continue
        elif edit == "garbage":
            col = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:col] + draw(st.sampled_from(GARBAGE)) + lines[i][col:]
        elif edit == "rename" and b":" in lines[i]:
            head, _, tail = lines[i].partition(b":")
            stripped = head.lstrip()
            pad = head[: len(head) - len(stripped)]
            new = draw(
                st.sampled_from(
                    [
                        stripped + b"s",
                        stripped[:-1],
                        stripped.upper(),
                        b"spec",
                        b"name",
                        b"x" + stripped,
                    ]
                )
            )
            lines[i] = pad + new + b":" + tail
        raw = b"\n".join(lines)
    return raw


@pytest.mark.skipif(not CORPUS, reason=corpus_absent())
@FUZZ
@given(raw=mutations())
def test_mutated_corpus_file(workdir: Path, raw: bytes) -> None:
    path = workdir / "mutated.yaml"
    path.write_bytes(raw)
    assert_lint_sane(path)


def test_finding_shape_regex_is_strict() -> None:
    """The shape check itself rejects what it must (guards the fuzz assertions)."""
    assert FINDING.match("a.yaml:3:5: error: bad [FJ201]")
    assert not FINDING.match("a.yaml:3: error: bad [FJ201]")
    assert not FINDING.match("a.yaml:3:5: fatal: bad [FJ201]")
    with pytest.raises(AssertionError):
        check_text_output("Traceback (most recent call last):\n")
    with pytest.raises(AssertionError):
        check_text_output("a.yaml:3:5: error: bad [FJ201]\n 3 | x\n")
