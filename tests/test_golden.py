"""Golden tests: job specs with their expected rendered folder beside them.

Covers:
- examples/*.yaml compile to exactly examples/rendered/ (extra, missing and changed files fail);
- every tests/golden/<case>/job.yaml compiles to exactly tests/golden/<case>/expected/ (with the
  compile options of <case>/options.json when there is one);
- the CLI writes the same bytes as the in-memory pipeline;
- the comparison itself reports missing, extra and changed files.

Run `pytest tests/test_golden.py --update-golden` to rewrite the expected folders, then review
the diff in git.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from goldenkit import check_golden, compare_trees, read_tree

from flatjob.compiler.cli import cli
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.output import META_FILE
from flatjob.compiler.pipeline import compile_paths

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RENDERED = EXAMPLES / "rendered"
GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "job.yaml").is_file())
HINT = "run pytest --update-golden and review the diff"


def compiled_tree(sources: list[Path], out: Path, options: CompileOptions | None = None) -> dict[str, str]:
    """What `flatjob compile SOURCES -o OUT` would write, computed in memory."""
    result = compile_paths([str(s) for s in sources], options or CompileOptions())
    assert not result.failed, "\n".join(d.message for d in result.diagnostics)
    return result.tree(out)


def test_examples_render_to_examples_rendered(update_golden: bool) -> None:
    check_golden(RENDERED, compiled_tree([EXAMPLES], RENDERED), update_golden, HINT)


@pytest.mark.parametrize("case", CASES)
def test_golden_case(case: str, update_golden: bool) -> None:
    folder = GOLDEN / case
    expected = folder / "expected"
    options = folder / "options.json"
    chosen = CompileOptions(**json.loads(options.read_text())) if options.is_file() else None
    check_golden(expected, compiled_tree([folder / "job.yaml"], expected, chosen), update_golden, HINT)


def test_golden_cases_exist() -> None:
    assert len(CASES) >= 12, CASES


def test_cli_writes_the_golden_bytes(tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    res = CliRunner().invoke(cli, ["compile", str(EXAMPLES), "-o", str(out)])
    assert res.exit_code == 0, res.output
    written = read_tree(out)
    golden = read_tree(RENDERED)
    # Only the metadata differs: it names the inputs relative to the output folder.
    assert written.keys() == golden.keys()
    assert (
        compare_trees(
            {k: v for k, v in golden.items() if k != META_FILE},
            {k: v for k, v in written.items() if k != META_FILE},
        )
        == ""
    )


def test_metadata_paths_do_not_depend_on_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trees = []
    for cwd in (ROOT, EXAMPLES, tmp_path):
        monkeypatch.chdir(cwd)
        trees.append(compiled_tree([EXAMPLES], RENDERED))
    assert trees[0] == trees[1] == trees[2]


@pytest.mark.parametrize(
    ("expected", "actual", "needle"),
    [
        ({"a.yaml": "x\n"}, {}, "missing: a.yaml"),
        ({}, {"b.yaml": "x\n"}, "extra:   b.yaml"),
        ({"c.yaml": "x\n"}, {"c.yaml": "y\n"}, "+y"),
    ],
    ids=["missing", "extra", "changed"],
)
def test_compare_trees_reports(
    expected: dict[str, str], actual: dict[str, str], needle: str
) -> None:
    report = compare_trees(expected, actual)
    assert needle in report
    assert compare_trees(actual, actual) == ""
