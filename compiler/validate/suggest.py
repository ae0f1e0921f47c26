"""'Did you mean' suggestions for misspelt field names, kinds and enum values."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """Return the candidate nearest to `word` (case-insensitive first), or None."""
    pool = list(dict.fromkeys(candidates))
    folded = word.casefold()
    for c in pool:
        if c.casefold() == folded:
            return c
    # Singular/plural slips (slotPerWorker vs slotsPerWorker) are common; difflib finds them too.
    match = difflib.get_close_matches(word, pool, n=1, cutoff=cutoff)
    if match:
        return match[0]
    by_fold = {c.casefold(): c for c in pool}
    match = difflib.get_close_matches(folded, list(by_fold), n=1, cutoff=cutoff)
    return by_fold[match[0]] if match else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """Format a hint like "did you mean 'slotsPerWorker'?", or None when nothing is near."""
    best = closest(word, candidates)
    return f"did you mean {best!r}?" if best is not None and best != word else None
