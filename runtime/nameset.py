"""Sets of pod names, written compactly: `big-worker-{0..4999}` for five thousand names.

The ledger (status.runtime) names the pods of an attempt; a job's pods are `<job>-<type>-<i>`,
so runs of consecutive indices collapse into one brace range and the status of a 5000-pod
job stays a few hundred bytes however many of its pods are released or finished.  Names
without a numeric tail (`<job>-launcher`) and numbers with a leading zero stay as they are.
In memory, what a record renders is a `PodNames`: runs of (prefix, count), not a string a pod.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

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



@dataclass(frozen=True)
class PodNames:
    """Names <prefix><index> for index < count, per run, plus single names."""

    runs: tuple[tuple[str, int], ...] = ()  # (prefix ending in "-", count), sorted, one per prefix
    singles: frozenset[str] = frozenset()

    @classmethod
    def of(cls, runs: Mapping[str, int], singles: Iterable[str] = ()) -> PodNames:
        return cls(tuple(sorted((p, n) for p, n in runs.items() if n > 0)), frozenset(singles))

    @classmethod
    def union(cls, many: Iterable[PodNames]) -> PodNames:
        """Every name any of them holds."""
        runs: dict[str, int] = {}
        singles: set[str] = set()
        for names in many:
            for prefix, count in names.runs:
                runs[prefix] = max(count, runs.get(prefix, 0))
            singles |= names.singles
        return cls.of(runs, singles)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self.singles:
            return True
        prefix, dash, index = name.rpartition("-")
        if not dash or not index.isascii() or not index.isdigit() or (len(index) > 1 and index[0] == "0") or len(index) > 9:
            return False  # only the canonical decimal index pod_name writes
        return int(index) < self._counts().get(prefix + "-", 0)

    def _counts(self) -> dict[str, int]:
        counts = self.__dict__.get("_by_prefix")
        if counts is None:
            counts = dict(self.runs)
            object.__setattr__(self, "_by_prefix", counts)
        return counts

    def __iter__(self) -> Iterator[str]:
        """Every name, as many as the runs count (for tests); a single may also be in a run."""
        yield from sorted(self.singles)
        for prefix, count in self.runs:
            for index in range(count):
                yield f"{prefix}{index}"

    def __and__(self, other: Iterable[str]) -> frozenset[str]:
        """The names of `other` held here."""
        return frozenset(name for name in other if name in self)

    __rand__ = __and__

    def __le__(self, other: PodNames) -> bool:
        """Whether every name here is held by `other`."""
        counts = other._counts()
        return self.singles <= other.singles and all(count <= counts.get(prefix, 0) for prefix, count in self.runs)


NO_NAMES = PodNames()
