"""How long to wait before trying a failed call again: doubling, capped, jittered, and never
sooner than the server asked (Retry-After).

client-go's manners (k8s.io/client-go/rest/with_retry.go checkWait: a 429 or 5xx answer with
an integer Retry-After is retried after that many seconds; tools/cache reflector.go: watches
back off exponentially with jitter so that clients do not retry in lockstep).  The jitter
comes from a generator seeded by the runtime's identity: reproducible for one process,
different between processes.
"""

from __future__ import annotations

import random

from .api import ApiError

JITTER = 0.2  # each wait is lengthened by up to this fraction


def seeded(identity: str) -> random.Random:
    """The jitter source of one runtime process."""
    return random.Random(identity)


def retry_delay(failures: int, cap: float, rng: random.Random, error: BaseException | None = None, base: float = 1.0) -> float:
    """Seconds before the next try after `failures` failures in a row: `base` (1 s) doubling to `cap`,
    plus up to JITTER of it, and at least the Retry-After the server sent with `error`."""
    delay = min(base * 2.0 ** max(failures - 1, 0), cap) * (1.0 + JITTER * rng.random())
    after = getattr(error, "retry_after", None) if isinstance(error, ApiError) else None
    return max(delay, float(after)) if after else delay
