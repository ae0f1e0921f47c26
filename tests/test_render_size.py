"""The render budget's measure (compiler/render/size.py) against what compile renders.

Covers: for every example job, the real corpus and random jobs (valid PyTorchTrainingJobs,
and every example kind with random values that still compile), the measured total is at
least the JSON of every object compile renders and at most a few digits per object more, the
largest object measured is the largest rendered (and so are its annotations), and the YAML compile writes is 0.9 to 1.25
times the measure (the budget is counted in JSON, what the API server gets).
One pod per replica type stands for its type, so these pin that pods of a type differ only
by digits that never make a later pod larger.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from conftest import ROOT, corpus_absent, corpus_files
from hostile.jobfuzz import SEEDS, dump, mutated
from hypothesis import HealthCheck, assume, given, settings
from propertykit import examples
from strategies import job_yaml, pytorch_jobs

from flatjob.compiler import keys
from flatjob.compiler.budget import templates_bound
from flatjob.compiler.limits import DEFAULT
from flatjob.compiler.loader import Document, Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import CompiledJob, compile_documents
from flatjob.compiler.render.size import RUNTIME_POD_NOTES, annotation_bytes, measure

EXAMPLES = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/local/*.yaml")])


def _compiled(text: str, options: CompileOptions | None = None) -> list[tuple[CompiledJob, Document]]:
    """Each compiled job with its document (the budget's bound reads both)."""
    docs, problems = parse(text, "job.yaml")
    result = compile_documents(Loaded(jobs=docs, diagnostics=problems), options or CompileOptions())
    if result.failed:
        return []
    named = {d.data["metadata"].get("name"): d for d in docs if isinstance(d.data.get("metadata"), dict)}
    return [(job, named[job.name]) for job in result.jobs]


def _check(job: CompiledJob, doc: Document) -> None:
    """Measured JSON = the rendered objects' JSON (pods of a type: never more than the measured
    one), and the YAML written 0.9 to 1.25 times it (indentation; headers aside); the bound
    the budget takes before planning (templates_bound) is never more than the measure, so it
    never refuses a run the measure would take."""
    size = measure(job.plan)
    assert templates_bound(doc, job.job, DEFAULT)[1] <= size.total, job.name
    objects = [doc for name, text in job.files.items() if name != "kustomization.yaml" for doc in yaml.safe_load_all(text)]
    rendered = [len(orjson.dumps(doc)) for doc in objects]
    assert sum(o.count for o in size.objects) == len(objects)
    assert sum(rendered) <= size.total <= sum(rendered) + 8 * len(objects), (job.name, sum(rendered), size.total)
    assert size.largest.json_bytes == max(rendered)
    assert max(o.annotation_bytes for o in size.objects) == max(annotation_bytes(doc) for doc in objects)
    header = len(keys.GENERATED_HEADER.encode())  # each file's, and the kustomization: not objects
    written = sum(len(text.encode()) - header for name, text in job.files.items() if name != "kustomization.yaml")
    assert 0.9 * size.total <= written <= 1.25 * size.total, (job.name, written, size.total)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
@pytest.mark.parametrize("namespace", [None, "a-rather-long-namespace-name-for-the-team"])
def test_examples_measure_what_compile_writes(path: Path, namespace: str | None) -> None:
    jobs = _compiled(path.read_text(), CompileOptions(namespace=namespace))
    assert jobs
    for job, doc in jobs:
        _check(job, doc)


def test_the_corpus_measures_what_compile_writes() -> None:
    files = corpus_files("t9k")
    if not files:
        pytest.skip(corpus_absent())
    checked = 0
    for path in files:
        for job, doc in _compiled(path.read_text()):
            _check(job, doc)
            checked += 1
    assert checked > 50


SETTINGS = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@SETTINGS
@given(job=pytorch_jobs())
def test_random_pytorch_jobs_measure_what_compile_writes(job: dict[str, Any]) -> None:
    for compiled, doc in _compiled(job_yaml(job)):
        _check(compiled, doc)


@pytest.mark.slow  # 40 random jobs compiled whole (3.5 s); the PyTorch property stays quick: run by .ci/run after the README command
@SETTINGS
@given(doc=mutated())
def test_random_jobs_of_every_kind_measure_what_compile_writes(doc: dict[str, Any]) -> None:
    jobs = _compiled(dump(doc))
    assume(jobs)
    for job, source in jobs:
        _check(job, source)


def test_the_seeds_hold_every_kind() -> None:
    assert {d["kind"] for d in SEEDS} == {"GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"}


def test_a_pod_leaves_room_for_every_annotation_the_runtime_adds() -> None:
    """The runtime's notes on a pod it creates (release) or stops: FJ313 counts them on each pod
    (review 21 r7 #3), at their longest values."""
    assert set(RUNTIME_POD_NOTES) == {*keys.RUNTIME_ANNOTATIONS, keys.STOPPED, keys.SSH_SECRET_UID}
    assert all(len(RUNTIME_POD_NOTES[k]) == 19 for k in (keys.ATTEMPT, keys.RESTART_COUNT))
