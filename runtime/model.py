"""The runtime's view of the world: observed pods, the crash-safe ledger, and the job itself.

Everything here is plain data.  PodState is what the decisions see of a pod (from the API
or the fake cluster); Ledger is the runtime's memory, persisted in the record's
status.runtime before any action is taken; JobView is what the record's spec means for the
decisions, computed with the compiler's own planner so it agrees with what git holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from flatjob.compiler import keys


@dataclass(frozen=True)
class PodState:
    """One observed pod, reduced to what decisions need."""

    name: str
    uid: str
    phase: str = "Pending"  # Pending | Running | Succeeded | Failed | Unknown
    gated: bool = True  # still carries flatjob's release gate
    deleting: bool = False  # deletionTimestamp is set
    ready: bool = False
    exit_code: int | None = None  # the training container's exit code, once terminated
    reason: str | None = None  # terminated reason (OOMKilled, Error, Evicted...)
    message: str | None = None  # termination message (torchrun's failure summary lands here)
    spec_hash: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[tuple[str, str, int | None], ...] = ()  # (name, state, exitCode)



@dataclass(frozen=True)
class Ledger:
    """The runtime's memory, written to status.runtime before it acts (DESIGN §6).

    A runtime killed at any instant restarts from this: failures already counted are in
    `counted` (by pod UID), so none is lost or counted twice, and `draining` lists the
    incarnations being replaced, so none is restarted twice for one failure.
    """

    attempt: int = 1
    counted: tuple[str, ...] = ()  # UIDs of failed incarnations already accounted for
    draining: tuple[str, ...] = ()  # UIDs deleted for a restart; new pods wait until they are gone
    released: Mapping[str, str] = field(default_factory=dict)  # pod name -> UID released this attempt
    succeeded: tuple[str, ...] = ()  # pod names finished successfully this attempt (never re-run)
    failed: tuple[str, ...] = ()  # pod names failed for good this attempt (no restart left)
    stopped: Mapping[str, str] = field(default_factory=dict)  # pod name -> UID stopped by a scale-down
    cleaned: tuple[str, ...] = ()  # UIDs deleted by clean-up after the finish
    cleaned_up: bool = False  # clean-up was decided (once: later pods are never cleaned)
    restarts: Mapping[str, int] = field(default_factory=dict)  # replica type -> restarts of its replicas, summed
    backoff_count: int = 0
    not_before: Mapping[str, float] = field(default_factory=dict)  # pod name -> earliest release (back-off)
    start_time: float | None = None  # first release of the job
    size: int | None = None  # elastic: the target this attempt was started with
    outcome: str | None = None  # Succeeded | Failed, once decided (final)
    reason: str | None = None
    message: str | None = None
    finished_at: float | None = None
    paused: bool = False
    resuming: bool = False
    observed_generation: int | None = None
    spec_hashes: Mapping[str, str] = field(default_factory=dict)  # pod name -> hash released this attempt
    replica_failed: str | None = None  # message of the latest replica failure (ReplicaFailure condition)
    carry: Mapping[str, Mapping[str, Mapping[str, str]]] = field(default_factory=dict)  # pod -> labels/annotations to keep
    replica_restarts: Mapping[str, int] = field(default_factory=dict)  # pod name -> its restarts (GenericJob's limit is per replica)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form kept in status.runtime (sorted, compact, stable)."""
        out: dict[str, Any] = {
            "attempt": self.attempt,
            "counted": list(self.counted),
            "draining": list(self.draining),
            "released": dict(sorted(self.released.items())),
            "succeeded": list(self.succeeded),
            "failed": list(self.failed),
            "stopped": dict(sorted(self.stopped.items())),
            "cleaned": list(self.cleaned),
            "cleanedUp": self.cleaned_up,
            "restarts": dict(sorted(self.restarts.items())),
            "backoffCount": self.backoff_count,
            "notBefore": dict(sorted(self.not_before.items())),
            "paused": self.paused,
            "resuming": self.resuming,
            "specHashes": dict(sorted(self.spec_hashes.items())),
            "carry": {k: dict(v) for k, v in sorted(self.carry.items())},
            "replicaRestarts": dict(sorted(self.replica_restarts.items())),
        }
        for key, value in (
            ("startTime", self.start_time),
            ("size", self.size),
            ("outcome", self.outcome),
            ("reason", self.reason),
            ("message", self.message),
            ("finishedAt", self.finished_at),
            ("observedGeneration", self.observed_generation),
            ("replicaFailed", self.replica_failed),
        ):
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Ledger:
        """Read status.runtime back; a missing or partial ledger yields defaults."""
        if not data:
            return cls()
        d = dict(data)
        return cls(
            attempt=int(d.get("attempt", 1)),
            counted=tuple(d.get("counted", ())),
            draining=tuple(d.get("draining", ())),
            released=dict(d.get("released", {})),
            succeeded=tuple(d.get("succeeded", ())),
            failed=tuple(d.get("failed", ())),
            stopped=dict(d.get("stopped", {})),
            cleaned=tuple(d.get("cleaned", ())),
            cleaned_up=bool(d.get("cleanedUp", False)),
            restarts={k: int(v) for k, v in (d.get("restarts") or {}).items()},
            backoff_count=int(d.get("backoffCount", 0)),
            not_before={k: float(v) for k, v in (d.get("notBefore") or {}).items()},
            start_time=d.get("startTime"),
            size=d.get("size"),
            outcome=d.get("outcome"),
            reason=d.get("reason"),
            message=d.get("message"),
            finished_at=d.get("finishedAt"),
            paused=bool(d.get("paused", False)),
            resuming=bool(d.get("resuming", False)),
            observed_generation=d.get("observedGeneration"),
            spec_hashes=dict(d.get("specHashes", {})),
            carry={k: dict(v) for k, v in (d.get("carry") or {}).items()},
            replica_failed=d.get("replicaFailed"),
            replica_restarts={k: int(v) for k, v in (d.get("replicaRestarts") or {}).items()},
        )

    def evolve(self, **changes: Any) -> Ledger:
        return replace(self, **changes)


@dataclass(frozen=True)
class RestartRule:
    """How one replica type restarts: the policy and its own limit (GenericJob), if any."""

    policy: str  # Never | OnFailure | Always | ExitCode
    limit: int | None = None


@dataclass(frozen=True)
class PodSpecView:
    """One planned pod as the decisions see it."""

    name: str
    type: str
    index: int
    rank: int
    wave: int
    seat: int | None
    spec_hash: str
    container: str | None = None  # name of the training container (whose exit code counts)


@dataclass(frozen=True)
class JobView:
    """What the record's spec means for the runtime's decisions."""

    kind: str
    name: str
    namespace: str | None
    generation: int | None
    pods: tuple[PodSpecView, ...]  # every pod git renders, in rank order (empty when paused)
    scope: str  # pod | group | none: what a failure restarts
    rules: Mapping[str, RestartRule]  # replica type -> restart rule
    backoff_limit: int | None  # restarts summed over the job, or None (GenericJob: per type)
    deadline: int | None  # activeDeadlineSeconds
    cleanup: str  # All | Unfinished | None | Workers (ColossalAI cleanUpWorkers)
    decider: str  # rule | first | launcher: who decides success and failure
    success_rules: tuple[Mapping[str, tuple[int, ...]], ...] = ()
    failure_rules: tuple[Mapping[str, tuple[int, ...]], ...] = ()
    run_mode: str = "immediate"  # immediate | debug | pause
    target: int | None = None  # elastic: nodes to run now (clamped expectedReplicas)
    min_nodes: int | None = None
    ssh_secret: str | None = None
    podgroup: bool = False
    launcher_kind: str | None = None  # torchrun | deepspeed | colossalai | None (exit-code translation)
    version: str | None = None  # flatjob version that compiled the record
    tensorboard: str | None = None  # name of the TensorBoard Deployment git holds, if any (status.tensorboard)

    @cached_property
    def _by_name(self) -> dict[str, PodSpecView]:
        return {p.name: p for p in self.pods}

    @cached_property
    def by_rank(self) -> dict[tuple[str, int], PodSpecView]:
        """(replica type, index within the type) -> pod."""
        return {(p.type, p.index): p for p in self.pods}

    @cached_property
    def every_replica(self) -> dict[str, tuple[int, ...]]:
        """The implicit success rule: every replica of every type."""
        out: dict[str, list[int]] = {}
        for p in self.pods:
            out.setdefault(p.type, []).append(p.index)
        return {t: tuple(i) for t, i in out.items()}

    def pod(self, name: str) -> PodSpecView | None:
        return self._by_name.get(name)

    @property
    def elastic(self) -> bool:
        return self.target is not None

    def wanted(self) -> tuple[PodSpecView, ...]:
        """Pods that should run now: every pod, or the first `target` seats when elastic."""
        if self.target is None:
            return self.pods
        return tuple(p for p in self.pods if p.seat is not None and p.seat < self.target)


GATE = keys.RELEASE_GATE


def ran(pods: Mapping[str, PodState], ledger: Ledger) -> tuple[str, ...]:
    """UIDs of observed pods that were released (no gate) and are not already being drained:
    everything a new attempt must wait for, whatever state those pods reached."""
    return tuple(p.uid for _, p in sorted(pods.items()) if not p.gated and p.uid not in ledger.draining)
