"""Leader election with a coordination.k8s.io Lease: two runtimes never act at once.

During a rollout the old and new runtime pods may overlap; only the holder of the Lease
(`flatjob` for a namespace runtime, `<job>-runtime` for a per-job one) acts.  As in client-go's leaderelection:
- another holder's Lease is judged by the *local* time at which its record was last seen to
  change (`Observed`), never by comparing its renewTime with the local clock, so clock skew
  between nodes cannot make a live leader look expired;
- a leader that has not renewed within RENEW_DEADLINE stops acting, well before any other
  runtime may take over (LEASE_SECONDS after it last saw the record change).
The decisions are pure; runtime.controller does the API calls.
"""

from __future__ import annotations

import calendar
import json
import time
from dataclasses import dataclass
from typing import Any

from flatjob.compiler.digits import (
    INT32_MAX,  # leaseTransitions is an int32: the API server refuses a write past it
)

LEASE_SECONDS = 30  # another runtime takes over this long after the record last changed
LEASE_MAX = 2 * LEASE_SECONDS  # a Lease claiming longer is believed this long: it is no flatjob runtime's
RENEW_DEADLINE = 15.0  # a leader that could not renew for this long stops acting
RENEW_EVERY = 5.0  # a leader renews this often
# A runtime kept from the Lease longer than any hand-over takes (a runtime stopped past its
# grace waits out at most LEASE_MAX) says who holds it: in its log, as a Warning Event
# `LeaseHeld` on the Lease and on its own Pod, and in flatjob_lease_waiting_seconds, at most
# once per HELD_SAID_EVERY. A tenant renewing it under another identity held every job of the
# namespace unserved and nothing said why (issue 21 round 2).
HELD_SAID_AFTER = 2 * LEASE_MAX
HELD_SAID_EVERY = 300.0


def micro_time(ts: float) -> str:
    """MicroTime as the Lease API writes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int((ts % 1) * 1_000_000):06d}Z"


def parse_micro_time(text: str | None) -> float | None:
    """Read a MicroTime back to UTC seconds (None when absent or malformed)."""
    if not text or not isinstance(text, str):
        return None
    try:
        head, _, frac = text.rstrip("Z").partition(".")
        base = calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S"))
        return base + (float("0." + frac) if frac else 0.0)
    except ValueError:
        return None


@dataclass(frozen=True)
class Observed:
    """A Lease record as last read, and the local time it was first seen in that form."""

    record: tuple[Any, ...] | None
    at: float


def _record(lease: dict[str, Any] | None) -> tuple[Any, ...] | None:
    if lease is None:
        return None
    spec = lease.get("spec") or {}
    keys = ("holderIdentity", "renewTime", "acquireTime", "leaseTransitions", "leaseDurationSeconds")
    return tuple(str(spec.get(k)) for k in keys)


def observe(lease: dict[str, Any] | None, before: Observed | None, now: float) -> Observed:
    """The new observation: unchanged records keep the time they were first seen."""
    record = _record(lease)
    if before is not None and before.record == record:
        return before
    return Observed(record, now)


@dataclass(frozen=True)
class LeaseDecision:
    """acquire (create or take over), renew, or wait until `until`."""

    action: str  # acquire | renew | wait
    until: float | None = None


def _duration(spec: dict[str, Any]) -> float:
    """How long a holder's Lease lasts after it last changed: what it says, at most LEASE_MAX
    (every flatjob runtime writes LEASE_SECONDS; a tenant's 2^31-1 held the runtime off for 68
    years, review of round 13)."""
    value = spec.get("leaseDurationSeconds")
    return float(min(value, LEASE_MAX)) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else float(LEASE_SECONDS)


def decide_lease(lease: dict[str, Any] | None, identity: str, observed: Observed, now: float, holding: bool = True) -> LeaseDecision:
    """Whether this runtime may act, and what to do about the Lease.  A Lease that names this
    runtime is renewed only when it is this process's own (`holding`: the resourceVersion its
    last write returned): one naming it that it did not write (a tenant's edit, or this pod's
    previous container) is waited out like another's, so a forged holderIdentity never makes
    two runtimes lead (review of round 11; client-go renews on the name alone)."""
    if lease is None:
        return LeaseDecision("acquire")
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    if holder == identity and holding:
        return LeaseDecision("renew")
    expires = observed.at + _duration(spec)
    if not holder or now >= expires:
        return LeaseDecision("acquire")
    return LeaseDecision("wait", expires)


def held_message(lease: dict[str, Any], identity: str, waiting_since: float, said_at: float | None, now: float) -> str | None:
    """What a runtime kept from the Lease says, when it is due: `waiting_since` is when this
    runtime began waiting (local time; whoever held it meanwhile, so a holder renamed at every
    renewal changes nothing), `said_at` when it last said so. Every value of the Lease's is
    anyone's who may write Leases: quoted, escaped and cut."""
    waited = now - waiting_since
    if waited < HELD_SAID_AFTER or (said_at is not None and now - said_at < HELD_SAID_EVERY):
        return None
    meta = lease.get("metadata") or {}
    spec = lease.get("spec") or {}
    holder, acquired = _shown(spec.get("holderIdentity")), _shown(spec.get("acquireTime"))
    return (f"Lease {_shown(meta.get('name'))} has been held by others for {int(waited)} s (now by {holder}, acquireTime {acquired}): "
            f"runtime {_shown(identity)} serves no job until it lapses. If {holder} is no flatjob runtime pod of this namespace, "
            "whoever may update Leases here renews it: take that right away, then delete the Lease")


def _shown(value: Any) -> str:
    """A value from the Lease, as a JSON string: no control character reaches a log or an Event."""
    return json.dumps(str(value) if value is not None else "")[:130]


def leading(last_renewed: float | None, now: float) -> bool:
    """A leader acts only while its last successful renewal is within the renew deadline."""
    return last_renewed is not None and now - last_renewed < RENEW_DEADLINE


def lease_body(name: str, namespace: str, identity: str, now: float, current: dict[str, Any] | None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Lease object to create or replace for holding the lease now (owned by the record)."""
    spec = dict((current or {}).get("spec") or {})
    taking_over = spec.get("holderIdentity") != identity
    spec.update({"holderIdentity": identity, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro_time(now)})
    if taking_over:
        spec["acquireTime"] = micro_time(now)
        spec["leaseTransitions"] = _transitions(spec.get("leaseTransitions"), counted=current is not None)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if current:
        meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
        if (current.get("metadata") or {}).get("ownerReferences"):
            meta["ownerReferences"] = current["metadata"]["ownerReferences"]
    if owner is not None and owner.get("uid") and "ownerReferences" not in meta:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


def _transitions(found: Any, counted: bool) -> int:
    """The take-over count to write: one more than the Lease's, at most INT32_MAX (anyone who may
    write Leases may set 2^31-1: one more was refused, and no runtime ever held the Lease again,
    hx22); 0 for what no Lease the API server stores holds."""
    known = found if isinstance(found, int) and not isinstance(found, bool) and 0 <= found <= INT32_MAX else 0
    return min(known + counted, INT32_MAX)


def released_body(current: dict[str, Any], now: float) -> dict[str, Any]:
    """The Lease handed over on shutdown: no holder, so another runtime acquires it at once."""
    body = {k: v for k, v in current.items() if k in ("apiVersion", "kind", "metadata")}
    body["spec"] = {**(current.get("spec") or {}), "holderIdentity": "", "renewTime": micro_time(now)}
    return body
