"""The runtime's write budget (runtime/ratelimit.py): a token bucket that never blocks."""

from __future__ import annotations

from flatjob.runtime.ratelimit import BURST, RATE, TokenBucket


def test_a_burst_then_the_rate_and_never_more_than_rate_plus_burst_a_second() -> None:
    now = [0.0]
    bucket = TokenBucket(lambda: now[0])
    assert sum(bucket.take() for _ in range(1000)) == BURST  # a quiet spell saved BURST tokens
    assert not bucket.take() and bucket.ready_at() == 1 / RATE
    taken = 0
    for _ in range(1000):  # one second in 1 ms steps
        now[0] += 0.001
        taken += bucket.take()
    assert taken == RATE
    now[0] += 60.0  # idle for a minute: still only BURST saved
    assert sum(bucket.take() for _ in range(1000)) == BURST
