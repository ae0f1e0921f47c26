"""Hostile overlays: what an overlay folder in a pull request can ask of compile and the plugin.

Each runs `flatjob compile --overlay` (and the Argo CD plugin with OVERLAY) in a capped child
(tests/hostile/kit.py) and asserts a diagnostic with a code and a line, exit 1, and little CPU.
Before issue 21: a patch `path:` naming a folder was an internal error (IsADirectoryError);
forty JSON patch `copy` operations took 12 s and 1.7 GB before an internal error; 5 500
patches over 500 jobs took 110 s; a target `name: (a|aa)*b` never finished; a selector term
of spaces took time quadratic in its length; a patch whose own kind was not a regular
expression crashed.
"""

from __future__ import annotations

import pytest

from .kit import BOUNDED_CPU, MEASURED, Sandbox, assert_clean_exit

CPU = BOUNDED_CPU
MIB = 100  # peak resident memory of the run


def _overlay(box: Sandbox, text: str) -> None:
    folder = box.repo / "overlays" / "prod"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "overlay.yaml").write_text(text)


def _compile(box: Sandbox) -> list:
    box.freeze()
    runs = [box.compile("--overlay", "overlays/prod"), box.plugin(SOURCES="jobs", OVERLAY="overlays/prod")]
    for run_ in runs:
        assert_clean_exit(run_, 1)
        assert run_.cpu < CPU and run_.rss_mib < MIB, (run_.cpu, run_.rss_mib)
    assert box.untouched() and not box.out.exists()
    return runs


@pytest.mark.parametrize("path", [".", '""', "sub", "sub/", "../prod"])
def test_a_patch_path_that_is_a_folder_is_an_error_at_its_line(box: Sandbox, path: str) -> None:
    box.job()
    (box.repo / "overlays" / "prod" / "sub").mkdir(parents=True)
    _overlay(box, f"patches:\n  - path: {path}\n")
    for run_ in _compile(box):
        assert ("overlay.yaml", 2, 11, "error", "FJ602") in run_.findings() and "is a directory" in run_.output


def test_json_patch_copies_cannot_double_a_job_forty_times(box: Sandbox) -> None:
    box.job()
    ops = "\n".join(f"      - {{op: copy, from: /spec, path: /spec/a{i}}}" for i in range(40))
    _overlay(box, f"patches:\n  - target: {{kind: PyTorchTrainingJob}}\n    patch:\n{ops}\n")
    for run_ in _compile(box):
        assert ("overlay.yaml", 2, 5, "error", "FJ105") in run_.findings(), run_.output[-2000:]


def test_patches_times_jobs_are_bounded(box: Sandbox) -> None:
    """Refused before any target is matched: 1 000 checks per job cost more than the run's budget."""
    for i in range(101):
        box.job(f"job-{i}")
    patches = "".join(f"  - {{target: {{kind: X{i}}}, patch: {{spec: {{}}}}}}\n" for i in range(1000))
    _overlay(box, "patches:\n" + patches)
    for run_ in _compile(box):
        assert ("overlay.yaml", 2, 5, "error", "FJ105") in run_.findings()
        assert "1,000 patches to 101 jobs costs more than 1,000,000 YAML values" in run_.output


@MEASURED
def test_an_overlay_of_more_patches_than_any_needs_is_refused_before_they_are_built(box: Sandbox) -> None:
    """5 000 patches over 200 jobs: 0.65-0.85 s of CPU when each was built and checked first."""
    for i in range(200):
        box.job(f"job-{i}")
    patches = "".join(f"  - {{target: {{kind: X{i}}}, patch: {{spec: {{}}}}}}\n" for i in range(5000))
    _overlay(box, "patches:\n" + patches)
    for run_ in _compile(box):
        assert ("overlay.yaml", 1002, 5, "error", "FJ105") in run_.findings(), run_.output[-1500:]
        assert "more than 1,000 patches in one overlay" in run_.output


def test_patches_that_apply_are_bounded_by_what_they_add(box: Sandbox) -> None:
    """Few checks, but two patch files of 12 000 values each, applied to each of 30 jobs, add more
    than the run's budget (each added value counts 4): stopped at the patch that spends its last."""
    for i in range(30):
        box.job(f"job-{i}")
    folder = box.repo / "overlays" / "prod"
    folder.mkdir(parents=True)
    for i in range(2):
        (folder / f"p{i}.yaml").write_text("spec:\n  x: [" + ", ".join("0" for _ in range(12_000)) + "]\n")
    _overlay(box, "patches:\n" + "".join(f"  - {{path: p{i}.yaml, target: {{kind: PyTorchTrainingJob}}}}\n" for i in range(2)))
    for run_ in _compile(box):
        assert "FJ105" in run_.codes() and "applying this overlay's patches to the jobs they select costs more than 1,000,000" in run_.output, run_.output[-2000:]


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ('{name: "(a|aa)*b"}', "repeats an alternative"),
        ('{name: "(a+)+b"}', "repeats a repetition"),
        ('{kind: "(x)\\\\1"}', "refers back to a group"),
        ('{name: ".*.*.*.*b"}', "has 4 repetitions"),
        ("{labelSelector: 'a" + " " * 5000 + "in (x)'}", "selector term of 5,007 characters"),
    ],
    ids=["alternative", "nested", "backreference", "repetitions", "long-selector"],
)
def test_a_target_that_could_match_forever_is_refused(box: Sandbox, target: str, why: str) -> None:
    box.job("a" * 40)
    _overlay(box, f"patches:\n  - target: {target}\n    patch: {{spec: {{}}}}\n")
    for run_ in _compile(box):
        assert "FJ602" in run_.codes() and why in run_.output, run_.output[-2000:]


def test_a_patch_naming_its_own_kind_as_text_is_a_literal(box: Sandbox) -> None:
    box.job()
    _overlay(box, 'patches:\n  - patch: {kind: "(", metadata: {name: ok}, spec: {}}\n')
    box.freeze()
    run_ = box.compile("--overlay", "overlays/prod")
    assert_clean_exit(run_, 0)
    assert "[FJ600]" in run_.output  # it selects no job: kind '(' is nobody's


def test_an_overlay_folder_that_links_outside_the_repository_is_not_followed(box: Sandbox) -> None:
    """As a job folder's links (FJ106): a pull request may add overlays/prod -> ../../outside."""
    box.job()
    elsewhere = box.outside / "ov"
    elsewhere.mkdir()
    (elsewhere / "overlay.yaml").write_text("namespace: evil\n")
    (box.repo / "overlays").mkdir()
    (box.repo / "overlays" / "prod").symlink_to(elsewhere)
    box.freeze()
    compiled, plugin = box.compile("--overlay", "overlays/prod"), box.plugin(SOURCES="jobs", OVERLAY="overlays/prod")
    assert_clean_exit(compiled, 1)
    assert "FJ602" in compiled.codes() and "leads outside the working directory" in compiled.output
    assert_clean_exit(plugin, 2)
    assert "outside the repository" in plugin.output  # the plugin checks every path it is given first
    assert box.untouched() and not box.out.exists()


# An overlay's labels/annotations are copied onto every pod template of every job: 12 000 of
#    each (266 KB overlay) over a 100-type GenericJob (13 KB) is 2.4 M label values of work (review of round 12).
def _generic(types: int = 100) -> str:
    specs = "".join(
        f"    - type: t{t}\n      replicas: 1\n      template:\n        spec:\n          containers:\n            - {{name: c, image: 'img:1'}}\n"
        for t in range(types)
    )
    return "apiVersion: batch.tensorstack.dev/v1beta1\nkind: GenericJob\nmetadata:\n  name: g\nspec:\n  replicaSpecs:\n" + specs


@MEASURED
@pytest.mark.parametrize("fields", [("labels",), ("labels", "annotations")])
def test_overlay_metadata_fanned_out_to_every_template_is_bounded(box: Sandbox, fields: tuple[str, ...]) -> None:
    box.job(text=_generic(), file="g.yaml")
    folder = box.repo / "overlays" / "prod"
    folder.mkdir(parents=True)
    (folder / "overlay.yaml").write_text("".join(f"{f}:\n" + "".join(f"  {f[0]}{i}: v\n" for i in range(12_000)) for f in fields))
    box.freeze()
    for run_ in (box.compile("--overlay", "overlays/prod"), box.plugin(SOURCES="jobs", OVERLAY="overlays/prod")):
        assert_clean_exit(run_, 1)
        assert run_.cpu < BOUNDED_CPU and run_.rss_mib < MIB, (run_.cpu, run_.rss_mib)
        # refused where the overlay asks for it, not at the job's apiVersion
        assert ("overlay.yaml", 1, 1, "error", "FJ105") in run_.findings(), run_.output[-1500:]
    assert box.untouched() and not box.out.exists()


# The overlay labels/annotations budget (review of round 13) charges each value per copy: 20 jobs
#    of 100 types under a 5 KB overlay (240 labels + 240 annotations) once compiled in ~5 s and
#    ~350 MiB; now the first job's 97 162 copied values are over the 50 000 a job may hold (FJ105
#    at the overlay), and the run stops there.
def _generic_named(name: str, types: int = 100) -> str:
    specs = "".join(
        f"    - type: t{t}\n      replicas: 1\n      template:\n        spec:\n          containers:\n            - {{name: c, image: 'img:1'}}\n"
        for t in range(types)
    )
    return f"apiVersion: batch.tensorstack.dev/v1beta1\nkind: GenericJob\nmetadata:\n  name: {name}\nspec:\n  replicaSpecs:\n" + specs


@MEASURED
@pytest.mark.parametrize("entry", ["compile", "plugin"])
def test_overlay_metadata_fan_out_under_the_run_budget_is_bounded(box: Sandbox, entry: str) -> None:
    for j in range(20):
        box.job(text=_generic_named(f"g{j}"), file=f"g{j}.yaml")
    folder = box.repo / "overlays" / "prod"
    folder.mkdir(parents=True)
    (folder / "overlay.yaml").write_text(
        "commonLabels:\n" + "".join(f"  l{i}: v\n" for i in range(240)) + "annotations:\n" + "".join(f"  a{i}: v\n" for i in range(240))
    )
    box.freeze()
    run_ = box.compile("--overlay", "overlays/prod") if entry == "compile" else box.plugin(SOURCES="jobs", OVERLAY="overlays/prod")
    assert_clean_exit(run_, 1)
    assert run_.cpu < BOUNDED_CPU and run_.rss_mib < MIB, (run_.cpu, run_.rss_mib)
    # stopped at the overlay (FJ105), and the jobs are not validated without it
    assert run_.findings() == [("overlay.yaml", 1, 1, "error", "FJ105")], run_.output[-1500:]
    assert box.untouched()
