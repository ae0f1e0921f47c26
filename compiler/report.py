"""Render diagnostics as text (with the line and a caret), JSON, GitHub workflow commands or SARIF."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from .display import INVISIBLE, unicode_text, visible
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


# Controls (never tabs), and the separators and invisible characters (display.INVISIBLE).
_CONTROL = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{INVISIBLE}]")
_CONTROL_BUT_BREAKS = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{INVISIBLE}]")
QUOTE_WIDTH = 160  # a longer source line is quoted as a window around the column
MESSAGE_WIDTH = 500  # a longer message (one that embeds a huge value) is cut


def _printable(text: str) -> str:
    """Text safe for a terminal or a CI log: control characters (never tabs) become U+FFFD, and
    a file name's bytes that are not UTF-8 (a message may name another file) `\\xNN`."""
    text = unicode_text(text)
    return _CONTROL.sub("\ufffd", text) if _CONTROL.search(text) else text


def _message(text: str, breaks: bool = False) -> str:
    """Printable text of at most MESSAGE_WIDTH characters, on one line unless `breaks`."""
    text = _CONTROL_BUT_BREAKS.sub("\ufffd", unicode_text(text)) if breaks else _printable(_one_line(text))
    return text if len(text) <= MESSAGE_WIDTH else text[: MESSAGE_WIDTH - 1] + "\u2026"


def quotable(line: str | None) -> bool:
    """Whether a source line may be shown: never one holding control characters.

    A file that is not text (a link to /proc/self/environ, a binary) would otherwise print
    its content, secrets included, into a terminal, a CI log or the Argo CD UI.
    """
    return line is not None and not _CONTROL.search(line)


def _window(line: str, col: int) -> tuple[str, int]:
    """The part of a long line around a 1-based column, and the column within that part."""
    if len(line) <= QUOTE_WIDTH:
        return line, col
    start = max(0, min(col - 1 - QUOTE_WIDTH // 3, len(line) - QUOTE_WIDTH))
    part = line[start : start + QUOTE_WIDTH]
    head = "\u2026" if start else ""
    tail = "\u2026" if start + QUOTE_WIDTH < len(line) else ""
    return head + part + tail, col - start + len(head)


def format_text(diags: Sequence[Diagnostic], color: bool = False) -> str:
    """gcc/rustc style: `path:line:col: severity: message [CODE]`, the line, and a caret."""
    out: list[str] = []
    for d in _sorted(diags):
        sev = _style(d.severity.value, "red" if d.is_error else "yellow", color)
        where = f"{visible(d.path)}:{d.line}:{d.col}" if d.line else visible(d.path)  # a file's name is anyone's
        if where.startswith(("::", "##[")):  # a file named like a GitHub Actions workflow command
            where = "./" + where
        out.append(f"{_style(where, 'bold', color)}: {sev}: {_message(d.message)} [{d.code}]")
        hint = f" {_message(d.hint)}" if d.hint else ""
        if d.line and quotable(d.source_line):
            assert d.source_line is not None
            line, col = _window(d.source_line, d.col)
            gutter = str(d.line)
            pad = " " * len(gutter)
            prefix = "".join(ch if ch == "\t" else " " for ch in line[: max(col - 1, 0)])
            caret = _style("^", "red" if d.is_error else "yellow", color)
            out.append(f" {gutter} | {line}")
            out.append(f" {pad} | {prefix}{caret}{hint}")
        elif d.hint:
            out.append(f"  hint:{hint}")
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
            "path": unicode_text(d.path),  # a file's name is anyone's: its bytes that are not UTF-8 as `\\xNN`
            "line": d.line,
            "column": d.col,
            "severity": d.severity.value,
            "code": d.code,
            "name": CODES[d.code].name,
            "message": unicode_text(d.message),
            "hint": unicode_text(d.hint) if d.hint else d.hint,
            "field": unicode_text(d.field) if isinstance(d.field, str) else d.field,
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
        props = [f"file={_gh_escape(visible(_uri(d.path)), True)}"]  # GitHub wants repository-relative paths; a name is anyone's
        if d.line:
            props += [f"line={d.line}", f"col={d.col}"]
        props.append(f"title={_gh_escape(f'{d.code} {CODES[d.code].name}', True)}")
        msg = _message(d.message + (f" ({d.hint})" if d.hint else ""), breaks=True)
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
        location = {"physicalLocation": {"artifactLocation": {"uri": unicode_text(_uri(d.path))}, **({"region": region} if region else {})}}
        text = unicode_text(d.message + (f" ({d.hint})" if d.hint else ""))
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
