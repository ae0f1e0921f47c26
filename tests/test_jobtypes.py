"""The plain job classes (compiler/jobtypes) against the pydantic models they are generated from.

Covers:
- compiler/jobtypes/generated.py is what typegen writes today (else: run the command shown);
- soundness: whenever the plain check accepts a document, pydantic accepts it too and the two
  give equal objects and equal `wire()` data; checked on the corpus, the examples, random
  valid PyTorch jobs and hypothesis mutations of all of them (wrong types, nulls, unknown,
  missing and snake_case keys, infinities);
- reach: every document pydantic accepts in the corpus and examples is accepted by the plain
  check too, so real specs never pay for pydantic;
- a table of the edge cases strict mode decides (bool is not int, 1.0 is not 1, ...);
- the objects are frozen, copy and pickle, and `model_copy`/`__init__` refuse unknown fields.
"""

from __future__ import annotations

import copy
import math
import pickle
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from propertykit import examples
from pydantic import ValidationError
from strategies import pytorch_jobs

from flatjob.compiler import jobtypes
from flatjob.compiler.keys import T9K_API_VERSION
from flatjob.compiler.loader import load_paths
from flatjob.compiler.models import MODELS, typegen

ROOT = Path(__file__).resolve().parents[1]
PROPS = settings(max_examples=examples(300), derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _documents() -> list[dict[str, Any]]:
    """Every job document of the examples and (when present) the corpus."""
    paths = [str(ROOT / "examples")] + ([str(CORPUS / "t9k")] if (CORPUS / "t9k").is_dir() else [])
    loaded = load_paths(paths)
    return [d.data for d in loaded.jobs if isinstance(d.data, dict) and d.data.get("kind") in MODELS]


DOCUMENTS = _documents()


def both(data: Any) -> tuple[Any, Any]:
    """(plain object or None, pydantic model or None) for one document."""
    kind = data.get("kind") if isinstance(data, dict) else None
    kind = kind if isinstance(kind, str) and kind in MODELS else "PyTorchTrainingJob"  # a mutated kind may be a list
    fast = jobtypes.parse(kind, data)
    try:
        model = MODELS[kind].model_validate(data)
    except ValidationError:
        model = None
    return fast, model


def assert_sound(data: Any) -> None:
    fast, model = both(data)
    if fast is not None:
        assert model is not None, "the plain check accepted what pydantic rejects"
        assert fast == jobtypes.plain(model)
        assert fast.wire() == model.wire()


def test_generated_module_is_current() -> None:
    text = (ROOT / "compiler" / "jobtypes" / "generated.py").read_text(encoding="utf-8")
    assert text == typegen.source(), "compiler/jobtypes/generated.py is stale; run `python -m flatjob.compiler.models.typegen`"


def test_every_model_has_a_plain_twin_with_the_same_fields() -> None:
    for model in typegen.closure(MODELS.values()):
        twin = jobtypes.CLASSES[model.__name__]
        assert [f.name for f in twin.FIELDS] == list(model.model_fields)
        assert [f.alias for f in twin.FIELDS] == [i.alias or n for n, i in model.model_fields.items()]
    assert set(jobtypes.KINDS) == set(MODELS)


def test_documents_are_found() -> None:
    assert len(DOCUMENTS) >= 6  # the examples at least


@pytest.mark.parametrize("index", range(len(DOCUMENTS)))
def test_real_documents_take_the_plain_path_and_agree(index: int) -> None:
    data = DOCUMENTS[index]
    fast, model = both(data)
    assert_sound(data)
    if model is not None:
        assert fast is not None, "a valid real spec fell back to pydantic"


# --- hypothesis: mutations ---------------------------------------------------------------

# Replacements that strict mode must refuse (or, for some, accept), by the type they replace.
CONFUSABLE: dict[type, list[Any]] = {
    bool: [None, 0, 1, "true", "yes"],
    int: [None, True, False, 1.0, "1", -1, 0, 101],
    float: [None, 1, "1.5", math.inf],
    str: [None, 1, True, "", "x", "Never", "c10d", "worker", ["x"]],
    list: [None, "x", {}, [], [1], [None], [{}]],
    dict: [None, [], "x", {}, {"x": 1}, {"1": None}, {1: "x"}],
}


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document, but not inside pod templates (untyped here; kubecheck's)."""
    out = [prefix]
    if prefix and prefix[-1] == "template":
        return out
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*prefix, i))
    return out


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


@st.composite
def mutated(draw: st.DrawFn, bases: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """A document with one to three random edits at random places."""
    data = copy.deepcopy(draw(bases))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(data)))
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        edit = draw(st.sampled_from(["value", "value", "value", "delete", "unknown", "snake", "both"]))
        if not path:
            continue
        last = path[-1]
        if edit == "value":
            choices = CONFUSABLE.get(type(parent[last]), CONFUSABLE[str])
            parent[last] = copy.deepcopy(draw(st.sampled_from(choices)))
        elif edit == "delete" and isinstance(parent, dict):
            del parent[last]
        elif edit == "unknown" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "Replicas", "slotPerWorker", "spec"]))] = 1
        elif edit in ("snake", "both") and isinstance(parent, dict) and isinstance(last, str) and _snake(last) != last:
            parent[_snake(last)] = parent[last]
            if edit == "snake":
                del parent[last]
    return data


REAL = st.sampled_from(DOCUMENTS)


@PROPS
@given(data=mutated(REAL))
def test_mutated_real_documents_are_sound(data: dict[str, Any]) -> None:
    assert_sound(data)


@pytest.mark.slow  # 300 random jobs (5 s): run by .ci/run after the README command
@PROPS
@given(data=st.one_of(pytorch_jobs(), mutated(pytorch_jobs())))
def test_random_pytorch_jobs_are_sound_and_valid_ones_take_the_plain_path(data: dict[str, Any]) -> None:
    assert_sound(data)
    fast, model = both(data)
    if model is not None and not _has_snake_keys(data):
        assert fast is not None


def _has_snake_keys(data: Any) -> bool:
    if isinstance(data, dict):
        return any("_" in k for k in data if isinstance(k, str)) or any(_has_snake_keys(v) for v in data.values())
    if isinstance(data, list):
        return any(_has_snake_keys(v) for v in data)
    return False


# --- the cases strict mode decides -------------------------------------------------------


def _job(**spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": math.inf}}}]}}
    worker = {"type": "worker", "replicas": 2, "template": template, **spec.pop("worker", {})}
    return {"apiVersion": T9K_API_VERSION, "kind": "PyTorchTrainingJob", "metadata": {"name": "j"}, "spec": {"replicaSpecs": [worker], **spec}}


CASES = {
    "valid": (_job(), True),
    "bool for int": (_job(worker={"replicas": True}), False),
    "float for int": (_job(worker={"replicas": 2.0}), False),
    "string for int": (_job(worker={"replicas": "2"}), False),
    "negative replicas": (_job(worker={"replicas": -1}), False),
    "int for string": (_job(worker={"type": 1}), False),
    "null for a defaulted bool": (_job(torchrunConfig={"enabled": None}), False),
    "literal outside its set": (_job(worker={"restartPolicy": "never"}), False),
    "no replica specs": ({**_job(), "spec": {"replicaSpecs": []}}, False),
    "unknown field": (_job(worker={"slotPerWorker": 1}), False),
    "snake_case name (pydantic decides)": (_job(run_policy={"backoffLimit": 1}), None),
    "priority above 100": (_job(scheduler={"t9kScheduler": {"queue": "q", "priority": 101}}), False),
}


@pytest.mark.parametrize("name", CASES)
def test_strict_edge_cases(name: str) -> None:
    data, plain_accepts = CASES[name]
    fast, model = both(data)
    assert_sound(data)
    if plain_accepts is not None:
        assert (fast is not None) == plain_accepts
        assert (model is not None) == plain_accepts


def test_infinity_in_a_template_is_null_on_the_wire_as_in_pydantic() -> None:
    fast, model = both(_job())
    limits = fast.wire()["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": None} == model.wire()["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]


def test_snake_case_spec_is_accepted_through_pydantic() -> None:
    from flatjob.compiler.typedjob import strict_job

    data = _job(run_policy={"backoffLimit": 1})
    job = strict_job("PyTorchTrainingJob", data)
    assert isinstance(job, jobtypes.PyTorchTrainingJob)
    assert job.spec.run_policy.backoff_limit == 1


# --- object behaviour --------------------------------------------------------------------


def test_objects_are_frozen_and_copy_like_pydantic_models() -> None:
    job = jobtypes.parse("PyTorchTrainingJob", _job())
    with pytest.raises(AttributeError, match="frozen"):
        job.kind = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        del job.kind  # type: ignore[misc]
    assert copy.deepcopy(job) == job
    assert pickle.loads(pickle.dumps(job)) == job
    changed = job.model_copy(update={"status": {"phase": "Running"}})
    assert changed.status == {"phase": "Running"} and job.status is None
    assert changed != job
    with pytest.raises(TypeError, match="no field"):
        job.model_copy(update={"nope": 1})


def test_constructor_checks_its_fields() -> None:
    spec = jobtypes.ColossalAIReplicaSpec(type="launcher", template={})
    assert spec.replicas == 1 and spec.restart_policy is None
    with pytest.raises(TypeError, match="no field"):
        jobtypes.ColossalAIReplicaSpec(type="launcher", template={}, nope=1)
    with pytest.raises(TypeError, match="type"):
        jobtypes.ColossalAIReplicaSpec(type="boss", template={})
    with pytest.raises(TypeError, match="template"):
        jobtypes.ColossalAIReplicaSpec(type="worker")
    assert "ColossalAIReplicaSpec(type='launcher'" in repr(spec)


# --- typegen refuses what the twins would not mirror --------------------------------------


def _refused_models() -> dict[str, Any]:
    """Small models, each with one feature a plain twin would silently get wrong."""
    from typing import Annotated

    from pydantic import ConfigDict, Field, computed_field, field_validator

    from flatjob.compiler.models.base import T9kModel

    class DictMinLen(T9kModel):
        a: dict[str, str] = Field(min_length=1)

    class UnionBound(T9kModel):
        a: int | str = Field(ge=0)

    class ListBound(T9kModel):
        a: list[int] = Field(ge=0)

    class IntMinLen(T9kModel):
        a: Annotated[int, Field(min_length=1)]

    class OtherName(T9kModel):
        a_b: int = Field(validation_alias="other")

    class OtherOutput(T9kModel):
        a_b: int = Field(serialization_alias="other")

    class Validated(T9kModel):
        a: int

        @field_validator("a")
        @classmethod
        def _even(cls, v: int) -> int:
            return v

    class Computed(T9kModel):
        a: int

        @computed_field  # type: ignore[prop-decorator]
        @property
        def b(self) -> int:
            return self.a

    class ByNameOnly(T9kModel):
        model_config = ConfigDict(populate_by_name=False)
        a_b: int

    class FloatField(T9kModel):
        a: float

    return {m.__name__: m for m in (DictMinLen, UnionBound, ListBound, IntMinLen, OtherName, OtherOutput, Validated, Computed, ByNameOnly, FloatField)}


@pytest.mark.parametrize("name", list(_refused_models()))
def test_typegen_refuses_features_it_cannot_mirror(name: str) -> None:
    with pytest.raises(TypeError, match="typegen"):
        typegen.class_source(_refused_models()[name])


def test_typegen_keeps_characters_beyond_the_bmp_whole() -> None:
    assert typegen.q("😀 x") == '"😀 x"'
    assert eval(typegen.q('a"b\\c\n')) == 'a"b\\c\n'


def _int_bounds(annotation: Any, metadata: tuple[Any, ...] = ()) -> list[tuple[Any, Any]]:
    """(ge, le) of every int an annotation reads, None where a bound is missing."""
    import typing

    import annotated_types
    from pydantic.fields import FieldInfo

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _int_bounds(args[0], (*metadata, *args[1:]))
    if annotation is int:
        flat = [m for x in metadata for m in (x.metadata if isinstance(x, FieldInfo) else [x])]
        ge = next((m.ge for m in flat if isinstance(m, annotated_types.Ge)), None)
        le = next((m.le for m in flat if isinstance(m, annotated_types.Le)), None)
        return [(ge, le)]
    return [b for a in args for b in _int_bounds(a, metadata if origin in (typing.Union, type(int | None)) else ())]


def test_every_integer_of_a_t9k_type_is_bounded() -> None:
    """hx17: `slotsPerWorker: 9223372036854775808` passed lint; every int a T9k model reads is
    an int32 (or an int64) in T9k's CRD and the launchers, so each has both bounds."""
    unbounded = [
        f"{model.__name__}.{name}"
        for model in typegen.closure(MODELS.values())
        for name, info in model.model_fields.items()
        for ge, le in _int_bounds(info.annotation, tuple(info.metadata))
        if ge is None or le is None or le > 2**63 - 1 or ge < -(2**63)
    ]
    assert not unbounded, f"integer fields without both bounds: {unbounded}"
