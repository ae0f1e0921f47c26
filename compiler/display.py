"""Text from inputs made safe to show: in a terminal, a CI log, Markdown, and HTML.

Every string flatjob prints or posts may come from a pull request: a committed file (its
diff), a folder name (an overlay's environment), a job file's name.  Shown raw, a carriage
return or a newline starts a new line (a fake `::error` workflow command, a Markdown line
that closes the diff's code fence and opens `<!--` to hide the rest of a comment), an escape
sequence drives the terminal (OSC 52 writes the clipboard, cursor movement rewrites what was
printed), a bidi override reorders what the reader sees, and a zero-width or other invisible
character makes two different names look the same.  `visible` writes each such
character as a `\\xNN` / `\\uNNNN` escape instead, so it stays one visible line; the
Markdown and HTML forms also escape what those languages would interpret.
"""

from __future__ import annotations

import html
import re

# C0 controls, DEL, C1 controls (0x9b is an escape for many terminals), and INVISIBLE: the
# Unicode line and paragraph separators and every character that shows nothing or moves what
# is shown: all of category Cf (Unicode 14, tests/test_display.py checks the running Python's
# table) — bidi embeddings, overrides and isolates (Trojan Source), the marks U+200E, U+200F
# and U+061C, zero-width spaces and joiners U+200B-U+200D, U+2060-U+2064, U+FEFF, U+00AD,
# tags U+E0000-U+E0FFF — and the default-ignorable characters of other categories: U+034F,
# the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, U+17B4-U+17B5, and variation selectors.
INVISIBLE = (  # a character class's body
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f-\u1160\u17b4-\u17b5"
    "\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
# Lone surrogates: a file name's bytes that are not UTF-8 arrive as U+DC80-U+DCFF (Python's
# surrogateescape) and are written back as those raw bytes, 0x9b (an 8-bit CSI) among them.
_SURROGATES = "\ud800-\udfff"
_SURROGATE_RUN = re.compile(f"[{_SURROGATES}]")
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{INVISIBLE}{_SURROGATES}]")
_UNSAFE_BUT_TABS = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{INVISIBLE}{_SURROGATES}]")
_MARKDOWN = re.compile(r"""([\\`*_{}\[\]()<>#+\-.!|~"'&:=$^@%;/,?])""")  # CommonMark escapes any ASCII punctuation


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    if 0xDC80 <= code <= 0xDCFF:  # the byte a file name held, as `\xNN`
        code -= 0xDC00
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def unicode_text(text: str) -> str:
    """`text` with every lone surrogate (a file name's byte that is not UTF-8) written as its
    `\\xNN` escape: what JSON, SARIF or a message may carry to a UTF-8 stream.  Written back
    raw, such a byte is an 8-bit CSI on a terminal and invalid UTF-8 in a JSON document, and a
    strict UTF-8 stream (a UTF-8 locale's stdout, a file opened with encoding="utf-8") refuses it."""
    return _SURROGATE_RUN.sub(_escape, text) if _SURROGATE_RUN.search(text) else text


def visible(text: str, tabs: bool = True) -> str:
    """One line of text in which no character acts: controls and breaks written as escapes."""
    pattern = _UNSAFE_BUT_TABS if tabs else _UNSAFE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def visible_lines(text: str) -> str:
    """Text of several lines (split at \\n only) in which no character but the newline acts."""
    return "\n".join(visible(line) for line in text.split("\n"))


def log_line(text: str) -> str:
    """`visible`, and never the start of a GitHub Actions workflow command (`::`, `##[`)."""
    out = visible(text)
    return "./" + out if out.startswith(("::", "##[")) else out


def markdown(text: str) -> str:
    """Inline Markdown text that shows exactly `text` (no emphasis, code, link, HTML, table cell)."""
    return _MARKDOWN.sub(r"\\\1", visible(text))


def markdown_code(text: str) -> str:
    """Inline code showing `text` (a path, a command): a backtick run longer than any inside it;
    text holding `|` (which ends a table cell even in code) is escaped text instead."""
    shown = visible(text)
    if "|" in shown:
        return markdown(text)
    ticks = "`" * (max((len(r) for r in re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") or not shown.strip() else ""
    return f"{ticks}{pad}{shown}{pad}{ticks}"


def html_text(text: str) -> str:
    """Text inside an HTML element of a Markdown document (`<summary>`), shown as written."""
    return html.escape(visible(text), quote=True)


def code_block(text: str, info: str = "") -> str:
    """A fenced code block showing `text` whole: its lines made visible (no carriage return
    or other break can end a line early) and a fence longer than any run of backticks in it."""
    body = visible_lines(text.rstrip("\n"))
    runs = [len(r) for r in re.findall("`+", body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{info}\n{body}\n{fence}\n"
