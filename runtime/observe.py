"""Reduce API pod objects to PodState: what the decisions need and nothing more."""

from __future__ import annotations

from typing import Any

from flatjob.compiler import keys

from .model import GATE, PodState

_STATE_NAMES = ("running", "waiting", "terminated")


def _container(statuses: list[dict[str, Any]], name: str | None) -> dict[str, Any] | None:
    if not statuses:
        return None
    if name is not None:
        for s in statuses:
            if s.get("name") == name:
                return s
    return statuses[0]


def _state_name(status: dict[str, Any]) -> str:
    state = status.get("state") or {}
    for key in _STATE_NAMES:
        if state.get(key) is not None:
            return key.capitalize()
    return "Unknown"


def _int(text: Any) -> int | None:
    """An annotation read as a number (None when absent or edited into something else)."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _owned_by(meta: dict[str, Any], owner_uid: str | None) -> bool:
    if owner_uid is None:
        return True
    return any(isinstance(r, dict) and r.get("controller") and r.get("uid") == owner_uid for r in meta.get("ownerReferences") or [])


def _failed_init(status: dict[str, Any]) -> str | None:
    """kubectl's words for a pod whose init container failed (Init:Error), else None."""
    for s in status.get("initContainerStatuses") or []:
        term = (s.get("state") or {}).get("terminated") if isinstance(s, dict) else None
        if isinstance(term, dict) and term.get("exitCode") not in (None, 0):
            return f"Init:{term.get('reason') or 'ExitCode:' + str(term.get('exitCode'))}"
    return None


def pod_state(obj: dict[str, Any], container: str | None = None, owner_uid: str | None = None) -> PodState:
    """The decision-relevant view of one pod object (`owner_uid`: the record's, if known)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    main = _container(statuses, container)
    term = ((main or {}).get("state") or {}).get("terminated") or {}
    exit_code = term.get("exitCode") if term else None
    init = _failed_init(status) if not term and status.get("phase") == "Failed" else None
    if init is not None:
        term = {"reason": init}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    notes = meta.get("annotations") or {}
    return PodState(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        phase=status.get("phase") or "Pending",
        gated=any(g.get("name") == GATE for g in spec.get("schedulingGates") or []),
        deleting=meta.get("deletionTimestamp") is not None,
        ready=ready,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        reason=term.get("reason") or status.get("reason"),
        message=term.get("message") or status.get("message"),
        spec_hash=notes.get(keys.SPEC_HASH),
        attempt=_int(notes.get(keys.ATTEMPT)),
        ours=_owned_by(meta, owner_uid),
        stopped=notes.get(keys.STOPPED) == "true",
        containers=tuple((s.get("name", ""), _state_name(s), ((s.get("state") or {}).get("terminated") or {}).get("exitCode")) for s in statuses),
    )
