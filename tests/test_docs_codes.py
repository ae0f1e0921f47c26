"""docs/diagnostics.md documents exactly the codes in compiler/errors.py, truthfully.

Covers: one section per code, with its name, and no code the project does not have; every
`flatjob lint job.yaml` example in the doc, re-run, prints exactly the output shown and
shows its own code (`--update-golden` rewrites the outputs); docs/editors.md names the
schema files that exist.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import ROOT
from lintkit import run_cli

from flatjob.compiler.errors import CODES

DOC = ROOT / "docs" / "diagnostics.md"
HEADING = re.compile(r"^### (FJ\d{3}) (\S+)$", re.MULTILINE)
EXAMPLE = re.compile(
    r"(?:<!-- encoding: (?P<encoding>[\w-]+) -->\n)?```yaml\n(?P<yaml>.*?)```\n\n"
    r"```console\n\$ flatjob lint job\.yaml\n(?P<output>.*?)```",
    re.DOTALL,
)


class Example(NamedTuple):
    code: str
    yaml: str
    encoding: str
    output: str
    span: tuple[int, int]  # of the output in the doc


def sections(text: str) -> dict[str, tuple[str, int, int]]:
    """code -> (name, start, end) of its section in the doc."""
    heads = list(HEADING.finditer(text))
    ends = [h.start() for h in heads[1:]] + [len(text)]
    return {h.group(1): (h.group(2), h.end(), end) for h, end in zip(heads, ends, strict=True)}


def examples(text: str) -> list[Example]:
    out = []
    for code, (_, start, end) in sections(text).items():
        for m in EXAMPLE.finditer(text, start, end):
            out.append(
                Example(code, m["yaml"], m["encoding"] or "utf-8", m["output"], m.span("output"))
            )
    return out


DOC_TEXT = DOC.read_text(encoding="utf-8") if DOC.is_file() else ""
EXAMPLES = examples(DOC_TEXT)


def test_every_code_has_a_section() -> None:
    found = sections(DOC_TEXT)
    assert sorted(set(CODES) - set(found)) == [], "codes missing from docs/diagnostics.md"
    assert {code: name for code, (name, _, _) in found.items()} == {c: CODES[c].name for c in found}


def test_doc_names_no_code_that_does_not_exist() -> None:
    mentioned = set(re.findall(r"\bFJ\d{3}\b", DOC_TEXT))
    assert sorted(mentioned - set(CODES)) == []
    assert len(HEADING.findall(DOC_TEXT)) == len(CODES), "a code has two sections"


def test_sections_are_in_code_order() -> None:
    assert list(sections(DOC_TEXT)) == list(CODES)


def test_every_lint_code_has_a_runnable_example() -> None:
    with_examples = {e.code for e in EXAMPLES}
    # compile against OUT, overlays, compile output; FJ106 needs a symbolic link, FJ324 a megabyte,
    # which a YAML example cannot hold (tests/hostile/test_rendering.py runs FJ324's); FJ345 two
    # files and compile's runtime mode (tests/test_validate_across.py runs it)
    not_lint = {"FJ106", "FJ324", "FJ322", "FJ345", "FJ600", "FJ601", "FJ602", "FJ700", "FJ701", "FJ702", "FJ703", "FJ704", "FJ705"}
    assert sorted(set(CODES) - not_lint - with_examples) == []


def _lint_example(tmp_path: Path, example: Example, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "job.yaml").write_bytes(example.yaml.encode(example.encoding))
    monkeypatch.chdir(tmp_path)
    return run_cli("lint", "job.yaml").stdout


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.code for e in EXAMPLES])
def test_example_output_is_what_flatjob_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, update_golden: bool, example: Example
) -> None:
    actual = _lint_example(tmp_path, example, monkeypatch)
    assert f"[{example.code}]" in actual, f"the {example.code} example does not show {example.code}"
    if update_golden and actual != example.output:
        text = DOC.read_text(encoding="utf-8")
        nth = [e for e in EXAMPLES if e.code == example.code].index(example)  # a section may hold several
        current = [e for e in examples(text) if e.code == example.code][nth]
        DOC.write_text(text[: current.span[0]] + actual + text[current.span[1] :], encoding="utf-8")
        return
    assert actual == example.output, (
        "run `python -m pytest tests/test_docs_codes.py --update-golden`"
    )


def test_editor_doc_names_real_schema_files() -> None:
    text = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    for name in re.findall(r"schemas/jobs/([a-z]+\.json)", text):
        assert (ROOT / "schemas" / "jobs" / name).is_file(), name
    assert "# yaml-language-server: $schema=" in text
