"""How many examples a property test draws: an eighth in the README's quick run, all of them
where FLATJOB_EXAMPLES=all (.ci/run sets it), so a newcomer's verdict comes in minutes while
CI searches as widely as before. Every property and fuzz test states its full count here."""

from __future__ import annotations

import os

QUICK_SHARE = 8  # the quick run draws 1/QUICK_SHARE of each test's examples (at least one)
FULL = os.environ.get("FLATJOB_EXAMPLES", "") == "all"


def examples(full: int) -> int:
    """The examples to draw of a test whose full count is `full`."""
    return full if FULL else max(1, full // QUICK_SHARE)


__all__ = ["FULL", "QUICK_SHARE", "examples"]
