"""Unified diffs that stay linear in the size of what changed.

difflib matches a whole file at once: on a `podtemplates.yaml` of 1 000 pods that each repeat
the same lines, one changed argument took `compile --check` 12-14 s, 3 000 pods 137 s, and an
image bump in each type of a 100-type `job.yaml` 25 s (it grows with the square; reviews of
rounds 8 and 9).  So lines are matched as YAML nests them: the common head and tail are set
aside, then the rest is cut at its least indented lines (a stream's `---` first, then a
document's top-level keys, then the items of the list below...), the pieces are matched
whole, and each pair of changed pieces is diffed the same way, down to difflib once a pair is
small.  The output is a unified diff (`---`/`+++`, `@@` hunks with 3 lines of context) that
`git apply` and `patch` take; a small file is diffed as difflib diffs it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence

Opcode = tuple[str, int, int, int, int]  # (tag, a from, a to, b from, b to), as difflib's
CONTEXT = 3
SEPARATOR = "---\n"
SMALL = 40_000  # lines x lines under which difflib matches a pair directly (a few ms)
DEPTH = 12  # nesting levels cut at most


def documents(lines: Sequence[str]) -> list[tuple[int, int]]:
    """The [from, to) line ranges of a YAML stream's documents, each from its `---` on."""
    return _cut(lines, 0, len(lines), -1)


def _indent(line: str) -> int:
    """How deep a line nests: -1 for a document separator, its leading spaces otherwise."""
    return -1 if line == SEPARATOR else len(line) - len(line.lstrip(" "))


def _cut(lines: Sequence[str], lo: int, hi: int, level: int) -> list[tuple[int, int]]:
    """lines[lo:hi] in pieces, each from a line nested at most `level` deep on."""
    starts = [lo, *(i for i in range(lo + 1, hi) if lines[i].strip() and _indent(lines[i]) <= level)]
    return [(s, e) for s, e in zip(starts, [*starts[1:], hi], strict=True) if e > s]


def _level(a: Sequence[str], i1: int, i2: int, b: Sequence[str], j1: int, j2: int) -> int | None:
    """The least nesting that cuts either side into pieces (None: every line nests alike)."""
    depths = sorted({_indent(line) for line in (*a[i1 + 1:i2], *b[j1 + 1:j2]) if line.strip()})
    return depths[0] if depths else None


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """How to turn lines `a` into lines `b`, matched piece by piece (see the module's doc)."""
    out: list[Opcode] = []
    _match(a, b, 0, len(a), 0, len(b), out, DEPTH)
    return _merged(out)


def _match(a: Sequence[str], b: Sequence[str], i1: int, i2: int, j1: int, j2: int, out: list[Opcode], depth: int) -> None:
    """Append the opcodes turning a[i1:i2] into b[j1:j2]: difflib's when the pair is small."""
    if depth == 0 or (i2 - i1) * (j2 - j1) <= SMALL:
        out += [(t, x1 + i1, x2 + i1, y1 + j1, y2 + j1) for t, x1, x2, y1, y2 in difflib.SequenceMatcher(None, a[i1:i2], b[j1:j2]).get_opcodes()]
        return
    head = 0
    while i1 + head < i2 and j1 + head < j2 and a[i1 + head] == b[j1 + head]:
        head += 1
    tail = 0
    while i2 - tail > i1 + head and j2 - tail > j1 + head and a[i2 - tail - 1] == b[j2 - tail - 1]:
        tail += 1
    out.append(("equal", i1, i1 + head, j1, j1 + head))
    m1, m2, n1, n2 = i1 + head, i2 - tail, j1 + head, j2 - tail
    level = _level(a, m1, m2, b, n1, n2)
    if level is None or m1 == m2 or n1 == n2:
        _match(a, b, m1, m2, n1, n2, out, 0)
    else:
        pa, pb = _cut(a, m1, m2, level), _cut(b, n1, n2, level)
        texts_a, texts_b = ["".join(a[s:e]) for s, e in pa], ["".join(b[s:e]) for s, e in pb]
        for tag, k1, k2, l1, l2 in difflib.SequenceMatcher(None, texts_a, texts_b, autojunk=False).get_opcodes():
            x1, x2, y1, y2 = _at(pa, k1, m2), _at(pa, k2, m2), _at(pb, l1, n2), _at(pb, l2, n2)
            if tag != "replace":
                out.append((tag, x1, x2, y1, y2))
                continue
            pairs = min(k2 - k1, l2 - l1)
            for k in range(pairs):  # the k-th changed piece against the k-th new one
                _match(a, b, *pa[k1 + k], *pb[l1 + k], out, depth - 1)
            out.append(("delete", _at(pa, k1 + pairs, m2), x2, y2, y2))
            out.append(("insert", x2, x2, _at(pb, l1 + pairs, n2), y2))
    out.append(("equal", m2, i2, n2, j2))


def _at(pieces: list[tuple[int, int]], index: int, end: int) -> int:
    """The first line of piece `index` (`end` past the last)."""
    return pieces[index][0] if index < len(pieces) else end


def _merged(codes: list[Opcode]) -> list[Opcode]:
    """Adjacent runs of one tag as one (the hunks' context is counted over whole equal runs)."""
    out: list[Opcode] = []
    for code in codes:
        if code[1] == code[2] and code[3] == code[4]:
            continue
        if out and out[-1][0] == code[0]:
            tag, i1, _, j1, _ = out[-1]
            out[-1] = (tag, i1, code[2], j1, code[4])
        else:
            out.append(code)
    return out


def hunks(codes: list[Opcode], n: int = CONTEXT) -> Iterator[list[Opcode]]:
    """The opcodes grouped into hunks with `n` lines of context, equal runs longer than 2n split."""
    if not codes or all(c[0] == "equal" for c in codes):
        return
    codes = list(codes)
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = (tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2)
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = (tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n))
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * n:
            group.append((tag, i1, i1 + n, j1, j1 + n))
            yield group
            group = []
            i1, j1 = i2 - n, j2 - n
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def _range(start: int, stop: int) -> str:
    """A hunk's `start,length` in unified form (1-based; a length of 1 is left out)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def unified(a: Sequence[str], b: Sequence[str], fromfile: str, tofile: str) -> Iterator[str]:
    """The lines of a unified diff from `a` to `b` (lines keep their newlines, as difflib's)."""
    started = False
    for group in hunks(opcodes(a, b)):
        if not started:
            yield f"--- {fromfile}\n"
            yield f"+++ {tofile}\n"
            started = True
        yield f"@@ -{_range(group[0][1], group[-1][2])} +{_range(group[0][3], group[-1][4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from ("-" + line for line in a[i1:i2])
            if tag in ("replace", "insert"):
                yield from ("+" + line for line in b[j1:j2])
