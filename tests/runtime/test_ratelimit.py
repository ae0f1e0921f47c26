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


def test_out_of_tokens_the_loop_comes_back_early_by_what_a_cycle_takes_to_decide() -> None:
    """A cycle decides before it writes (a 1000-pod job: a good part of a burst's refill), and
    a full bucket drops the tokens that come meanwhile: the loop comes back that much before a
    whole burst is due, so the burst is there when the writes begin, and never earlier than the
    bucket's empty now (a cycle slower than a refill starts at once). The bucket alone decides
    how many writes go out, so no second carries more than RATE + BURST either way."""
    from flatjob.runtime.controller import Controller

    now = [0.0]
    c = Controller(object(), "default", "GenericJob", "j", identity="me", clock=lambda: now[0])  # type: ignore[arg-type]
    while c.token():
        pass
    assert c._throttled_until == BURST / RATE  # nothing decided yet: when the burst is due
    c.decided(0.1)
    assert not c.token() and c._throttled_until == BURST / RATE - 0.1
    c.decided(5.0)
    assert not c.token() and c._throttled_until == now[0]  # at once, never in the past
    c.decided(-1.0)  # a clock stepped back: no lead
    assert not c.token() and c._throttled_until == BURST / RATE
