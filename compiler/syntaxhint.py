"""What to do about a YAML syntax error (FJ100): a newcomer's two usual causes, a tab and a
line indented off its mapping's column, named with the columns involved (issue 25).

libyaml's own words ("did not find expected '-' indicator", "mapping values are not allowed in
this context", "found character that cannot start any token") say what the parser expected, not
what to change. Pure functions of the problem and the source's lines.
"""

from __future__ import annotations

from collections.abc import Callable

TAB_HINT = "YAML indents with spaces only: replace the tab(s) at the start of this line with spaces"
TAB_ELSEWHERE_HINT = "YAML does not take a tab here: replace the tab(s) on this line with spaces"

# libyaml's problems that a line indented off its column causes.
INDENT_PROBLEMS = (
    "mapping values are not allowed",
    "did not find expected '-' indicator",
    "did not find expected key",
    "expected <block end>",
)


def syntax_hint(problem: str, line_no: int, line_of: Callable[[int], str | None]) -> str | None:
    """A hint for the syntax error `problem` at 1-based line `line_no`; line_of(n) is line n's text."""
    text = line_of(line_no) or ""
    indent = text[: len(text) - len(text.lstrip(" \t"))]
    if "\t" in indent:
        return TAB_HINT
    if "tab" in problem or ("cannot start any token" in problem and "\t" in text):
        return TAB_ELSEWHERE_HINT
    if not any(p in problem for p in INDENT_PROBLEMS) or not text.strip():
        return None
    above = _line_above(line_no, line_of)
    if above is None:
        return None
    n, above_text = above
    col = len(indent) + 1
    start = len(above_text) - len(above_text.lstrip(" ")) + 1
    item = above_text.lstrip(" ").startswith("- ")
    key = start + 2 if item else start
    if col == key:
        return None  # lined up with the key above: the cause is elsewhere
    if item and col == start:
        return (
            f"check the indentation: this line starts at column {col}, under the '- ' of line {n}; "
            f"a key of that list item starts at column {key}, a new item with '- '"
        )
    return (
        f"check the indentation: this line starts at column {col}, the key on line {n} at column {key}; "
        "keys of one mapping start in one column"
    )


def _line_above(line_no: int, line_of: Callable[[int], str | None]) -> tuple[int, str] | None:
    """The nearest line above that holds YAML (not blank, not only a comment)."""
    for n in range(line_no - 1, max(0, line_no - 50), -1):
        text = line_of(n)
        if text is not None and text.strip() and not text.lstrip().startswith("#"):
            return n, text
    return None
