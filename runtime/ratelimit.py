"""A token bucket for the runtime's writes, as client-go's rate limiter is for its requests.

client-go blocks each request until its bucket has a token (rest/config.go: 5 requests/s,
bursts of 10, by default).  The runtime does not block: its loop asks for a token before
each write, and when the bucket is empty it stops acting and looks again once a token is
due.  Its actions are re-derived from the ledger and the pods every cycle, so stopping
half-way loses nothing.  It comes back so that the bucket is full again when the next
cycle's writes begin (early by what the last cycle took to decide: a full bucket drops the
tokens that come while a cycle decides), so that each cycle's one status write carries a
whole burst of actions, not one.  The rate is sized so that a 1000-pod job that failed at once
(1000 deletes, creates and releases) runs again within a minute, while no second carries
more than RATE + BURST writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

RATE = 80.0  # writes per second, sustained
BURST = 20.0  # writes at once after a quiet spell


@dataclass
class TokenBucket:
    """`rate` tokens a second, at most `burst` saved up."""

    clock: Callable[[], float]
    rate: float = RATE
    burst: float = BURST
    tokens: float = field(default=-1.0)
    _at: float | None = None

    def _refill(self) -> float:
        now = self.clock()
        if self._at is None or self.tokens < 0:
            self.tokens, self._at = self.burst, now
        self.tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
        self._at = now
        return now

    def take(self) -> bool:
        """Spend a token if there is one."""
        self._refill()
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def ready_at(self, tokens: float = 1.0) -> float:
        """When `tokens` tokens (at most the burst) will be there."""
        now = self._refill()
        want = min(tokens, self.burst)
        return now if self.tokens >= want else now + (want - self.tokens) / self.rate
