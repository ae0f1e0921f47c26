"""The status of a record the runtime will not act on: why, as kstatus conditions.

A record compiled by another flatjob version, a spec this version cannot read, a ledger
(status.runtime) edited into something unreadable, or a cycle that failed on input the
runtime did not expect: the runtime writes Stalled=True, Ready=False and Reconciling=False
with the reason (kstatus reads Reconciling before Stalled), keeps everything else of the
status, and waits for the record to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .status import rfc3339


def refused_status(previous: Mapping[str, Any] | None, reason: str, message: str, generation: int | None, now: float,
                   written: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`previous` with Stalled=True, Ready=False and Reconciling=False saying why (transition
    times kept if unchanged from `written`, the status the record holds, else `previous`: a
    cycle's fresh status says Stalled=False, and comparing with it would move the times, and
    write the status, every cycle)."""
    status = dict(previous) if isinstance(previous, Mapping) else {}
    old = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    if isinstance(written, Mapping) and isinstance(written.get("conditions"), list):
        old = {**old, **{c.get("type"): c for c in written["conditions"] if isinstance(c, dict) and c.get("type") in ("Stalled", "Ready", "Reconciling")}}
    wanted = {"Stalled": ("True", reason, message), "Ready": ("False", reason, message), "Reconciling": ("False", reason, message)}
    conditions = [c for c in old.values() if c.get("type") not in wanted]
    for ctype, (value, why, text) in wanted.items():
        before = old.get(ctype) or {}
        when = before.get("lastTransitionTime") if before.get("status") == value and before.get("lastTransitionTime") else rfc3339(now)
        cond = {"type": ctype, "status": value, "reason": why, "message": text[:1024], "lastTransitionTime": when}
        if generation is not None:
            cond["observedGeneration"] = generation
        conditions.append(cond)
    status["conditions"] = conditions
    if generation is not None:
        status["observedGeneration"] = generation  # observed, and refused: kstatus then reads Stalled
    return status
