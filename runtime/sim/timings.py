"""The kubelet's container timings both kubelet stand-ins share: the back-off before an exited
native sidecar starts again (client-go flowcontrol.Backoff, as kubelet.go configures it), and
the least time a container gets between SIGTERM and SIGKILL.  (runtime/backoff.py is the
runtime's own retry back-off, unrelated.)"""

from __future__ import annotations

CRASH_BACKOFF, CRASH_BACKOFF_CAP = 10.0, 300.0  # kubelet.go containerBackOffPeriod, MaxContainerBackOff
CRASH_BACKOFF_RESET = 600.0  # kubelet.go backOff.HasExpiredFunc: an exit this long after the last start begins anew

MIN_GRACE = 2.0  # kuberuntime_container.go minimumGracePeriodInSeconds: the least any container gets after SIGTERM

Backoff = tuple[float, float]  # a flowcontrol.Backoff entry: (its delay, when it last moved on)


def outlived(entry: Backoff, finished: float) -> bool:
    """The exit came more than CRASH_BACKOFF_RESET after the last start: the entry has expired
    (kubelet.go backOff.HasExpiredFunc; before it, flowcontrol's hasExpired: twice the cap)."""
    return finished - entry[1] > CRASH_BACKOFF_RESET


def wait_left(entry: Backoff | None, finished: float, now: float) -> float:
    """How long a start must still wait: flowcontrol Backoff.IsInBackOffSince(finishedAt), as
    kuberuntime_manager.go doBackOff asks it; the first exit restarts at once (0)."""
    if entry is None or outlived(entry, finished):
        return 0.0
    return max(entry[0] - (now - finished), 0.0)


def next_backoff(entry: Backoff | None, finished: float, now: float) -> Backoff:
    """flowcontrol Backoff.Next at each restart: 10 s for a new or expired entry, else twice the
    last delay, at most 300 s; dated now."""
    if entry is None or outlived(entry, finished):
        return CRASH_BACKOFF, now
    return min(entry[0] * 2, CRASH_BACKOFF_CAP), now
