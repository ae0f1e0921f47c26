"""Where input came from: a source file's text and 1-based line:col marks into it."""

from __future__ import annotations

import bisect
import re
from array import array
from dataclasses import dataclass, field
from typing import NamedTuple


class Mark(NamedTuple):
    """A 1-based line and column in a source file (a tuple: one is made per YAML node)."""

    line: int
    col: int


# What YAML counts as a line break (YAML 1.1, as libyaml's marks do); str.splitlines also
# breaks at \v, \f and \x1c-\x1e, which would put quoted lines out of step with the marks.
_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


@dataclass
class Source:
    """One input file's text, kept so diagnostics can quote the offending line.

    The line index is built only as far as a lookup needs (a finding on line 1001 of a file of
    a million lines scans a thousand), one 8-byte start per line (array, not a list of ints).
    """

    path: str
    text: str
    _starts: array[int] = field(default_factory=lambda: array("q", [0]), repr=False)
    _scanned: int = field(default=0, repr=False)  # the text is indexed up to here (len+1: whole)

    def _index(self, line: int = -1, offset: int = -1) -> array[int]:
        """The starts of lines, at least through `line` (1-based) or past `offset`; -1 for all."""
        starts, text = self._starts, self.text
        whole = len(text) + 1
        while self._scanned < whole and (line < 0 or len(starts) <= line) and (offset < 0 or starts[-1] <= offset):
            chunk = _BREAK.search(text, self._scanned)
            if chunk is None or (offset < 0 and line < 0):
                starts.extend(m.end() for m in _BREAK.finditer(text, self._scanned))
                self._scanned = whole
                break
            starts.append(chunk.end())
            self._scanned = chunk.end()
        return starts

    def line(self, n: int) -> str | None:
        """Return line n (1-based) without its line break, or None when out of range."""
        starts = self._index(line=n)
        if not 0 < n <= len(starts) or (n == len(starts) and starts[-1] == len(self.text) and n > 1):
            return None
        start = starts[n - 1]
        end = _BREAK.search(self.text, start)
        return self.text[start : end.start() if end is not None and n < len(starts) else len(self.text)]

    def offset(self, mark: Mark) -> int:
        """Character offset of a 1-based line:col mark (clamped to the text)."""
        starts = self._index(line=mark.line)
        if mark.line > len(starts):
            return len(self.text)
        return min(starts[max(mark.line, 1) - 1] + max(mark.col, 1) - 1, len(self.text))

    def mark(self, offset: int) -> Mark:
        """The 1-based line:col of a character offset."""
        starts = self._index(offset=offset)
        line = bisect.bisect_right(starts, offset)
        return Mark(line, offset - starts[line - 1] + 1)
