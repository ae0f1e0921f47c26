"""Sets of pod names, written compactly: `big-worker-{0..4999}` for five thousand names.

The ledger (status.runtime) names the pods of an attempt; a job's pods are `<job>-<type>-<i>`,
so runs of consecutive indices collapse into one brace range and the status of a 5000-pod
job stays a few hundred bytes however many of its pods are released or finished.  Names
without a numeric tail (`<job>-launcher`) and numbers with a leading zero stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from flatjob.compiler.limits import DEFAULT

MAX_NAMES = DEFAULT.job_pods  # pods one job renders: no ledger names more
MAX_NAME = 63  # a pod's name is a DNS label
MAX_ITEM = MAX_NAME + len("{0..999999999}")
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


class Budget:
    """How many names a status may still expand to: the status is anyone's who may edit it, and
    38 bytes (`x0-{0..1000000}`) asked for a million names (the runtime went from 50 to 622 MiB).
    One budget for every list of a ledger; no job has more pods than the compiler renders."""

    __slots__ = ("left",)

    def __init__(self, names: int = MAX_NAMES) -> None:
        self.left = names


def decode(items: Iterable[object], budget: Budget | None = None) -> tuple[str, ...]:
    """The names back, sorted; raises ValueError for anything `encode` does not write (a
    string or a map is not a list of names, though iterating it would yield strings; a name
    no pod can have), and for more names than the budget (MAX_NAMES by default) allows."""
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"not a list of pod names: {items!r}"[:200])
    budget = budget if budget is not None else Budget()
    out: set[str] = set()
    for item in items:
        if not isinstance(item, str) or not item or len(item) > MAX_ITEM:
            raise ValueError(f"not a pod name: {item!r}"[:200])
        m = _RANGE.match(item)
        a, b = (int(m["a"]), int(m["b"])) if m is not None else (0, 0)
        if b < a or len(m["b"] if m is not None else "") > 9:
            raise ValueError(f"not a name range: {item!r}"[:200])
        budget.left -= b - a + 1
        if budget.left < 0:
            raise ValueError(f"names more than the {MAX_NAMES:,} pods a job can have ({item!r})"[:200])
        names = [f"{m['head']}{n}" for n in range(a, b + 1)] if m is not None else [item]
        if len(names[-1]) > MAX_NAME:
            raise ValueError(f"not a pod name (longer than {MAX_NAME} characters): {item!r}"[:200])
        out.update(names)
    return tuple(sorted(out))
