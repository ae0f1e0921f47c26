"""How findings are printed, and what `flatjob lint` exits with.

Covers: text (the line, and a caret under the column with tabs kept, hints, control
characters, findings without a position); JSON (documented keys, order, stability); GitHub
workflow commands (escaping as the Actions toolkit does, repository-relative paths); SARIF
2.1.0 essentials; exit codes 0 (clean, warnings allowed), 1 (errors), 2 (usage).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from lintkit import dedent, run_cli, write

from flatjob.compiler.errors import CODES, Diagnostic, Severity
from flatjob.compiler.report import format_github, format_json, format_sarif, format_text

UNKNOWN_FIELD = Diagnostic(
    "FJ201",
    "unknown field 'slotPerWorker' in spec.config",
    "jobs/ds.yaml",
    7,
    5,
    hint="did you mean 'slotsPerWorker'?",
    field="spec.config.slotPerWorker",
    source_line="    slotPerWorker: 1",
)
WARNING = Diagnostic(
    "FJ314",
    "every replica count is 0: the job would create no pods",
    "jobs/a.yaml",
    5,
    1,
    severity=Severity.WARNING,
    field="spec",
    source_line="spec:",
)
UNREADABLE = Diagnostic("FJ103", "cannot read: Permission denied", "jobs/secret.yaml")

WARNING_JOB = """
    apiVersion: batch.tensorstack.dev/v1beta1
    kind: PyTorchTrainingJob
    metadata: {name: idle}
    spec:
      replicaSpecs:
        - type: worker
          replicas: 0
          template: {spec: {containers: [{name: python, image: p}]}}
"""
ERROR_JOB = WARNING_JOB.replace("replicas: 0", "replicas: -1")


# --- text ----------------------------------------------------------------------------------


def test_text_has_the_line_and_a_caret_under_the_column() -> None:
    assert format_text([UNKNOWN_FIELD]) == (
        "jobs/ds.yaml:7:5: error: unknown field 'slotPerWorker' in spec.config [FJ201]\n"
        " 7 |     slotPerWorker: 1\n"
        "   |     ^ did you mean 'slotsPerWorker'?\n"
    )


def test_text_keeps_tabs_so_the_caret_lines_up() -> None:
    d = Diagnostic("FJ204", "bad", "a.yaml", 12, 7, source_line="\t\tab: x")
    lines = format_text([d]).splitlines()
    assert lines[1] == " 12 | \t\tab: x"
    assert lines[2] == "    | \t\t    ^"


def test_text_from_a_real_file_with_tabs(tmp_path: Path) -> None:
    path = write(tmp_path, "apiVersion: v1\nkind: ConfigMap\ndata: {a:\t[1}\n")
    result = run_cli("lint", str(path))
    assert result.stdout.splitlines()[1:3] == [
        " 3 | data: {a:\t[1}",
        "   |          \t  ^ the '[' on line 3, column 11 is not closed: end its list with ']', or separate its items with ','",
    ]
    assert result.stdout.startswith(f"{path}:3:13: error: YAML syntax error")


def test_text_without_a_position_or_source_line() -> None:
    hinted = Diagnostic("FJ103", "is a directory", "jobs", hint="name the files")
    assert format_text([UNREADABLE, hinted]) == (
        "jobs: error: is a directory [FJ103]\n  hint: name the files\n"
        "jobs/secret.yaml: error: cannot read: Permission denied [FJ103]\n"
    )


def test_text_keeps_each_finding_on_one_line() -> None:
    d = Diagnostic("FJ100", "first\nsecond \x1b[31m", "a.yaml", 1, 2, source_line="ab", hint="x\x07y")
    assert format_text([d]).splitlines() == [
        "a.yaml:1:2: error: first second \ufffd[31m [FJ100]",
        " 1 | ab",
        "   |  ^ x\ufffdy",
    ]


def test_text_never_quotes_a_line_with_control_characters() -> None:
    """A link to /proc/self/environ or a binary must not print its content (secrets) anywhere."""
    d = Diagnostic("FJ100", "bad", "a.yaml", 1, 2, source_line="TOKEN=s3cret\x00HOME=/root", hint="fix it")
    assert format_text([d]).splitlines() == ["a.yaml:1:2: error: bad [FJ100]", "  hint: fix it"]


def test_text_quotes_a_window_of_a_long_line() -> None:
    line = "x" * 100_000 + "!" + "y" * 100_000
    d = Diagnostic("FJ100", "bad", "a.yaml", 1, 100_001, source_line=line)
    quoted, caret = format_text([d]).splitlines()[1:]
    assert len(quoted) < 200 and quoted.startswith(" 1 | \u2026x") and quoted.endswith("y\u2026")
    assert quoted[caret.index("^")] == "!"


def test_text_cuts_a_huge_message() -> None:
    d = Diagnostic("FJ305", "job name " + "a" * 10_000 + " is bad", "a.yaml", 1, 1)
    assert len(format_text([d])) < 600


def test_text_is_sorted_by_path_line_column() -> None:
    out = format_text([UNKNOWN_FIELD, WARNING, UNREADABLE])
    heads = [line.split(": ", 1)[0] for line in out.splitlines() if line.startswith("jobs/")]
    assert heads == ["jobs/a.yaml:5:1", "jobs/ds.yaml:7:5", "jobs/secret.yaml"]


def test_text_color_only_when_asked() -> None:
    assert "\033[" not in format_text([UNKNOWN_FIELD])
    colored = format_text([UNKNOWN_FIELD], color=True)
    assert "\033[31merror\033[0m" in colored
    assert "\033[31m^\033[0m" in colored


# --- json ----------------------------------------------------------------------------------


def test_json_has_the_documented_keys() -> None:
    doc = json.loads(format_json([UNKNOWN_FIELD, WARNING, UNREADABLE], jobs=2, files=3))
    assert list(doc) == ["version", "diagnostics", "summary"]
    assert doc["version"] == 1
    assert doc["summary"] == {"errors": 2, "warnings": 1, "jobs": 2, "files": 3}
    assert doc["diagnostics"][1] == {
        "path": "jobs/ds.yaml",
        "line": 7,
        "column": 5,
        "severity": "error",
        "code": "FJ201",
        "name": "unknown-field",
        "message": "unknown field 'slotPerWorker' in spec.config",
        "hint": "did you mean 'slotsPerWorker'?",
        "field": "spec.config.slotPerWorker",
    }
    assert [d["code"] for d in doc["diagnostics"]] == ["FJ314", "FJ201", "FJ103"]
    assert doc["diagnostics"][2]["line"] == 0


def test_json_is_stable() -> None:
    one = format_json([UNREADABLE, WARNING, UNKNOWN_FIELD], jobs=1, files=1)
    two = format_json([UNKNOWN_FIELD, UNREADABLE, WARNING], jobs=1, files=1)
    assert one == two
    assert (
        format_json([])
        == '{\n  "version": 1,\n  "diagnostics": [],\n  "summary": {\n    "errors": 0,'
        '\n    "warnings": 0,\n    "jobs": 0,\n    "files": 0\n  }\n}\n'
    )


def test_json_from_the_cli_counts_jobs_and_files(tmp_path: Path) -> None:
    write(tmp_path, ERROR_JOB, "bad.yaml")
    write(tmp_path, WARNING_JOB.replace("idle", "idle2"), "warn.yaml")
    result = run_cli("lint", "--format", "json", str(tmp_path))
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["summary"] == {"errors": 1, "warnings": 1, "jobs": 2, "files": 2}
    assert result.stderr == ""


# --- github --------------------------------------------------------------------------------

WORKFLOW_COMMAND = re.compile(
    r"^::(error|warning) (file=[^,:]*)(,line=\d+,col=\d+)?,title=[^,:]*::[^\r\n]*$"
)


def test_github_workflow_commands() -> None:
    assert format_github([UNKNOWN_FIELD, WARNING]) == (
        "::warning file=jobs/a.yaml,line=5,col=1,title=FJ314 no-replicas::"
        "every replica count is 0: the job would create no pods\n"
        "::error file=jobs/ds.yaml,line=7,col=5,title=FJ201 unknown-field::"
        "unknown field 'slotPerWorker' in spec.config (did you mean 'slotsPerWorker'?)\n"
    )


def test_github_escapes_like_the_actions_toolkit() -> None:
    d = Diagnostic("FJ204", "100% bad\r\nvalue: a,b", "odd:dir,x/a%.yaml", 3, 4)
    (line,) = format_github([d]).splitlines()
    assert line == (
        "::error file=odd%3Adir%2Cx/a%25.yaml,line=3,col=4,title=FJ204 bad-value::"
        "100%25 bad%0D%0Avalue: a,b"
    )
    assert WORKFLOW_COMMAND.match(line)


def test_a_file_name_never_acts_in_a_log_or_a_terminal() -> None:
    """A job file's name is anyone's: a newline would start a forged workflow command, an
    escape sequence drive the terminal, a bidi override reorder the line."""
    d = Diagnostic("FJ201", "unknown field", "jobs/a\n::error file=f.yaml::forged\x1b[31m\u202e.yaml", 4, 1)
    (line,) = format_github([d]).splitlines()
    assert WORKFLOW_COMMAND.match(line) and "\x1b" not in line and "\u202e" not in line and line.count("::error") == 1
    text = format_text([d])
    assert "\x1b" not in text and "\u202e" not in text and "jobs/a\\x0a::error" in text.splitlines()[0]


def test_github_without_a_position() -> None:
    assert format_github([UNREADABLE]) == (
        "::error file=jobs/secret.yaml,title=FJ103 unreadable::cannot read: Permission denied\n"
    )


def test_github_paths_are_relative_to_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, ERROR_JOB, "bad.yaml")
    result = run_cli("lint", "--format", "github", str(path.resolve()))
    assert result.exit_code == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith("::error file=bad.yaml,line=7,col=17,title=FJ204 bad-value::")
    assert WORKFLOW_COMMAND.match(line)


# --- sarif ---------------------------------------------------------------------------------


def test_sarif_essentials() -> None:
    doc = json.loads(format_sarif([UNKNOWN_FIELD, WARNING, UNREADABLE]))
    assert doc["version"] == "2.1.0"
    assert doc["$schema"].endswith("sarif-2.1.0.json")
    (run,) = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "flatjob" and driver["version"]
    rule_ids = [r["id"] for r in driver["rules"]]
    assert rule_ids == ["FJ103", "FJ201", "FJ314"]
    for rule in driver["rules"]:
        assert rule["name"] == CODES[rule["id"]].name
        assert rule["shortDescription"]["text"] == CODES[rule["id"]].summary
        assert rule["helpUri"].endswith("#" + rule["id"].lower())
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert set(by_rule) == set(rule_ids)
    assert by_rule["FJ201"] == {
        "ruleId": "FJ201",
        "level": "error",
        "message": {
            "text": "unknown field 'slotPerWorker' in spec.config (did you mean 'slotsPerWorker'?)"
        },
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": "jobs/ds.yaml"},
                    "region": {"startLine": 7, "startColumn": 5},
                }
            }
        ],
    }
    assert by_rule["FJ314"]["level"] == "warning"
    assert "region" not in by_rule["FJ103"]["locations"][0]["physicalLocation"]


def test_sarif_with_no_findings_is_still_a_run() -> None:
    doc = json.loads(format_sarif([]))
    assert doc["runs"][0]["results"] == [] and doc["runs"][0]["tool"]["driver"]["rules"] == []


# --- exit codes ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_exit_0_when_only_warnings(tmp_path: Path, fmt: str) -> None:
    result = run_cli("lint", "--format", fmt, str(write(tmp_path, WARNING_JOB)))
    assert result.exit_code == 0
    assert "FJ314" in result.stdout


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_exit_1_on_errors(tmp_path: Path, fmt: str) -> None:
    result = run_cli("lint", "--format", fmt, str(write(tmp_path, ERROR_JOB)))
    assert result.exit_code == 1
    assert "FJ204" in result.stdout


def test_exit_0_and_silent_stdout_when_clean(tmp_path: Path) -> None:
    result = run_cli(
        "lint", str(write(tmp_path, dedent(WARNING_JOB).replace("replicas: 0", "replicas: 1")))
    )
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == "0 errors, 0 warnings (1 job in 1 file checked)\n"
    assert run_cli("lint", "--quiet", str(tmp_path)).stderr == ""


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ([], "Missing argument 'PATHS...'"),
        (["--format", "xml", "."], "'xml' is not one of 'github', 'json', 'sarif', 'text'"),
        (["does-not-exist.yaml"], "Path 'does-not-exist.yaml' does not exist"),
        (["--no-such-option", "."], "No such option '--no-such-option'"),
    ],
    ids=["no-paths", "bad-format", "missing-path", "bad-option"],
)
def test_exit_2_on_usage_errors(args: list[str], complaint: str) -> None:
    result = run_cli("lint", *args)
    assert result.exit_code == 2
    assert complaint in result.stderr
    assert result.stdout == ""
