"""Leader election with a coordination.k8s.io Lease: two runtimes never act at once.

During a rollout the old and new runtime pods may overlap; only the holder of the Lease
<job>-runtime acts.  The decision is pure; runtime.controller does the API calls.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass
from typing import Any

LEASE_SECONDS = 30
RENEW_EVERY = 10.0


def micro_time(ts: float) -> str:
    """MicroTime as the Lease API writes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int((ts % 1) * 1_000_000):06d}Z"


def parse_micro_time(text: str | None) -> float | None:
    """Read a MicroTime back to UTC seconds (None when absent or malformed)."""
    if not text:
        return None
    try:
        head, _, frac = text.rstrip("Z").partition(".")
        base = calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S"))
        return base + (float("0." + frac) if frac else 0.0)
    except ValueError:
        return None


@dataclass(frozen=True)
class LeaseDecision:
    """acquire (create or take over), renew, or wait until `until`."""

    action: str  # acquire | renew | wait
    until: float | None = None


def decide_lease(lease: dict[str, Any] | None, identity: str, now: float) -> LeaseDecision:
    """Whether this runtime may act, and what to do about the Lease."""
    if lease is None:
        return LeaseDecision("acquire")
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    renewed = parse_micro_time(spec.get("renewTime")) or 0.0
    duration = spec.get("leaseDurationSeconds") or LEASE_SECONDS
    if holder == identity:
        return LeaseDecision("renew")
    if not holder or now >= renewed + duration:
        return LeaseDecision("acquire")
    return LeaseDecision("wait", renewed + duration)


def lease_body(name: str, namespace: str, identity: str, now: float, current: dict[str, Any] | None) -> dict[str, Any]:
    """The Lease object to create or replace for holding the lease now."""
    spec = dict((current or {}).get("spec") or {})
    taking_over = spec.get("holderIdentity") != identity
    spec.update({"holderIdentity": identity, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro_time(now)})
    if taking_over:
        spec["acquireTime"] = micro_time(now)
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if current else 0)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if current:
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}
