"""Unified diffs that stay linear in the size of what changed.

difflib matches a whole file at once: on a `podtemplates.yaml` of 1 000 pods that each repeat
the same lines, one changed argument took `compile --check` 12-14 s, 3 000 pods 137 s (it
grows with the square; review of round 8).  A YAML stream is matched document by document
first (each document is compared whole, as one string), then the lines of each pair of
changed documents, so a PodTemplate is diffed against its own old text alone.  A file of one
document is diffed as difflib diffs it.  The output is a unified diff (`---`/`+++`, `@@`
hunks with 3 lines of context) that `git apply` and `patch` take.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence

Opcode = tuple[str, int, int, int, int]  # (tag, a from, a to, b from, b to), as difflib's
CONTEXT = 3
SEPARATOR = "---\n"


def documents(lines: Sequence[str]) -> list[tuple[int, int]]:
    """The [from, to) line ranges of a YAML stream's documents, each from its `---` on."""
    starts = [0, *(i for i, line in enumerate(lines) if line == SEPARATOR and i > 0)]
    return [(s, e) for s, e in zip(starts, [*starts[1:], len(lines)], strict=True) if e > s]


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """How to turn lines `a` into lines `b`: documents matched whole, then lines within pairs."""
    da, db = documents(a), documents(b)
    if len(da) <= 1 and len(db) <= 1:
        return difflib.SequenceMatcher(None, a, b).get_opcodes()
    texts_a = ["".join(a[s:e]) for s, e in da]
    texts_b = ["".join(b[s:e]) for s, e in db]
    out: list[Opcode] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, texts_a, texts_b, autojunk=False).get_opcodes():
        if tag != "replace":
            out.append((tag, _at(da, i1, len(a)), _at(da, i2, len(a)), _at(db, j1, len(b)), _at(db, j2, len(b))))
            continue
        pairs = min(i2 - i1, j2 - j1)
        for k in range(pairs):  # the k-th changed document against the k-th new one
            (s, e), (t, f) = da[i1 + k], db[j1 + k]
            out += [(c, x1 + s, x2 + s, y1 + t, y2 + t) for c, x1, x2, y1, y2 in difflib.SequenceMatcher(None, a[s:e], b[t:f]).get_opcodes()]
        if i2 - i1 > pairs:
            out.append(("delete", da[i1 + pairs][0], da[i2 - 1][1], _at(db, j2, len(b)), _at(db, j2, len(b))))
        if j2 - j1 > pairs:
            out.append(("insert", _at(da, i2, len(a)), _at(da, i2, len(a)), db[j1 + pairs][0], db[j2 - 1][1]))
    return _merged(out)


def _at(docs: list[tuple[int, int]], index: int, end: int) -> int:
    """The first line of document `index` (the end of the text past the last)."""
    return docs[index][0] if index < len(docs) else end


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
