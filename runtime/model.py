"""The runtime's view of the world: observed pods, the crash-safe ledger, and the job itself.

Everything here is plain data.  PodState is what the decisions see of a pod; Ledger is the
runtime's memory, persisted in the record's status.runtime before any action is taken;
JobView is what the record and its PodTemplates mean for the decisions.

The runtime is the only creator of the job's pods and stamps each with the attempt it
belongs to (flatjob.dev/attempt), so the ledger names pods, never UIDs: a pod of an earlier
attempt is recognised by its own annotation, a released one by its missing gate.  With names
written as brace ranges (runtime.nameset) the ledger of a 5000-pod job stays small.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from flatjob.compiler import keys

from . import nameset


@dataclass(frozen=True)
class PodState:
    """One observed pod, reduced to what decisions need."""

    name: str
    uid: str
    phase: str = "Pending"  # Pending | Running | Succeeded | Failed | Unknown
    gated: bool = True  # still carries flatjob's release gate
    deleting: bool = False  # deletionTimestamp is set
    delete_by: float | None = None  # deletionTimestamp: when its grace period ends
    ready: bool = False
    exit_code: int | None = None  # the training container's exit code, once terminated
    reason: str | None = None  # terminated reason (OOMKilled, Error, Evicted...)
    message: str | None = None  # termination message (torchrun's failure summary lands here)
    spec_hash: str | None = None  # copied from its PodTemplate when the runtime created it
    attempt: int | None = None  # the attempt the runtime created it for (None: not the runtime's)
    ours: bool = True  # owned by the job's record (an ownerReference with controller: true)
    containers: tuple[tuple[str, str, int | None], ...] = ()  # (name, state, exitCode)
    node: str | None = None  # spec.nodeName, once bound
    started_at: float | None = None  # when its program started (the container's startedAt; else status.startTime)
    finished_at: float | None = None  # when its program ended (the container's finishedAt), if it did
    deletion_began: float | None = None  # when someone asked to delete it: deletionTimestamp less its grace period
    disruption: str | None = None  # the DisruptionTarget condition's reason (EvictionByEvictionAPI, ...)
    disruption_message: str | None = None
    disrupted_since: float | None = None  # when the disruption began, at the earliest (observe.disruption_began)
    disruption_dated: float | None = None  # its DisruptionTarget's date: when it began, at the latest
    node_lost_since: float | None = None  # Ready cleared by the node controller alone (its node stopped reporting)
    unreachable_grace: float | None = 300.0  # how long taint eviction leaves it on an unreachable node (None: forever)
    waiting: str | None = None  # why a container cannot start: "ImagePullBackOff: Back-off pulling image ..."
    creating_since: float | None = None  # status.startTime while its node's kubelet still creates every container (volumes, images)
    unschedulable: str | None = None  # the scheduler's message while no node fits
    rejected: str | None = None  # its node's kubelet refused to admit it, so it never ran: "OutOfcpu: Node didn't have enough resource: cpu"
    stopped: bool = False  # the runtime stopped it after the outcome, keeping it (flatjob.dev/stopped)
    evicted: str | None = None  # the kubelet's message when it ended the pod itself (reason Evicted, or Terminated by a node shutdown)
    other_gates: tuple[str, ...] = ()  # scheduling gates besides flatjob's (Kueue's kueue.x-k8s.io/admission until it admits the job)
    finalizers: tuple[str, ...] = ()  # what holds it after its deletion (Kueue's kueue.x-k8s.io/managed, a policy controller's)

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def _names(value: Any, budget: nameset.Budget | None = None) -> tuple[str, ...]:
    return nameset.decode(value or (), budget)


@dataclass(frozen=True)
class Ledger:
    """The runtime's memory, written to status.runtime before it acts (DESIGN §6).

    A runtime killed at any instant restarts from this.  A failure is counted in the cycle
    that sees it and its pod leaves `released` in the same write, so it is never counted
    again; pods of an earlier attempt carry that attempt's number and are deleted before
    the next attempt's pods exist.
    """

    attempt: int = 1
    released: tuple[str, ...] = ()  # pods released in this attempt (running, or about to)
    succeeded: tuple[str, ...] = ()  # pods finished successfully this attempt (never re-run)
    failed: tuple[str, ...] = ()  # pods failed for good this attempt (no restart left)
    cleaned_up: bool = False  # the outcome's clean-up was decided
    restarts: Mapping[str, int] = field(default_factory=dict)  # replica type -> restarts of its replicas, summed
    replica_restarts: Mapping[str, int] = field(default_factory=dict)  # pod name -> its restarts (GenericJob's limit is per replica)
    backoff_count: int = 0
    not_before: Mapping[str, float] = field(default_factory=dict)  # pod name -> earliest release after its restart
    levels: Mapping[str, int] = field(default_factory=dict)  # pod name ("*": a group's gang) -> back-off steps taken in a row
    incident_at: float | None = None  # when the latest failure incident began (failures together count once)
    incident: tuple[str, ...] = ()  # the pods that failed in it
    incident_ended: float | None = None  # when its first failure's program ended (finishedAt), if known
    disruptions: int = 0  # pods replaced after a disruption (never counted as restarts)
    disrupted: Mapping[str, float] = field(default_factory=dict)  # pod name -> when its disruption was seen (peers failing meanwhile are its doing)
    disrupted_end: Mapping[str, float] = field(default_factory=dict)  # pod name -> when its replacement was first seen running (or it was no longer wanted)
    settling: Mapping[str, float] = field(default_factory=dict)  # pod name -> when its failure for good was first seen (decided after SETTLE)
    gang_not_before: float | None = None  # earliest start of this attempt's gang (group restart, refused gang)
    refused: str | None = None  # the API server's last refusal of a pod this attempt needs (quota, webhook)
    refusals: int = 0  # refusals in a row (their back-off)
    start_time: float | None = None  # first release of the job, or of its pods after a resume (the deadline counts from it)
    started: bool = False  # a pod of the job was seen to run: the job is never Pending again (T9k: Pending is "just created")
    size: int | None = None  # elastic: the target this attempt was started with
    outcome: str | None = None  # Succeeded | Failed, once decided (final)
    reason: str | None = None
    message: str | None = None
    finished_at: float | None = None
    paused: bool = False
    resuming: bool = False
    observed_generation: int | None = None
    replica_failed: str | None = None  # message of the latest replica failure (ReplicaFailure condition)
    ssh_secret: str | None = None  # uid of the `<job>-ssh` the runtime last trusted: proves nothing (sshkeys), it only makes a replacement's Event Normal

    def to_dict(self) -> dict[str, Any]:
        """The JSON form kept in status.runtime (sorted, compact, stable)."""
        out: dict[str, Any] = {
            "attempt": self.attempt,
            "released": nameset.encode(self.released),
            "succeeded": nameset.encode(self.succeeded),
            "failed": nameset.encode(self.failed),
            "cleanedUp": self.cleaned_up,
            "restarts": dict(sorted(self.restarts.items())),
            "replicaRestarts": _grouped(self.replica_restarts, str),
            "backoffCount": self.backoff_count,
            "notBefore": _grouped(self.not_before, repr),
            "levels": _grouped(self.levels, str),
            **({"settling": _grouped(self.settling, repr)} if self.settling else {}),
            **({"started": True} if self.started else {}),
            "paused": self.paused,
            "resuming": self.resuming,
        }
        for key, value in (
            ("gangNotBefore", self.gang_not_before),
            ("incidentAt", self.incident_at),
            ("incident", nameset.encode(self.incident) if self.incident else None),
            ("incidentEnded", self.incident_ended),
            ("disruptions", self.disruptions or None),
            ("disrupted", _grouped(self.disrupted, repr) if self.disrupted else None),
            ("disruptedEnd", _grouped(self.disrupted_end, repr) if self.disrupted_end else None),
            ("refused", self.refused),
            ("refusals", self.refusals or None),
            ("startTime", self.start_time),
            ("size", self.size),
            ("outcome", self.outcome),
            ("reason", self.reason),
            ("message", self.message),
            ("finishedAt", self.finished_at),
            ("observedGeneration", self.observed_generation),
            ("replicaFailed", self.replica_failed),
            ("sshSecretUid", self.ssh_secret),
        ):
            if value is not None:
                out[key] = value
        return out

    # Every member of status.runtime from_dict reads (and to_dict writes): a status too big to
    # cache keeps these alone once read (trim.status_read).
    KEYS = frozenset((
        "attempt", "released", "succeeded", "failed", "cleanedUp", "restarts", "replicaRestarts", "backoffCount", "notBefore", "levels",
        "incidentAt", "incident", "incidentEnded", "disruptions", "disrupted", "disruptedEnd", "settling", "gangNotBefore", "refused",
        "refusals", "startTime", "started", "size", "outcome", "reason", "message", "finishedAt", "paused", "resuming",
        "observedGeneration", "replicaFailed", "sshSecretUid",
    ))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Ledger:
        """Read status.runtime back; a missing or partial ledger yields defaults, one edited into
        another shape raises ValueError or TypeError (the runtime refuses the record)."""
        if not data:
            return cls()
        d = dict(data)
        names = nameset.Budget(9 * nameset.MAX_NAMES)  # all nine name lists together (a tenant may edit them)
        return cls(
            attempt=_count(d.get("attempt", 1)),
            released=_names(d.get("released"), names),
            succeeded=_names(d.get("succeeded"), names),
            failed=_names(d.get("failed"), names),
            cleaned_up=bool(d.get("cleanedUp", False)),
            restarts={str(k): _count(v) for k, v in (d.get("restarts") or {}).items()},
            replica_restarts=_ungrouped(d.get("replicaRestarts"), _count_key, names),
            backoff_count=_count(d.get("backoffCount", 0)),
            not_before=_ungrouped(d.get("notBefore"), _time, names),
            levels=_ungrouped(d.get("levels"), _count_key, names),
            incident_at=_float(d.get("incidentAt")),
            incident=_names(d.get("incident"), names),
            incident_ended=_float(d.get("incidentEnded")),
            disruptions=_count(d.get("disruptions", 0)),
            disrupted=_ungrouped(d.get("disrupted"), _time, names),
            disrupted_end=_ungrouped(d.get("disruptedEnd"), _time, names),
            settling=_ungrouped(d.get("settling"), _time, names),
            gang_not_before=_float(d.get("gangNotBefore")),
            refused=_said(d.get("refused")),
            refusals=_count(d.get("refusals", 0)),
            start_time=_float(d.get("startTime")),
            started=d.get("started") is True,
            size=_int(d.get("size")),
            outcome=_one_of(d.get("outcome"), ("Succeeded", "Failed")),
            reason=_said(d.get("reason")),
            message=_said(d.get("message")),
            finished_at=_float(d.get("finishedAt")),
            paused=bool(d.get("paused", False)),
            resuming=bool(d.get("resuming", False)),
            observed_generation=_int(d.get("observedGeneration")),
            replica_failed=_said(d.get("replicaFailed")),
            ssh_secret=_uid(d.get("sshSecretUid")),
        )

    def evolve(self, **changes: Any) -> Ledger:
        return replace(self, **changes)

    @cached_property
    def released_set(self) -> frozenset[str]:
        """`released` for membership tests (a 5000-pod cycle asks thousands of times)."""
        return frozenset(self.released)

    @cached_property
    def settled(self) -> frozenset[str]:
        """Pods finished for this attempt, either way: never run again, never replaced."""
        return frozenset(self.succeeded) | frozenset(self.failed)

    def without(self, field_name: str, names: Any) -> tuple[str, ...]:
        """One of the name tuples, less `names`."""
        gone = set(names)
        return tuple(n for n in getattr(self, field_name) if n not in gone)


def _grouped(values: Mapping[str, Any], text: Any) -> dict[str, list[str]]:
    """name -> value written as value -> names (brace ranges): thousands of pods restarted
    together share one back-off time and one count."""
    groups: dict[Any, list[str]] = {}
    for name, value in values.items():
        groups.setdefault(value, []).append(name)
    return {text(v): nameset.encode(names) for v, names in sorted(groups.items())}


def _ungrouped(data: Any, kind: Any, budget: nameset.Budget | None = None) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise TypeError(f"expected a mapping, not {type(data).__name__}")
    return {name: kind(value) for value, names in data.items() for name in nameset.decode(names, budget)}


TIME_TEXT = 32  # repr() of any float is shorter
TIME_BOUND = 2.0**53  # seconds: past every date a clock gives, and every int below it is a float exactly
CLOCK_SLACK = 5.0  # a kubelet's finishedAt (its node's clock, whole seconds) against the API server's dates
SAID_CAP = 4096  # a message the ledger keeps, at most (the runtime writes one line; anyone may edit status)


def _said(value: Any) -> str | None:
    """A message or reason the runtime wrote, read back: a string, cut to SAID_CAP (it is
    written back at every status write, so junk put there would stay)."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return None if value is None else value[:SAID_CAP]


def _count(value: Any) -> int:
    """A counter as the runtime writes it: a JSON integer from 0 to int64's largest.  Anyone who
    may update the status may write one, and pods carry the attempt and restart count as
    annotations sized for int64 (compiler/render/size.py RUNTIME_POD_NOTES)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ValueError(f"expected a count from 0 to 2**63-1, got {str(value)[:40]!r}")
    return value


def _count_key(value: Any) -> int:
    """A counter kept as a JSON key (values grouped by count, _grouped): its digits."""
    if not isinstance(value, str) or not value.isascii() or not value.isdigit() or len(value) > 19:
        raise ValueError(f"expected a count from 0 to 2**63-1, got {str(value)[:40]!r}")
    return _count(int(value))


def _int(value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _one_of(value: Any, allowed: tuple[str, ...]) -> str | None:
    if value is not None and value not in allowed:
        raise ValueError(f"expected one of {', '.join(allowed)}, got {str(value)[:40]!r}")
    return value


def _uid(value: Any) -> str | None:
    """An object's uid as the ledger keeps it (anyone may edit status: its length at most)."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"expected a uid, got {type(value).__name__}")
    return None if value is None else value[:64]


def _time(value: Any) -> float:
    """A time in seconds as the runtime writes it: a finite JSON number, or its repr as a
    grouped map's key.  Anyone who may update the status may write one: float() takes "inf",
    "nan" and "1e400", and a NaN written back is null, so startTime started over (issue 21)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"expected a time in seconds, got {type(value).__name__}")
    number = float(value) if isinstance(value, str) and value.isascii() and len(value) <= TIME_TEXT else value
    if not isinstance(number, float) and not (isinstance(number, int) and abs(number) <= TIME_BOUND):
        raise ValueError(f"expected a time in seconds, got {str(value)[:40]!r}")
    if not math.isfinite(number) or abs(number) > TIME_BOUND:
        raise ValueError(f"expected a finite time in seconds, got {str(value)[:40]!r}")
    return float(number)


def _float(value: Any) -> float | None:
    return None if value is None else _time(value)


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
class NamedPod:
    """A pod the record names that no PodTemplate of the job describes now (job.problem: not
    applied yet, deleted, or taken over by a namesake of another kind): nothing is decided or
    created from it, but a pod of that name the record owns is still the job's, and its status
    counts it."""

    name: str
    type: str
    index: int


@dataclass(frozen=True)
class JobView:
    """What the record's spec means for the runtime's decisions."""

    kind: str
    name: str
    namespace: str | None
    generation: int | None
    pods: tuple[PodSpecView, ...]  # every pod of the job's PodTemplates, in rank order
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
    ssh_secret_named: bool = False  # the job names its Secret (flatjob.dev/ssh-secret), even `<job>-ssh`: the author's, never made or replaced
    podgroup: bool = False
    gang: bool = False  # a gang scheduler places the pods (T9k PodGroup, Kueue pod group): release them together
    launcher_kind: str | None = None  # torchrun | deepspeed | colossalai | None (exit-code translation)
    version: str | None = None  # flatjob version that compiled the record
    tensorboard: str | None = None  # name of the TensorBoard Deployment git holds, if any (status.tensorboard)
    problem: str | None = None  # why the job's pods cannot be created now (PodTemplates out of step with the record)
    unplanned: tuple[NamedPod, ...] = ()  # with a problem: the pods the record names that `pods` lacks (status only)
    ignored: tuple[str, ...] = ()  # spec fields this version does not know (a newer CRD's), dropped

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
