"""Where input came from: a source file's text and 1-based line:col marks into it."""

from __future__ import annotations

import bisect
import re
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
    """One input file's text, kept so diagnostics can quote the offending line."""

    path: str
    text: str
    _starts: list[int] | None = field(default=None, repr=False)
    _ends: list[int] | None = field(default=None, repr=False)

    def _index(self) -> tuple[list[int], list[int]]:
        if self._starts is None or self._ends is None:
            starts, ends = [0], []
            for m in _BREAK.finditer(self.text):
                ends.append(m.start())
                starts.append(m.end())
            ends.append(len(self.text))
            self._starts, self._ends = starts, ends
        return self._starts, self._ends

    def line(self, n: int) -> str | None:
        """Return line n (1-based) without its line break, or None when out of range."""
        starts, ends = self._index()
        if not 0 < n <= len(starts) or (n == len(starts) and starts[-1] == len(self.text) and n > 1):
            return None
        return self.text[starts[n - 1] : ends[n - 1]]

    def offset(self, mark: Mark) -> int:
        """Character offset of a 1-based line:col mark (clamped to the text)."""
        starts, _ = self._index()
        if mark.line > len(starts):
            return len(self.text)
        return min(starts[max(mark.line, 1) - 1] + max(mark.col, 1) - 1, len(self.text))

    def mark(self, offset: int) -> Mark:
        """The 1-based line:col of a character offset."""
        starts, _ = self._index()
        line = bisect.bisect_right(starts, offset)
        return Mark(line, offset - starts[line - 1] + 1)
