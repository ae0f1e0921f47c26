"""Local pods as plain data, and the PodState the runtime's decisions see of them.

A local pod goes through the phases a cluster pod does: created gated (as git renders it),
released by the runtime (gate removed, release annotations added), Running once its
containers start, Succeeded or Failed when they end; deleting while it is being stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from flatjob.compiler import keys

from ..model import PodState


@dataclass(frozen=True)
class Ended:
    """How a pod's containers ended: the training container's code and the pod's phase."""

    phase: str  # Succeeded | Failed
    exit_code: int | None  # the training container's, None when it never ran
    reason: str | None = None  # Completed | Error | StartError | Init:Error
    message: str | None = None  # termination message (FallbackToLogsOnError: the log's tail)
    containers: tuple[tuple[str, str, int | None], ...] = ()


@dataclass(frozen=True)
class LocalPod:
    """One incarnation of a pod on this machine."""

    name: str
    uid: str
    manifest: Mapping[str, Any]
    incarnation: int = 0  # 0 for the first; +1 for every pod the runtime created again
    annotations: Mapping[str, str] = field(default_factory=dict)
    gated: bool = True
    phase: str = "Pending"
    deleting: bool = False
    ready: bool = False
    ended: Ended | None = None
    containers: tuple[tuple[str, str, int | None], ...] = ()


def new_pod(manifest: Mapping[str, Any], uid: str, incarnation: int = 0) -> LocalPod:
    """A gated pod, exactly as git renders it."""
    return LocalPod(manifest["metadata"]["name"], uid, manifest, incarnation, dict(manifest["metadata"].get("annotations") or {}))


def released(pod: LocalPod, annotations: Mapping[str, str]) -> LocalPod:
    """The gate removed and the runtime's annotations added (the release action)."""
    return replace(pod, gated=False, annotations={**pod.annotations, **annotations})


def running(pod: LocalPod, containers: tuple[str, ...]) -> LocalPod:
    """Every regular container started."""
    return replace(pod, phase="Running", ready=True, containers=tuple((c, "Running", None) for c in containers))


def ended(pod: LocalPod, how: Ended) -> LocalPod:
    """The containers ended (a pod never runs twice: restartPolicy is Never)."""
    return replace(pod, phase=how.phase, ready=False, deleting=False, ended=how, containers=how.containers or pod.containers)


def terminating(pod: LocalPod) -> LocalPod:
    """Being deleted: its processes got SIGTERM (or it never ran)."""
    return replace(pod, deleting=True)


def pod_state(pod: LocalPod) -> PodState:
    """What the decisions see of a local pod."""
    how = pod.ended
    return PodState(
        name=pod.name,
        uid=pod.uid,
        phase=pod.phase,
        gated=pod.gated,
        deleting=pod.deleting,
        ready=pod.ready,
        exit_code=how.exit_code if how else None,
        reason=how.reason if how else None,
        message=how.message if how else None,
        spec_hash=pod.annotations.get(keys.SPEC_HASH),
        annotations=dict(pod.annotations),
        labels=dict((pod.manifest.get("metadata") or {}).get("labels") or {}),
        containers=pod.containers,
    )
