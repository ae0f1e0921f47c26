"""Timestamps as the API writes them: RFC 3339 in UTC, whole seconds (metav1.Time) or
microseconds (metav1.MicroTime)."""

from __future__ import annotations

import calendar
import time


def stamp(seconds: float) -> str:
    """metav1.Time: `2024-01-02T03:04:05Z`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(seconds)))


def micro(seconds: float) -> str:
    """metav1.MicroTime: `2024-01-02T03:04:05.123456Z`."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{round((seconds - whole) * 1e6) % 1_000_000:06d}Z"


def parse_time(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 UTC timestamp (fractions allowed)."""
    head, _, frac = text.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)
