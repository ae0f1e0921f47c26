"""Render diagnostics as text (with the line and a caret), JSON, GitHub workflow commands or SARIF."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import CODES, Diagnostic, Severity
from .version import __version__

DOCS_URL = "https://github.com/flatjob/flatjob/blob/main/docs/diagnostics.md"


def _sorted(diags: Sequence[Diagnostic]) -> list[Diagnostic]:
    return sorted(diags, key=lambda d: (d.path, d.line, d.col, d.code))


def _style(text: str, color: str | None, enabled: bool) -> str:
    if not enabled or color is None:
        return text
    codes = {"red": "31", "yellow": "33", "bold": "1", "blue": "34", "green": "32"}
    return f"\033[{codes[color]}m{text}\033[0m"


def _one_line(text: str) -> str:
    """Fold line breaks so a finding stays on one line (scripts split output on lines)."""
    return " ".join(text.splitlines()) if "\n" in text or "\r" in text else text


def _printable(line: str) -> str:
    """Show a quoted source line safely: control characters (never tabs) become U+FFFD.

    One character stays one column, so the caret still lines up; a raw ESC or NUL from a
    broken file would otherwise reach the terminal.
    """
    return "".join("\ufffd" if (ch < " " and ch != "\t") or "\x7f" <= ch < "\xa0" else ch for ch in line)


def format_text(diags: Sequence[Diagnostic], color: bool = False) -> str:
    """gcc/rustc style: `path:line:col: severity: message [CODE]`, the line, and a caret."""
    out: list[str] = []
    for d in _sorted(diags):
        sev = _style(d.severity.value, "red" if d.is_error else "yellow", color)
        where = f"{d.path}:{d.line}:{d.col}" if d.line else d.path
        out.append(f"{_style(where, 'bold', color)}: {sev}: {_one_line(d.message)} [{d.code}]")
        if d.source_line is not None and d.line:
            gutter = str(d.line)
            pad = " " * len(gutter)
            prefix = "".join(ch if ch == "\t" else " " for ch in d.source_line[: max(d.col - 1, 0)])
            caret = _style("^", "red" if d.is_error else "yellow", color)
            hint = f" {_one_line(d.hint)}" if d.hint else ""
            out.append(f" {gutter} | {_printable(d.source_line)}")
            out.append(f" {pad} | {prefix}{caret}{hint}")
        elif d.hint:
            out.append(f"  hint: {_one_line(d.hint)}")
    return "\n".join(out) + ("\n" if out else "")


def summary_line(diags: Sequence[Diagnostic], jobs: int, files: int) -> str:
    """One line for stderr: counts of errors, warnings, jobs and files."""
    errors = sum(d.is_error for d in diags)
    warnings = len(diags) - errors
    plural = lambda n, w: f"{n} {w}{'' if n == 1 else 's'}"  # noqa: E731
    return f"{plural(errors, 'error')}, {plural(warnings, 'warning')} ({plural(jobs, 'job')} in {plural(files, 'file')} checked)"


def format_json(diags: Sequence[Diagnostic], jobs: int = 0, files: int = 0) -> str:
    """A stable JSON document for scripts."""
    items = [
        {
            "path": d.path,
            "line": d.line,
            "column": d.col,
            "severity": d.severity.value,
            "code": d.code,
            "name": CODES[d.code].name,
            "message": d.message,
            "hint": d.hint,
            "field": d.field,
        }
        for d in _sorted(diags)
    ]
    errors = sum(d.is_error for d in diags)
    doc = {"version": 1, "diagnostics": items, "summary": {"errors": errors, "warnings": len(diags) - errors, "jobs": jobs, "files": files}}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def format_github(diags: Sequence[Diagnostic]) -> str:
    """GitHub Actions workflow commands, so each finding annotates its line in the PR."""
    out = []
    for d in _sorted(diags):
        level = "error" if d.is_error else "warning"
        props = [f"file={_gh_escape(_uri(d.path), True)}"]  # GitHub wants repository-relative paths
        if d.line:
            props += [f"line={d.line}", f"col={d.col}"]
        props.append(f"title={_gh_escape(f'{d.code} {CODES[d.code].name}', True)}")
        msg = d.message + (f" ({d.hint})" if d.hint else "")
        out.append(f"::{level} {','.join(props)}::{_gh_escape(msg)}")
    return "\n".join(out) + ("\n" if out else "")


def _uri(path: str) -> str:
    """A path as SARIF and GitHub want it: relative to the working directory when inside it."""
    p = Path(path)
    if p.is_absolute():
        with contextlib.suppress(ValueError):
            p = p.resolve().relative_to(Path.cwd().resolve())
    return p.as_posix()


def format_sarif(diags: Sequence[Diagnostic]) -> str:
    """SARIF 2.1.0 for GitHub code scanning (stable rule ids = diagnostic codes)."""
    used = sorted({d.code for d in diags})
    rules = [
        {
            "id": c,
            "name": CODES[c].name,
            "shortDescription": {"text": CODES[c].summary},
            "helpUri": f"{DOCS_URL}#{c.lower()}",
        }
        for c in used
    ]
    results = []
    for d in _sorted(diags):
        region = {"startLine": d.line, "startColumn": d.col} if d.line else {}
        location = {"physicalLocation": {"artifactLocation": {"uri": _uri(d.path)}, **({"region": region} if region else {})}}
        text = d.message + (f" ({d.hint})" if d.hint else "")
        results.append({"ruleId": d.code, "level": "error" if d.is_error else "warning", "message": {"text": text}, "locations": [location]})
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "flatjob", "version": __version__, "informationUri": DOCS_URL, "rules": rules}},
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


FORMATS: dict[str, Callable[..., str]] = {
    "text": format_text,
    "json": format_json,
    "github": format_github,
    "sarif": format_sarif,
}


def use_color(stream_isatty: bool) -> bool:
    """Color only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    return stream_isatty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


__all__ = ["FORMATS", "Severity", "format_github", "format_json", "format_sarif", "format_text", "summary_line", "use_color"]
