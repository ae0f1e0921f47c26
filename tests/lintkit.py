"""Helpers for the lint tests: YAML text in, findings out; the CLI run in-process.

Used by test_lint_*.py, test_report.py and test_docs_codes.py. `lint_text` goes through the
same file loading as `flatjob lint PATH`; `run_cli` drives the real click group with
exceptions propagating, so a crash fails the test with its traceback.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from click.testing import CliRunner, Result

from flatjob.compiler.cli import cli
from flatjob.compiler.errors import Diagnostic
from flatjob.compiler.lint import lint_paths

# `path:line:col: severity: message [CODE]`, the shape DESIGN §8 promises for every finding.
FINDING = re.compile(
    r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning): "
    r"(?P<message>.*) \[(?P<code>FJ\d{3})\]$"
)
# A finding without a position (unreadable file): `path: error: message [CODE]`.
FINDING_NO_POS = re.compile(
    r"^(?P<path>.+?): (?P<severity>error|warning): (?P<message>.*) \[(?P<code>FJ\d{3})\]$"
)
SOURCE_LINE = re.compile(r"^ (?P<gutter>\d+) \| (?P<text>.*)$")
CARET_LINE = re.compile(r"^ (?P<pad> +) \| (?P<prefix>[ \t]*)\^(?P<hint>.*)$")
HINT_LINE = re.compile(r"^  hint: .+$")
SUMMARY = re.compile(r"^\d+ errors?, \d+ warnings? \(\d+ jobs? in \d+ files? checked\)$")

Finding = tuple[int, int, str]


def dedent(text: str) -> str:
    """Strip the common indentation and the leading newline of an inline YAML block."""
    return textwrap.dedent(text).lstrip("\n")


_MARKER_LINE = re.compile(r"^\s*#.*\^ ?FJ\d{3}")
_MARKER = re.compile(r"\^ ?(FJ\d{3})")


def marked(text: str) -> list[Finding]:
    """Expected findings drawn in the YAML itself, under the line they point at.

        replicas: -1
        #         ^ FJ204

    A marker line is a comment with `^ CODE` (several allowed); it marks the nearest line
    above it that is not a marker, at the caret's column.
    """
    out: list[Finding] = []
    target = 0
    for number, line in enumerate(dedent(text).split("\n"), start=1):
        if _MARKER_LINE.match(line):
            out.extend((target, m.start() + 1, m.group(1)) for m in _MARKER.finditer(line))
        else:
            target = number
    return out


def write(tmp_path: Path, text: str | bytes, name: str = "job.yaml") -> Path:
    """Write a case file (text is dedented; bytes are written as they are)."""
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(dedent(text), encoding="utf-8")
    return path


def lint_text(tmp_path: Path, text: str | bytes, name: str = "job.yaml") -> list[Diagnostic]:
    """Lint one file with this content, named explicitly as on the command line."""
    return lint_paths([str(write(tmp_path, text, name))]).diagnostics


def findings(diags: Sequence[Diagnostic]) -> list[Finding]:
    """(line, col, code) of every finding, in report order."""
    return sorted((d.line, d.col, d.code) for d in diags)


def errors(diags: Sequence[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.is_error]


def run_cli(*args: str) -> Result:
    """Run `flatjob ARGS` in-process; exceptions propagate (no traceback can hide in output)."""
    return CliRunner().invoke(cli, list(args), prog_name="flatjob", catch_exceptions=False)


def check_text_output(output: str) -> list[re.Match[str]]:
    """Assert every line of `flatjob lint` text output has a known shape; return the findings.

    A finding with a source line must be followed by that line and a caret line.
    """
    assert "Traceback" not in output, output
    lines = output.split("\n")  # only \n: a quoted source line may hold other line breaks
    if lines and lines[-1] == "":
        lines.pop()
    found: list[re.Match[str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FINDING.match(line)
        if m:
            found.append(m)
            if i + 1 < len(lines) and SOURCE_LINE.match(lines[i + 1]):
                assert SOURCE_LINE.match(lines[i + 1]).group("gutter") == m.group("line"), line
                assert i + 2 < len(lines) and CARET_LINE.match(lines[i + 2]), (
                    line,
                    lines[i + 2 : i + 3],
                )
                i += 3
                continue
            i += 1
            continue
        m = FINDING_NO_POS.match(line)
        if m:
            found.append(m)
        else:
            assert HINT_LINE.match(line) or SUMMARY.match(line), f"unexpected output line: {line!r}"
        i += 1
    return found


# --- malformed-input cases: YAML in, findings out ------------------------------------------


class Case(NamedTuple):
    """One malformed (or `valid-*`) input and what lint must say about it."""

    id: str
    yaml: str  # expected findings are drawn in it: a comment `# ^ CODE` under the line
    also: tuple[Finding, ...] = ()  # findings a marker cannot show (column 1)
    message: str | None = None  # a substring of some finding's message
    hint: str | None = None  # the exact hint of a finding with that message


PYTORCH = dedent("""
    apiVersion: batch.tensorstack.dev/v1beta1
    kind: PyTorchTrainingJob
    metadata:
      name: NAME
    spec:
    SPEC
      replicaSpecs:
        - type: worker
          replicas: 2
          template:
            spec:
              containers:
                - name: python
                  image: pytorch
                  args: [train.py]
    CONTAINER
""")
DEEPSPEED = dedent("""
    apiVersion: batch.tensorstack.dev/v1beta1
    kind: DeepSpeedJob
    metadata:
      name: job
    spec:
    SPEC
      worker:
        replicas: 2
        template:
          spec:
            containers:
              - name: worker
                image: deepspeed
    CONTAINER
""")
GENERIC = dedent("""
    apiVersion: batch.tensorstack.dev/v1beta1
    kind: GenericJob
    metadata:
      name: job
    spec:
    SPEC
      replicaSpecs:
        - type: worker
          replicas: 2
          template:
            spec:
              containers:
                - name: main
                  image: busybox
    CONTAINER
""")


def place(template: str, slot: str, text: str, indent: int) -> str:
    """Put `text` on the slot's line, its first line indented by `indent` spaces.

    Later lines keep their indentation relative to the first, so `# ^ CODE` markers written
    under a line still point at the same column. An empty `text` removes the slot's line.
    """
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return template.replace(f"{slot}\n", "", 1)
    shift = indent - (len(lines[0]) - len(lines[0].lstrip()))
    moved = [" " * shift + line if shift >= 0 else line[-shift:] for line in lines]
    return template.replace(slot, "\n".join(moved), 1)


def pytorch(spec: str = "runPolicy: {}", container: str = "", *, name: str = "job") -> str:
    """A valid PyTorchTrainingJob (2 workers); `spec` starts on line 6, `container` on line 16."""
    text = place(PYTORCH.replace("NAME", name), "SPEC", spec, 2)
    return place(text, "CONTAINER", container, 14)


def deepspeed(spec: str = "config: {run: {python: [train.py]}}", container: str = "") -> str:
    """A valid DeepSpeedJob (2 workers); `spec` starts on line 6, `container` on line 14."""
    return place(place(DEEPSPEED, "SPEC", spec, 2), "CONTAINER", container, 12)


def generic(spec: str = "cleanUpPolicy: All", container: str = "") -> str:
    """A valid GenericJob (2 workers); `spec` starts on line 6, `container` on line 15."""
    return place(place(GENERIC, "SPEC", spec, 2), "CONTAINER", container, 14)


def edit(text: str, old: str, new: str) -> str:
    """Replace `old` once; a case whose edit misses would silently test a valid job."""
    assert text.count(old) == 1, f"{old!r} is not in the template exactly once"
    return text.replace(old, new, 1)


SERVICE = "service: {ports: [{name: http, port: 80}]}"


def check_case(tmp_path: Path, case: Case) -> None:
    """Lint the case's YAML; assert exactly its findings, and its message and hint."""
    diags = lint_text(tmp_path, case.yaml)
    expected = sorted([*marked(case.yaml), *case.also])
    assert expected or case.id.startswith("valid-"), "a case must expect findings or be valid-*"
    assert findings(diags) == expected, "\n".join(
        f"{d.line}:{d.col} {d.code} {d.message} | {d.hint}" for d in diags
    )
    about = [d for d in diags if case.message is None or case.message in d.message]
    assert about or not expected, f"no finding says {case.message!r}"
    if case.hint is not None:
        assert case.hint in [d.hint for d in about]


def case_ids(cases: Sequence[Case]) -> list[str]:
    """The ids of a case table, which must be unique."""
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    return ids
