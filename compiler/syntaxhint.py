"""What to do about a YAML syntax error (FJ100): a newcomer's two usual causes, a tab and a
line indented off its mapping's column, named with the columns involved (issue 25).

libyaml's own words ("did not find expected '-' indicator", "mapping values are not allowed in
this context", "found character that cannot start any token") say what the parser expected, not
what to change. Pure functions of the problem and the source's lines.

The column a misplaced line is compared with is its mapping's, found as YAML nests: the nearest
line above that starts a mapping key (or a list item) at the same or a smaller indentation,
skipping blank lines, comments and the contents of block scalars (`|`, `>`), whatever their
own indentation (issue 22: the nearest line alone named a key three levels deeper).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

TAB_HINT = "YAML indents with spaces only: replace the tab(s) at the start of this line with spaces"
TAB_ELSEWHERE_HINT = "YAML does not take a tab here: replace the tab(s) on this line with spaces"

# libyaml's problems that a line indented off its column causes.
INDENT_PROBLEMS = (
    "mapping values are not allowed",
    "did not find expected '-' indicator",
    "did not find expected key",
    "expected <block end>",
)

# A block line: its indentation, its list markers ("- ", "- - "), then the rest.
_LINE = re.compile(r"(?P<indent> *)(?P<dashes>(?:-(?: +|$))*)(?P<rest>.*)$")
# A mapping key at the start of the rest: quoted, or plain up to the first ": " (or ":" at the end).
# A plain key's own lazy run takes the spaces before its ':' (a `\s*` after it as well made a
# long line of spaces with no ':' quadratic: 46 s to lint a 300 KB file).
_KEY = re.compile(r"""(?:"(?:[^"\\]|\\.)*"\s*|'(?:[^']|'')*'\s*|[^\s#'"\[\]{},&*!|>%@`-][^#]*?|-[^\s#][^#]*?):(?:\s|$)""")
# A block scalar's header as a key's or an item's value: `|`, `>-`, `|2 # comment`, `!!str |`.
_BLOCK_SCALAR = re.compile(r"\s*(?:[!&]\S*\s+)*[|>][0-9+-]*\s*(?:#.*)?$")
_DOCUMENT_MARKER = re.compile(r"(?:---|\.\.\.)(?:\s|$)")


@dataclass(frozen=True)
class Level:
    """A line that opens a level of the block structure: a mapping key, a list item, or both."""

    line: int
    start: int  # 1-based column of its first character (the key, or the item's '-')
    key: int | None  # 1-based column of its key, None for an item without one (`- a`)
    item: bool  # it starts with '- '


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
    here = _level(line_no, text)
    levels, block = _levels_above(line_no, line_of)
    col = len(indent) + 1
    if block is not None and block.column is not None and block.parent < len(indent) < block.column - 1:
        return (
            f"check the indentation: this line starts at column {col}, left of the block scalar of line {block.line}, "
            f"whose lines start at column {block.column}; a block scalar's lines start in one column"
        )
    ref = next((lv for lv in reversed(levels) if lv.start <= col and (lv.key is not None or (here is not None and here.item and lv.item))), None)
    if ref is None:
        return None
    if here is not None and here.item and ref.item:
        if col == ref.start:
            return None  # lined up with the list above: the cause is elsewhere
        return (
            f"check the indentation: this line's '- ' is at column {col}, line {ref.line}'s at column {ref.start}; "
            "items of one list start in one column"
        )
    if ref.key is None or col == ref.key:
        return None  # lined up with the key above: the cause is elsewhere
    if ref.item and col == ref.start:
        return (
            f"check the indentation: this line starts at column {col}, under the '- ' of line {ref.line}; "
            f"a key of that list item starts at column {ref.key}, a new item with '- '"
        )
    deeper = min((lv for lv in levels if lv.line > ref.line and lv.start > col), key=lambda lv: (lv.start, lv.line), default=None)
    if col > ref.key and deeper is not None:
        return (
            f"check the indentation: this line starts at column {col}, a column no key above starts at: the key on line {ref.line} "
            f"is at column {ref.key}, line {deeper.line}'s at column {deeper.start}; keys of one mapping start in one column"
        )
    return (
        f"check the indentation: this line starts at column {col}, the key on line {ref.line} at column {ref.key}; "
        "keys of one mapping start in one column"
    )


# A bracket or quote left open, as libyaml reports it: (its context, words of the problem) -> what
# closes it.  A quoted value left open runs to the end of the file, where libyaml reports it: a
# line past the last, so no line to show and no caret (`name: "mnist` said 35:1 of a 34-line file).
_UNCLOSED = {
    "while scanning a quoted scalar": ("end of stream", None),
    "while parsing a flow sequence": ("expected ',' or ']'", "]"),
    "while parsing a flow mapping": ("expected ',' or '}'", "}"),
}


@dataclass(frozen=True)
class Unclosed:
    """A quote or bracket never closed: where to show the error (the opening) and the hint."""

    line: int
    column: int
    hint: str
    at_opening: bool  # the error is shown at the opening, not where libyaml stopped


def unclosed(context: str | None, problem: str, opened: tuple[int, int] | None, line_of: Callable[[int], str | None]) -> Unclosed | None:
    """What was left open, when libyaml's `context` is a quoted value, a `[...]` or a `{...}`
    that began at `opened` (1-based line, column) and its `problem` says it was never closed."""
    if context not in _UNCLOSED or opened is None:
        return None
    words, closer = _UNCLOSED[context]
    if words not in problem:
        return None
    line, column = opened
    if closer is None:  # a quoted value: shown at its opening quote, where the mistake is
        char = (line_of(line) or "")[column - 1 : column]
        quote = char if char in ("'", '"') else "quote"  # only ever a quote character, never the file's text
        return Unclosed(line, column, f"this quoted value is never closed: add its closing {quote}", True)
    opener, kind = ("[", "list") if closer == "]" else ("{", "mapping")
    return Unclosed(line, column, f"the '{opener}' on line {line}, column {column} is not closed: end its {kind} with '{closer}', or separate its items with ','", False)


# T9k's manuals write `...` (or `- ...`) for the fields a snippet leaves out; copied as is, YAML
# reads it as a value or the end of the document, and libyaml stops on the line after it, or past
# the last line (no line shown, no caret): `mapping values are not allowed`, or `could not find
# expected ':'` at 10:1 of a 9-line file, with a hint about indentation that sent a newcomer
# looking at the wrong line.
PLACEHOLDER_HINT = "'...' stands for fields T9k's manuals leave out; YAML does not: write those fields here, or delete this line"
# Indented, or a list item: `...` at column 1 is YAML's own end of a document.
_PLACEHOLDER = re.compile(r"(?P<lead> +(?:- +)?|- +)\.\.\.[ \t]*(?:#.*)?")


# Lines looked back over, past blank lines and comments, for a placeholder or the file's last
# line: a walk over every line was 3.6 s of CPU for a bracket left open before 4 MiB of blank lines.
LOOK_BACK = 100


def placeholder(line_no: int, context_line: int | None, line_of: Callable[[int], str | None]) -> tuple[int, int] | None:
    """(line, column) of a `...` placeholder that caused the syntax error at `line_no`: on
    libyaml's context line, on the error's line, or on the nearest line above it that holds
    something (past blank lines and comments, LOOK_BACK at most)."""
    above = line_no - 1
    while line_no - above < LOOK_BACK and above > 0 and (text := line_of(above)) is not None and (not text.strip() or text.lstrip().startswith("#")):
        above -= 1
    for n in dict.fromkeys(n for n in (context_line, line_no, above) if n):
        m = _PLACEHOLDER.fullmatch(line_of(n) or "")
        if m is not None:
            return n, len(m["lead"]) + 1
    return None


END_HINT = "the file ends here, before YAML found what it expected: check what is left open above"


def end_of_text(line_no: int, line_of: Callable[[int], str | None]) -> tuple[int, int]:
    """Where to show an error libyaml reports past the last line (line `line_no`, which has no
    text to quote): just after the last line above it that holds something (LOOK_BACK lines at
    most: else the last line, blank)."""
    n = line_no - 1
    while n > 1 and line_no - n < LOOK_BACK and not (line_of(n) or "").strip():
        n -= 1
    return max(n, 1), len((line_of(n) or "").rstrip()) + 1


def explain(problem: str, context: str | None, at: tuple[int, int], opened: tuple[int, int] | None, line_of: Callable[[int], str | None]) -> tuple[int, int, str | None]:
    """(line, column, hint) of a syntax error libyaml reports as `problem` at `at` (1-based),
    `context` begun at `opened`: moved to the mistake where libyaml stops past it (a quote left
    open, a `...` placeholder), and never past the last line, which has no text to show."""
    line, col = at
    left_open = unclosed(context, problem, opened, line_of)
    elided = None if left_open is not None else placeholder(line, opened[0] if opened else None, line_of)
    if left_open is not None:
        hint = left_open.hint
        if left_open.at_opening:
            line, col = left_open.line, left_open.column
    elif elided is not None:
        (line, col), hint = elided, PLACEHOLDER_HINT
    else:  # the indentation hint only here: it reads every line above (_levels_above)
        hint = syntax_hint(problem, line, line_of)
        if line_of(line) is None and opened is not None and line_of(opened[0]) is not None:
            line, col = opened  # past the last line: where libyaml began what it could not finish
    if line_of(line) is None:  # still past the last line: the end of the text
        (line, col), hint = end_of_text(line, line_of), hint or END_HINT
    return line, col, hint


def _level(n: int, text: str) -> Level | None:
    """The level line `n` opens, or None (a flow or scalar continuation line)."""
    return _parse(n, text)[0]


def _parse(n: int, text: str) -> tuple[Level | None, int | None]:
    """The level line `n` opens, and, where its value is a block scalar's header, the
    indentation the scalar's lines must exceed."""
    m = _LINE.match(text)
    if m is None:
        return None, None
    indent, dashes, rest = len(m["indent"]), m["dashes"], m["rest"]
    key = _KEY.match(rest)
    level = Level(n, indent + 1, indent + len(dashes) + 1 if key else None, bool(dashes)) if key or dashes else None
    if not _BLOCK_SCALAR.match(rest[key.end():] if key else rest):
        return level, None
    return level, indent + len(dashes) if key else indent + dashes.rstrip().rfind("-")


@dataclass(frozen=True)
class Block:
    """An open block scalar: its header's line, the indentation its lines must exceed, and the
    column its first line set (None until one is seen)."""

    line: int
    parent: int
    column: int | None = None


def _levels_above(line_no: int, line_of: Callable[[int], str | None]) -> tuple[list[Level], Block | None]:
    """The levels opened on the lines of this document above `line_no`, top down, and the block
    scalar still open at `line_no`: blank lines, comments and block scalars' contents skipped (a
    block scalar holds the lines after its header that are blank or indented as its first one)."""
    levels: list[Level] = []
    block: Block | None = None
    for n in range(1, line_no):
        text = line_of(n)
        if text is None:
            break
        stripped = text.lstrip(" ")
        spaces = len(text) - len(stripped)
        if block is not None:
            if not stripped.strip():
                continue
            if block.column is None and spaces > block.parent:
                block = Block(block.line, block.parent, spaces + 1)
                continue
            if block.column is not None and spaces + 1 >= block.column:
                continue
            block = None
        if not stripped.strip() or stripped.startswith("#"):
            continue
        if _DOCUMENT_MARKER.match(text):
            levels = []  # a new document: nothing above it is its parent
            continue
        level, parent = _parse(n, text)
        if level is not None:
            levels.append(level)
        if parent is not None:
            block = Block(n, parent)
    return levels, block
