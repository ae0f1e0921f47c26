"""Which pod runs when an elastic job has N nodes: a fixed, house-monotone seat order.

Seats go one at a time to the replica type with the highest weight/(seats+1) (D'Hondt),
ties to the earlier type.  Growing from N to N+1 nodes therefore only ever adds the next
seat and shrinking only removes the last: the runtime releases or stops the highest seat,
never reshuffling which pods run (largest-remainder would, see the Alabama paradox).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction


def seat_order(weights: Sequence[tuple[str, int]], total: int) -> list[tuple[str, int]]:
    """Return (type, index) for seats 0..total-1 given (type, weight) pairs in spec order."""
    live = [(t, w) for t, w in weights if w > 0]
    if not live:
        return []
    seats = {t: 0 for t, _ in live}
    order: list[tuple[str, int]] = []
    for _ in range(total):
        best = max(range(len(live)), key=lambda i: (Fraction(live[i][1], seats[live[i][0]] + 1), -i))
        t = live[best][0]
        order.append((t, seats[t]))
        seats[t] += 1
    return order


def allocation(weights: Sequence[tuple[str, int]], total: int) -> dict[str, int]:
    """Pods per type when `total` nodes run (the first `total` seats)."""
    counts = {t: 0 for t, _ in weights}
    for t, _ in seat_order(weights, total):
        counts[t] += 1
    return counts
