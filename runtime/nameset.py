"""Sets of pod names, written compactly: `big-worker-{0..4999}` for five thousand names.

The ledger (status.runtime) names the pods of an attempt; a job's pods are `<job>-<type>-<i>`,
so runs of consecutive indices collapse into one brace range and the status of a 5000-pod
job stays a few hundred bytes however many of its pods are released or finished.  Names
without a numeric tail (`<job>-launcher`) and numbers with a leading zero stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TAIL = re.compile(r"^(?P<head>.*?)(?P<n>0|[1-9][0-9]*)$")
_RANGE = re.compile(r"^(?P<head>.*)\{(?P<a>0|[1-9][0-9]*)\.\.(?P<b>0|[1-9][0-9]*)\}$")


def encode(names: Iterable[str]) -> list[str]:
    """Sorted, with runs of consecutive indices as `head{a..b}` (runs of two or more)."""
    plain: list[str] = []
    runs: dict[str, list[int]] = {}
    for name in set(names):
        m = _TAIL.match(name)
        if m is None or "{" in name:
            plain.append(name)
        else:
            runs.setdefault(m["head"], []).append(int(m["n"]))
    out = list(plain)
    for head, numbers in runs.items():
        numbers.sort()
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            out.append(f"{head}{start}" if start == prev else f"{head}{{{start}..{prev}}}")
            if n is not None:
                start = prev = n
    return sorted(out)


def decode(items: Iterable[object]) -> tuple[str, ...]:
    """The names back, sorted; raises ValueError for anything `encode` does not write (a
    string or a map is not a list of names, though iterating it would yield strings)."""
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"not a list of pod names: {items!r}"[:200])
    out: set[str] = set()
    for item in items:
        if not isinstance(item, str) or not item:
            raise ValueError(f"not a pod name: {item!r}")
        m = _RANGE.match(item)
        if m is None:
            out.add(item)
            continue
        a, b = int(m["a"]), int(m["b"])
        if b < a or b - a > 1_000_000:
            raise ValueError(f"not a name range: {item!r}")
        out.update(f"{m['head']}{n}" for n in range(a, b + 1))
    return tuple(sorted(out))
