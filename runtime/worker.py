"""One job's reconcile: read its record and pods, decide (pure), write status once, act.

A JobWorker holds what the runtime keeps of one job between cycles (its view, its Events,
its retry back-off, the status it last wrote); the Controller (controller.py) owns what
jobs share: the informers, the Lease, the write budget, and the queue that decides which
job's cycle runs next.  A failure in one job's cycle backs that job off alone.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from flatjob.compiler import keys

from . import nesting, trim
from .api import (
    PODS,
    SECRETS,
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Obj,
    record_resource,
)
from .backoff import retry_delay
from .decisions import Action, Cycle, World, reconcile, scale_backoff
from .decisions.cleanup import STOP_DEADLINE
from .decisions.refuse import refused_status
from .events import EventRecorder
from .job import RecordError, admitted_pods, job_view
from .lookups import SECRET_RETRY, SECRET_TTL
from .model import GATE, JobView, Ledger, PodState
from .namesakes import NameTaken, podgroup_taken, pods_taken
from .observe import pod_state
from .scope import JobKey, job_key
from .sshkeys import (
    ForeignSecret,
    SecretNotReplaced,
    SecretReplacing,
    foreign_secret,
    owned_by,
    vouched,
)

if TYPE_CHECKING:
    from .controller import Controller

log = logging.getLogger("flatjob.runtime")

ERROR_BACKOFF_CAP = 30.0  # seconds: the longest wait before retrying a failed cycle or action
# Wall seconds one cycle acts before it yields to the other jobs (the rest next turn): a
# webhook that takes 1 s a pod create must not hold every job of the namespace for a minute.
ACT_BUDGET = 1.0
SLOW_CYCLE = 0.5  # seconds a cycle waits on the API server: longer makes its job run after the others, one slow job a turn
_wall = time.monotonic  # the budget's clock (tests make requests slow by moving it)
# A status whose only news is what the pods are doing (tasks, aggregate) is written at most this
# often: a 1000-pod restart changes them every cycle, and each write is a write token the
# deletes, creates and releases need.  The ledger, the phase and the conditions go out at once.
STATUS_EVERY = 0.5
# An unproven SSH Secret's delete failing this many times in a row (a 5xx from a webhook that is
# down, a time-out) is said on the record as a refused one is: it may never go.
SECRET_FAILURES_SAID = 2
CREATE_FAILURES_SAID = 2  # consecutive 5xx answers to pod creates before they are a refusal the record names
# A write refused as stale (409: a resourceVersion or uid precondition) is decided again from the
# newer object after a back-off of its own, from this many seconds doubling to ERROR_BACKOFF_CAP
# (client-go's per-item rate limiter, 5 ms to 1000 s): a conflict that clears costs nothing, one
# that never clears (someone rewriting the record in a loop, a webhook answering 409) is no longer
# retried at the write budget's rate, out of every job's budget (review hx24).
STALE_BACKOFF = 0.005


def refusal(exc: ApiError, failures: int) -> bool:
    """Whether a failed pod create is the API server refusing it, said on the record and backed off
    as such: 403 (quota, RBAC, PodSecurity, a webhook's denial) and 400/422 at once; a 5xx (an
    admission webhook with failurePolicy Fail that cannot be called answers 500 "failed calling
    webhook": webhook/validating/dispatcher.go, apierrors.NewInternalError) once it repeats
    (review 23, round 15: a webhook down for 20 minutes left the record silent)."""
    return exc.status in (400, 403, 422) or (exc.status >= 500 and failures >= CREATE_FAILURES_SAID)
OBSERVED = frozenset({"tasks", "aggregate", "selector"})


class VersionMismatch(RuntimeError):
    """The record was compiled by another flatjob version; acting on it could diverge from git."""


def owner_reference(record: Obj) -> Obj:
    """An ownerReference to the job record (garbage collection deletes the dependent with it)."""
    meta = record.get("metadata") or {}
    return {"apiVersion": record.get("apiVersion"), "kind": record.get("kind"), "name": meta.get("name"), "uid": meta.get("uid")}


def uid_of(obj: Obj | None) -> str | None:
    """An object's uid (a record's: what owns its pods; a Secret's: which one the runtime made)."""
    return ((obj or {}).get("metadata") or {}).get("uid")


@dataclass
class JobWorker:
    """One job record's cycles."""

    ctl: Controller
    key: JobKey
    last_cycle: Cycle | None = None
    refused: str | None = None  # why the runtime refuses to act on this record (version mismatch...)
    cycles: int = 0
    dirty: bool = True
    _view_key: Any = None
    _view: JobView | None = None
    _refused: tuple[str, str] | None = None  # a create the API server refused, for the next cycle
    _cycle_wake: float | None = None
    _failures: int = 0  # consecutive failed cycles or actions
    _secret_failures: int = 0  # consecutive failed deletes of an unproven SSH Secret (SECRET_FAILURES_SAID)
    _create_failures: int = 0  # consecutive failed pod creates (refusal)
    _stale: int = 0  # consecutive cycles whose writes were refused as stale (STALE_BACKOFF)
    _namesakes: dict[str, Obj] = field(default_factory=dict)  # pods of a namesake's, by name, that only a refused create found
    _namesakes_read: float = 0.0  # when they were last read
    _secret_retry: tuple[float, str, ForeignSecret] | None = None  # after a failed delete: when to try that uid again, and what to say till then
    _retry_at: float | None = None
    _reported: str | None = None  # the last unexpected error reported as an Event
    _status_at: float = float("-inf")  # when this runtime last wrote the status
    _status_wake: float | None = None  # a coalesced status write is due then
    _writes: int = 0  # status writes in the current cycle (one by design)
    slow: bool = False  # its last cycle took longer than SLOW_CYCLE (controller: after the others)
    _wanted: tuple[str | None, str | None, str | None] | None = None  # the lookups asked for
    _release_secret: str | None = None  # the uid of the job's own SSH Secret trusted this cycle: on each pod it releases
    _began: float = 0.0  # when the current cycle began (the controller's clock)
    _states: dict[str, tuple[Obj, str | None, str | None, PodState]] = field(default_factory=dict)  # pod_state by name, of the object it was made from (_pod_state)
    recorder: EventRecorder = field(init=False)

    def __post_init__(self) -> None:
        self.kind, self.name = self.key
        self.namespace = self.ctl.namespace
        self.record_res = record_resource(keys.RECORD_PLURALS[self.kind])
        self.recorder = EventRecorder(self.namespace)
        self.uid = uid_of(self.record())  # a record replaced under the same name gets a worker of its own (its Events, its timers)

    # --- when -----------------------------------------------------------------------------------
    def wake_at(self, now: float) -> float | None:
        """The next time this job must run a cycle although nothing changes (`now`: the one
        clock reading its caller compares with: a held-back Event's first write is due `now`).
        While a retry waits, nothing runs before it, so an older timer never reads as past."""
        if self._retry_at is not None:
            return self._retry_at
        times = [t for t in (self._cycle_wake, self._status_wake, self.recorder.pending(now)) if t is not None]
        return min(times) if times else None

    def due(self, now: float) -> bool:
        if self._retry_at is not None and now < self._retry_at:
            return False
        wake = self.wake_at(now)
        return self.dirty or self._retry_at is not None or (wake is not None and now >= wake)

    def record(self) -> Obj | None:
        return self.ctl.record_of(self.key)

    # --- one cycle -----------------------------------------------------------------------------
    def reconcile(self) -> Cycle | None:
        """One cycle: decide, write status (once), then act; nothing it raises escapes."""
        self.dirty = False
        self._retry_at = self._status_wake = None  # each cycle sets again what it still waits for
        self._writes = 0
        stale = self._stale
        self._began = self.ctl.clock()
        started, cpu, turns, requests = time.perf_counter(), time.thread_time(), self.ctl.lock.waited(), self.ctl.lock.requests()
        try:
            cycle = self._reconcile()
            if self._retry_at is None:
                self._failures = 0
            if self._stale == stale:
                self._stale = 0  # no write of this cycle was refused as stale
            return cycle
        except Exception as exc:  # a bug or input nobody expected: report, back off, retry
            self._fail("cycle", exc)
            self._report(exc)
            return None
        finally:
            took = time.perf_counter() - started
            self.ctl.metrics.observe(took)
            self.ctl.metrics.maximum("flatjob_cycle_status_writes_max", self._writes)
            waited = took - (time.thread_time() - cpu) - (self.ctl.lock.waited() - turns)  # on its requests, not on the other threads' turns
            if waited > SLOW_CYCLE:  # a webhook on its record, throttling: behind the others
                self.slow = True
            elif self.ctl.pool is None or self.ctl.lock.requests() > requests:  # fast again only by requests answered fast (on the threads, which count them): a cycle with none proves nothing
                self.slow = False

    def _reconcile(self) -> Cycle | None:
        record = self.record()
        if record is None:
            self._cycle_wake = None
            return None
        try:
            job = self._job_view(record)
            status = trim.status_of(record)
            if status is None:  # too big to cache (someone wrote into it): read it for this cycle alone; the write drops what is not ours
                status = self._read_status(job)
            try:
                ledger = Ledger.from_dict(status.get("runtime"))
            except (TypeError, ValueError, AttributeError) as exc:
                raise RecordError(f"status.runtime of {self.name} is unreadable ({exc}); restore it or delete the record's status") from None
        except (VersionMismatch, RecordError) as exc:
            self._refuse(record, exc)
            return None
        world, self._refused = self._world(job), None
        # An unproven <job>-ssh is replaced, someone else's refused: either way creating and
        # releasing pods waits, and every other decision goes on (outcomes, status, clean-up).
        # A namesake's (another kind's job of this name, namesakes.py) pods or PodGroup: the same.
        foreign = self._namesake(job, record, ledger) or self._judge_secret(job, world, record, ledger)
        self._reported = None
        owner = uid_of(record)
        states = self._states
        self._states = {}
        pods = {n: self._pod_state(states, n, o, job, owner) for n, o in self.ctl.pods.of(self.key).items()}
        now = self.ctl.clock()
        ended = {n: self._pod_state(states, n, o, job, owner) for n, o in self.ctl.pods.gone_of(self.key).items() if n not in pods}
        world = replace(world, secret_uid=None if foreign else self._secret_uid(job, world), secret_refused=str(foreign) if foreign else None, ended=ended,
                        name_taken=isinstance(foreign, NameTaken))
        cycle = scale_backoff(reconcile(job, pods, ledger, world, status, now, self.ctl.settle), ledger, now, self.ctl.backoff_scale)
        cycle = self._refusing_secret(cycle, foreign, record, status, now)
        self.cycles += 1
        if world.secret_is_ours and any(a.kind == "release" for a in cycle.actions) and not self._secret_still_ours(job, world, record, ledger):
            return None
        self._release_secret = self._secret_uid(job, world)  # each pod released now carries it (sshkeys)
        self.ctl.decided(self.ctl.clock() - self._began)
        if not self._record_status(record, status, cycle.status, now):
            return None
        self.last_cycle = cycle
        for etype, reason, message in cycle.events:
            self._event(etype, reason, message)
        self._cycle_wake = cycle.wake_at
        again = self.ctl.secrets.recheck_at(job.ssh_secret) if job.ssh_secret and not world.secret_exists else None
        if again is not None:  # a Secret read, not watched: look again later
            self._cycle_wake = again if cycle.wake_at is None else min(cycle.wake_at, again)
        self._act_all(cycle, record)
        self._flush_events(record)
        return cycle

    def _pod_state(self, states: dict[str, tuple[Obj, str | None, str | None, PodState]], name: str, obj: Obj, job: JobView, owner: str | None) -> PodState:
        """pod_state of a cached pod object, computed again only when the object changed: the
        informer replaces an object whole on every change and never edits one in place, so the
        same object (identity) with the same container and owner is the same state. A 1000-pod
        job's cycle otherwise spends most of its CPU here, and each cycle of a restart acts on
        one burst of the write budget: the budget's tokens run on while a cycle decides."""
        spec = job.pod(name)
        container = spec.container if spec else None
        kept = states.get(name)
        if kept is not None and kept[0] is obj and kept[1] == container and kept[2] == owner:
            state = kept[3]
        else:
            state = pod_state(obj, container, owner)
        self._states[name] = (obj, container, owner, state)
        return state

    def _record_status(self, record: Obj, old: dict[str, Any], new: dict[str, Any], now: float) -> bool:
        """Write the cycle's status (the ledger with it) unless it can wait; False when it had
        to go out and could not, so nothing may act."""
        if new == old:
            return True
        if self._news_can_wait(old, new, now):
            self._status_wake = self._status_at + STATUS_EVERY
            return True
        return self._token() and self._write_status(record, new)

    def _news_can_wait(self, old: dict[str, Any], new: dict[str, Any], now: float) -> bool:
        """Only observations changed (never the ledger, phase or conditions), and the last
        status write is younger than STATUS_EVERY."""
        if now >= self._status_at + STATUS_EVERY:
            return False
        changed = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
        return changed <= OBSERVED

    def _act_all(self, cycle: Cycle, record: Obj) -> None:
        """The cycle's actions, while this runtime leads and the write and time budgets last."""
        started, turns = _wall(), self.ctl.lock.waited()
        for action in cycle.actions:
            if _wall() - started - (self.ctl.lock.waited() - turns) > ACT_BUDGET:  # its own requests' time, not the other threads' turns
                self.dirty = True
                return  # slow requests (a webhook, API priority and fairness): the others' turn first
            if not self.ctl.leading():
                self.dirty = True
                return  # the Lease is no longer ours: the next holder takes it from the ledger
            if not self._token():
                return  # out of write tokens: the next cycle derives the rest again
            self._act(action, record)
            if self._retry_at is not None:
                self.dirty = True
                return  # it failed (an unreachable server, a 5xx): the rest after the back-off, not 30 s each now
        if cycle.actions:
            self.dirty = True  # our own changes are in the cache already; look at them once more

    def _token(self) -> bool:
        """A write token; without one, this job is looked at again once the bucket refills."""
        if self.ctl.token():
            return True
        self.dirty = True
        return False

    def _stale_write(self, what: str, exc: ApiError) -> None:
        """A write refused as stale: decided again, from the newer object, after STALE_BACKOFF doubling."""
        self._stale += 1
        self.dirty = True
        self.ctl.metrics.inc("flatjob_api_errors_total", op=what, status=str(exc.status))
        self._retry_at = self.ctl.clock() + retry_delay(self._stale, ERROR_BACKOFF_CAP, self.ctl.rng, exc, base=STALE_BACKOFF)

    def _fail(self, what: str, exc: Exception) -> None:
        """Count a failure and retry after a capped, doubling, jittered back-off."""
        self._failures += 1
        self.dirty = True
        delay = retry_delay(self._failures, ERROR_BACKOFF_CAP, self.ctl.rng, exc)
        self._retry_at = self.ctl.clock() + delay
        self._log_failure(what, exc, delay)

    def _log_failure(self, what: str, exc: Exception, retry_in: float) -> None:
        status = str(exc.status) if isinstance(exc, ApiError) else type(exc).__name__
        self.ctl.metrics.inc("flatjob_api_errors_total" if isinstance(exc, ApiError) else "flatjob_loop_errors_total", op=what, status=status)
        log.warning(f"{what} failed", extra={"job": self.name, "error": f"{type(exc).__name__}: {exc}"[:500], "retry_in": retry_in})

    def _report(self, exc: Exception) -> None:
        """An Event and a Stalled condition for an unexpected failure (once per distinct error)."""
        text = f"{type(exc).__name__}: {exc}"[:500]
        if text == self._reported:
            return
        self._reported = text
        log.exception("reconcile failed", extra={"job": self.name})
        record = self.record()
        if record is None:
            return
        why = f"the runtime could not reconcile this job ({text}); it retries with back-off"
        self._event("Warning", "ReconcileError", why)
        self._flush_events(record)
        old = trim.status_of(record)
        if old is not None:  # a status too big to keep stays as someone wrote it (_refuse)
            self._write_status(record, refused_status(old, "ReconcileError", why, _generation(record), self.ctl.clock()))

    # --- reading --------------------------------------------------------------------------------
    def _job_view(self, record: Obj) -> JobView:
        meta = record.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        rendered_by = annotations.get(keys.VERSION)
        if rendered_by != self.ctl.version:
            raise VersionMismatch(
                f"record {self.name} was compiled by flatjob {rendered_by}, but this runtime is flatjob {self.ctl.version}; "
                "recompile with the same version (the runtime image tag must equal the compiler version)"
            )
        templates = self.ctl.templates.of(self.key)
        versions = tuple(sorted((n, (t.get("metadata") or {}).get("resourceVersion")) for n, t in templates.items()))
        # A digest, not the text: a second copy of every served spec would count against the
        # runtime's memory limit uncounted (review 24, round 7).
        spec = record.get("spec")
        text = (spec if isinstance(spec, bytes) else json.dumps(spec, sort_keys=True, default=str).encode()) + json.dumps(annotations, sort_keys=True).encode()
        key = (meta.get("generation"), hashlib.sha256(text).digest(), versions)
        if key != self._view_key:
            try:
                self._view = self._make_view(record, templates)
            except RecordError:
                raise
            except Exception as exc:  # a spec that passed the schema but not the planner
                raise RecordError(f"record {self.name} cannot be planned: {type(exc).__name__}: {exc}") from None
            self._view_key = key
            if self._view.ignored:
                fields = ", ".join(self._view.ignored[:10])
                self._event("Normal", "UnknownFields", f"flatjob {self.ctl.version} does not know {fields} (a newer CRD's): ignored")
        assert self._view is not None
        return self._view

    def _make_view(self, record: Obj, templates: dict[str, Obj]) -> JobView:
        """job_view; from a dense spec (anyone who may update the record may put 1.3 MB of small
        objects under a pod template, which the CRD keeps: ~31 MiB parsed, ~47 MiB at its peak
        typed) under nesting.DENSE, so no two are held parsed at once, however many jobs' cycles
        run (ten such specs took the runtime to 225 MiB of its 128, issue 21 round 2). The view
        keeps none of it."""
        spec = record.get("spec")
        if not isinstance(spec, bytes) or nesting.json_values(spec) <= nesting.DENSE_VALUES:
            return job_view(record, templates)
        templates = dict(templates)  # the cache may change while the TurnLock is let go
        with self.ctl.lock.released(), nesting.DENSE:  # (DENSE never waited for with the TurnLock held)
            return job_view(record, templates)

    def wants(self) -> tuple[str | None, str | None, str | None]:
        """The names of the Secret, PodGroup and TensorBoard Deployment this job looks up."""
        view = self._view
        if view is None:
            return None, None, None
        return view.ssh_secret, view.name if view.podgroup else None, view.tensorboard

    def _world(self, job: JobView) -> World:
        """Which of the objects a release waits for exist."""
        ctl = self.ctl
        wants = self.wants()
        if wants != self._wanted:  # look up what this job names now, and stop what it no longer does
            self._wanted = wants
            ctl.want_lookups()
        secret_known, secret = ctl.secrets.get(job.ssh_secret) if job.ssh_secret else (True, None)
        group_known, group = ctl.podgroups.get(job.name) if job.podgroup else (True, None)
        board_known, board = ctl.tensorboards.get(job.tensorboard) if job.tensorboard else (False, None)
        return World(
            secret_exists=not job.ssh_secret or (secret_known and secret is not None),
            secret_known=not job.ssh_secret or secret_known,
            secret_is_ours=job.ssh_secret is not None and not job.ssh_secret_named,
            podgroup_exists=not job.podgroup or (group_known and group is not None),
            refused=self._refused,
            tensorboard_ready=trim.ready(board) if board_known else None,
        )

    def _foreign_secret(self, job: JobView, world: World, record: Obj, ledger: Ledger) -> ForeignSecret | None:
        """The refusal for a `<job>-ssh` Secret this job's runtime did not create (see sshkeys):
        trusted by the uid this process's create returned, else by a pod released with it."""
        if not world.secret_is_ours or not job.ssh_secret or ledger.outcome is not None:
            return None  # a finished job releases no pod again
        known, secret = self.ctl.secrets.get(job.ssh_secret)
        if not known or secret is None:
            return None
        made = self._made_secret(job)
        vouch = uid_of(secret) != made and vouched(self.ctl.pods.of(self.key).values(), record, secret)
        return foreign_secret(job.ssh_secret, secret, record, made, vouch)

    def _namesake(self, job: JobView, record: Obj, ledger: Ledger) -> NameTaken | None:
        """A job of another kind and this name holding this job's pod names (its pods, as cached:
        the pods are watched by the job-name label whatever their kind), or labelling the PodGroup
        this job's pods join as its own: no pod is created or released meanwhile (namesakes.py)."""
        if ledger.outcome is not None:
            return None  # a finished job creates no pod again
        others = {k: dict(pods) for k in keys.RECORD_PLURALS if k != self.kind and (pods := self.ctl.pods.of((k, self.name)))}
        for name, pod in self._remembered_namesakes().items():
            others.setdefault(str(job_key(pod)[0]), {}).setdefault(name, pod)  # type: ignore[index]
        taken = pods_taken(self.kind, self.name, self.namespace, uid_of(record), admitted_pods(record), others) if others else None
        if taken is None and job.podgroup:
            taken = podgroup_taken(self.kind, self.name, self.ctl.podgroups.get(job.name)[1])
        return taken

    def _remembered_namesakes(self) -> dict[str, Obj]:
        """The namesake's pods a refused create found (_name_taken), read again by name every
        SECRET_TTL: kept while a namesake's pod holds the name."""
        if self._namesakes and self.ctl.clock() >= self._namesakes_read + SECRET_TTL:
            self._namesakes_read = self.ctl.clock()
            self._namesakes = {n: p for n in list(self._namesakes) if isinstance(p := self._name_taken(n), dict)}
        return self._namesakes

    def _judge_secret(self, job: JobView, world: World, record: Obj, ledger: Ledger) -> ForeignSecret | None:
        """The job's `<job>-ssh` when this process may not trust it: one with the record's
        ownerReference is replaced (_replace_unproven_secret), any other refused."""
        foreign = self._foreign_secret(job, world, record, ledger)
        if foreign is None:
            return None
        _, secret = self.ctl.secrets.get(job.ssh_secret or "")  # what _foreign_secret just read
        uid = uid_of(secret)
        if secret is None or not isinstance(uid, str) or not owned_by(secret, record):
            return foreign
        return self._replace_unproven_secret(job, secret, uid, record, ledger)

    def _refusing_secret(self, cycle: Cycle, foreign: ForeignSecret | None, record: Obj, written: dict[str, Any], now: float) -> Cycle:
        """The cycle, with a ForeignSecret said: an Event (once), Stalled on the record while the
        job runs, and a look again after SECRET_TTL (a namespace runtime reads Secrets, never
        watches them).  The rest of the cycle goes on (deadlines, outcomes, clean-up): the
        decisions create and release no pod meanwhile (World.secret_refused)."""
        if foreign is None:
            self.refused = None
            return cycle
        if foreign.quiet:  # being replaced: the next cycle sees it gone
            return replace(cycle, wake_at=now + SECRET_RETRY if cycle.wake_at is None else min(cycle.wake_at, now + SECRET_RETRY))
        why = str(foreign)
        if self.refused != why:
            log.error(why, extra={"job": self.name})
            self._event("Warning", foreign.reason, why)
        self.refused = why
        wake = now + SECRET_TTL if cycle.wake_at is None else min(cycle.wake_at, now + SECRET_TTL)
        status = cycle.status if cycle.ledger.outcome else refused_status(cycle.status, foreign.reason, why, _generation(record), now, written)
        return replace(cycle, status=status, wake_at=wake)

    def _secret_still_ours(self, job: JobView, world: World, record: Obj, ledger: Ledger) -> bool:
        """A namespace runtime reads its Secret again right before it releases pods (it never
        watches Secrets): False, so nothing acts this cycle, when that read fails, finds none, or
        finds someone else's (attacker of issue 21, round 4: a failed read let the release through)."""
        if self.ctl.secrets.recheck_at(job.ssh_secret) is None:
            return True  # watched: the cache is as fresh as a read
        self.ctl.secret_created(job.ssh_secret or "")
        known, secret = self.ctl.secrets.get(job.ssh_secret or "")
        if not known or secret is None:
            self._cycle_wake = self.ctl.clock() + SECRET_RETRY
            return False
        if self._foreign_secret(job, world, record, ledger) is not None:
            self.dirty = True  # the next cycle says so and releases nothing
            return False
        return True

    def _made_secret(self, job: JobView) -> str | None:
        """The uid of the `<job>-ssh` this runtime process made, if it made one.  The status's
        uid is no proof (a status edit could name a planted Secret; review of round 11)."""
        return self.ctl.made_secrets.get((job.ssh_secret or "", self.uid or ""))

    def _read_status(self, job: JobView) -> dict[str, Any]:
        """The record's status, read from the API server for one cycle: the cache keeps only the
        size of a status bigger than this job's can be (trim.record), and the ledger in it is
        still the job's. A status that is not a mapping, or whose ledger is bigger than this
        job's can be, is no ledger (RecordError). Of a dense record's text only the status's
        scalars and its ledger's names are parsed (trim.STATUS_LIFT: each other member comes as
        its bytes, runtime.sieve), and the cycle keeps what it reads (trim.status_read), at most
        this job's status size: ten such statuses read at once cost ten times that, never ten
        times their junk parsed. (No lock is held across the request: a hung one holds nothing.)"""
        limit = trim.status_limit(len(job.pods), len(job.rules) + 2)
        found, _ = self.ctl.cluster.list(self.record_res, self.namespace, fields={"metadata.name": self.name}, lift=trim.STATUS_LIFT)  # list, as the Role allows
        status = (found[0] if found else {}).get("status")
        del found
        if not isinstance(status, (dict, bytes)) or (isinstance(status, bytes) and not status.startswith(b"{")):
            raise RecordError(f"the status of {self.name} is not a mapping; restore it or delete the record's status")
        try:
            return trim.status_read(status, limit)
        except ValueError as exc:
            raise RecordError(f"the status of {self.name} is unreadable ({exc}); restore it or delete the record's status") from None

    def _replace_unproven_secret(self, job: JobView, secret: Obj, uid: str, record: Obj, ledger: Ledger) -> ForeignSecret:
        """A `<job>-ssh` with the record's ownerReference that this process did not make and no
        pod of the job was released with (an earlier runtime's, between its create and a release;
        one planted with a forged reference, or swapped in while the runtime was away), while the
        job may still release pods: nothing that runs was released with it, so it is deleted
        (only that object: a uid precondition) and a later cycle makes a fresh pair.  Meanwhile
        no pod is created or released (SecretReplacing); one that cannot go (a refusal, a
        finalizer, a delete that keeps failing) is said on the record (SecretNotReplaced)."""
        name = job.ssh_secret or ""
        waiting = SecretReplacing(f"waiting for a fresh SSH Secret {name}: the one there was made before this runtime process "
                                  "started and no pod of the job was released with it, so it is being replaced")
        if (secret.get("metadata") or {}).get("deletionTimestamp"):
            self.ctl.secret_created(name)  # read it again next time: gone, or still held
            return SecretNotReplaced(f"Secret {name} is being deleted but something holds it (a finalizer): no pod is created or "
                                     "released until it is gone and the runtime has made a fresh key pair; remove its finalizers")
        if not self.ctl.leading():
            return waiting  # the next holder decides: it may have just made this Secret
        if self._secret_retry is not None and self._secret_retry[1] == uid and self.ctl.clock() < self._secret_retry[0]:
            return self._secret_retry[2]  # its delete failed: tried again after its own back-off, the job's other decisions going on
        refusal = self._delete_secret(name, uid, waiting)
        if refusal is not None:
            return refusal
        if uid == ledger.ssh_secret:  # most likely made by an earlier runtime process of this job
            self._event("Normal", "SecretReplaced", f"Secret {name} was made before this runtime process started, and no pod of the "
                        "job was released with it, so it is replaced with a fresh key pair")
        else:
            self._event("Warning", "SecretReplaced", f"Secret {name} has this job's ownerReference, but its runtime has no record of "
                        "creating it (anyone may write an ownerReference) and no pod of the job was released with it, so it is replaced "
                        "with a fresh key pair")
        self._flush_events(record)
        self.dirty = True
        return waiting

    def _delete_secret(self, name: str, uid: str, waiting: ForeignSecret) -> ForeignSecret | None:
        """Delete an unproven Secret by its uid: None once gone, else what the cycle says while it
        is not. A failure is tried again after a back-off of its own (never the job's, which would
        hold back its other decisions) and said on the record when it is refused or keeps failing."""
        try:
            self.ctl.cluster.delete(SECRETS, self.namespace, name, uid=uid)
        except NotFound:
            pass
        except Conflict:  # another object under the name now (the uid precondition): look again
            self.ctl.secret_created(name)
            self.dirty = True
            return waiting
        except ApiError as exc:
            self._secret_failures += 1
            delay = retry_delay(self._secret_failures, ERROR_BACKOFF_CAP, self.ctl.rng, exc)
            self._log_failure("secret", exc, delay)
            said = isinstance(exc, (Forbidden, Invalid)) or self._secret_failures >= SECRET_FAILURES_SAID  # RBAC, a webhook denying or down
            refusal = SecretNotReplaced(f"Secret {name} must be replaced (this runtime process did not make it and no pod of the job was "
                                        f"released with it), but its deletion failed ({_api_message(exc)[:300]}); no pod is created or released "
                                        "until it is deleted") if said else waiting
            self._secret_retry = (self.ctl.clock() + delay, uid, refusal)
            return refusal
        self._secret_failures, self._secret_retry = 0, None
        self.ctl.secret_created(name)  # read it again: gone
        return None

    def _secret_uid(self, job: JobView, world: World) -> str | None:
        """The uid of the job's own `<job>-ssh` Secret, seen and trusted this cycle."""
        if not world.secret_is_ours or not job.ssh_secret:
            return None
        known, secret = self.ctl.secrets.get(job.ssh_secret)
        uid = uid_of(secret) if known else None
        return uid if isinstance(uid, str) else None

    # --- writing --------------------------------------------------------------------------------
    def _write_status(self, record: Obj, status: dict[str, Any]) -> bool:
        ctl = self.ctl
        if not ctl.leading():
            self.dirty = True  # the Lease lapsed mid-drain: this job runs again once it is held
            return False
        body = {"apiVersion": record["apiVersion"], "kind": record["kind"], "metadata": copy.deepcopy(record["metadata"]), "status": status}
        try:
            ctl.records[self.kind].written(self.name, lambda keep: ctl.cluster.replace(self.record_res, self.namespace, body, sub="status", trim=keep, lift=trim.RECORD_LIFT), trim.record)
        except Conflict as exc:
            self._stale_write("status", exc)
            return False  # someone else wrote; the watch brings the new version, then we decide again
        except ApiError as exc:
            self._fail("status", exc)
            return False
        ctl.metrics.inc("flatjob_status_writes_total")
        self._writes += 1
        self._status_at = ctl.clock()
        return True

    def _act(self, action: Action, record: Obj) -> None:
        if action.kind == "create" and (self._refused is not None or self._namesakes):
            return  # one refusal is enough: the gang is rolled back next cycle (a namesake's: NameTaken)
        try:
            {
                "release": self._release,
                "create": self._create,
                "delete": self._delete,
                "stop": self._stop,
                "unhold": self._unhold,
                "create-secret": self._create_secret,
            }[action.kind](action, record)
        except (NotFound, AlreadyExists):
            pass  # someone (a GitOps tool, the kubelet) got there first: fine
        except (Conflict, Invalid) as exc:
            log.info("stale action", extra={"action": action.kind, "pod": action.name, "error": str(exc)})
            self._stale_write(action.kind, exc)  # our view was stale; the next cycle sees the new state
        except Exception as exc:  # an API error, an unreachable server, a bug: retried after back-off
            if isinstance(exc, Forbidden):
                self._report(exc)  # RBAC or a webhook will not change by retrying: say so on the record
            self._fail(action.kind, exc)

    def _pod(self, name: str) -> Obj | None:
        return self.ctl.pods.of(self.key).get(name)

    def _release(self, action: Action, record: Obj) -> None:
        """Remove flatjob's scheduling gate from exactly this incarnation (a JSON patch with tests)."""
        pod = self._pod(action.name)
        if pod is None:
            return
        gates = [g.get("name") for g in pod["spec"].get("schedulingGates") or []]
        if GATE not in gates:
            return
        index = gates.index(GATE)
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/uid", "value": action.uid},
            {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": GATE},
            {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
        ]
        if self._release_secret is not None and isinstance(pod["metadata"].get("annotations"), dict):  # the runtime's pods always have some
            ops.append({"op": "add", "path": f"/metadata/annotations/{keys.SSH_SECRET_UID.replace('/', '~1')}", "value": self._release_secret})
        self.ctl.pods.written(action.name, lambda keep: self.ctl.cluster.patch(PODS, self.namespace, action.name, ops, trim=keep), trim.pod)
        self.ctl.metrics.inc("flatjob_releases_total")

    def _create(self, action: Action, record: Obj) -> None:
        """The pod, from its PodTemplate verbatim, plus the runtime's annotations and owner."""
        template = self.ctl.templates.of(self.key).get(action.name)
        if template is None:
            return
        body = trim.pod_from_template(template, self.namespace, action.annotations, {**owner_reference(record), "controller": True})
        try:
            self.ctl.pods.written(action.name, lambda keep: self.ctl.cluster.create(PODS, self.namespace, body, trim=keep), trim.pod)
        except AlreadyExists:
            taken = self._name_taken(action.name)
            if taken is None:
                raise  # the job's own, which the watch has not brought yet
            if isinstance(taken, dict):  # a namesake's, which this runtime does not watch: NameTaken from the next cycle on
                self._namesakes[action.name] = taken
                self._namesakes_read = self.ctl.clock()
            else:
                self._refused = (action.name, taken)  # a refusal: backed off, the record says why
            self.dirty = True
            return
        except ApiError as exc:
            self._create_failures += 1
            if not refusal(exc, self._create_failures):
                raise  # retried after the job's error back-off
            self._refused = (action.name, _api_message(exc))  # the gang is rolled back next cycle, the record says why
            self.dirty = True
            self.ctl.metrics.inc("flatjob_api_errors_total", op="create", status=str(exc.status))
            return
        self._create_failures = 0

    def _name_taken(self, name: str) -> str | Obj | None:
        """Why a pod's name is taken by one outside this job's view (the runtime watches its pods
        by the job's labels): someone made it without them, or took them off the job's own; or
        the pod, when a namesake of another kind made it (namesakes.py: a job-mode namesake's pods
        are not cached by a namespace runtime, nor the other way round).  None
        when the pod there is the job's (its create raced the watch) or is gone already.  Read
        by a list on its name, trimmed (the runtime's Role has no get on pods).  A failed list
        is raised, an API error backed off as any: swallowed with the 409, the pod was created
        again every cycle (review hx20)."""
        items, _ = self.ctl.cluster.list(PODS, self.namespace, fields={"metadata.name": name}, trim=trim.pod)
        there = next((p for p in items if (p.get("metadata") or {}).get("name") == name), None)
        if there is None or job_key(there) == self.key:
            return None
        kind, job = self.key
        other = job_key(there)
        if other and other[1] == job and other[0] != kind and other[0] in keys.RECORD_PLURALS and pods_taken(kind, job, self.namespace, self.uid, (name,), {other[0]: {name: there}}):
            return there
        return (f"pod {name} already exists without this job's labels ({keys.JOB_KIND}={kind}, {keys.JOB_NAME}={job}): someone made it, "
                "or took them off the job's own, so the runtime neither sees nor replaces it; delete it or give it back its labels")

    def _delete(self, action: Action, record: Obj) -> None:
        self.ctl.cluster.delete(PODS, self.namespace, action.name, action.uid)
        cached = self._pod(action.name)
        if cached is not None and (cached.get("metadata") or {}).get("uid") == action.uid:
            # Seen as going at once, so the next cycle does not delete it again before the
            # watch brings the deletion (each delete costs a write token).
            meta = {**cached["metadata"], "deletionTimestamp": cached["metadata"].get("deletionTimestamp") or "deleting"}
            self.ctl.pods.store({**cached, "metadata": meta})

    def _stop(self, action: Action, record: Obj) -> None:
        """End this incarnation's containers but keep the pod and its log: a past
        spec.activeDeadlineSeconds (an update ValidatePodUpdate allows: set, or lowered) makes
        the kubelet kill it (pkg/kubelet/active_deadline.go); the annotation says who did."""
        ops = [
            {"op": "test", "path": "/metadata/uid", "value": action.uid},
            {"op": "add", "path": "/spec/activeDeadlineSeconds", "value": STOP_DEADLINE},
            {"op": "add", "path": f"/metadata/annotations/{keys.STOPPED.replace('/', '~1')}", "value": "true"},
        ]
        self.ctl.pods.written(action.name, lambda keep: self.ctl.cluster.patch(PODS, self.namespace, action.name, ops, trim=keep), trim.pod)

    def _unhold(self, action: Action, record: Obj) -> None:
        """Take Kueue's finalizer off an ended pod of the job being deleted (decisions.held_by_kueue),
        from exactly this incarnation and only if it is still there (a JSON patch with tests)."""
        pod = self._pod(action.name)
        held = list(((pod or {}).get("metadata") or {}).get("finalizers") or [])
        if keys.KUEUE_FINALIZER not in held:
            return
        at = f"/metadata/finalizers/{held.index(keys.KUEUE_FINALIZER)}"
        ops = [{"op": "test", "path": "/metadata/uid", "value": action.uid}, {"op": "test", "path": at, "value": keys.KUEUE_FINALIZER}, {"op": "remove", "path": at}]
        self.ctl.pods.written(action.name, lambda keep: self.ctl.cluster.patch(PODS, self.namespace, action.name, ops, trim=keep), trim.pod)

    def _create_secret(self, action: Action, record: Obj) -> None:
        made = self.ctl.cluster.create(SECRETS, self.namespace, self.ctl.secret_factory(action.name, self.namespace, record))
        uid = uid_of(made) if isinstance(made, dict) else None
        if isinstance(uid, str):
            self.ctl.made_secrets[(action.name, self.uid or "")] = uid  # trusted by this uid alone, for this record (sshkeys)
        self.ctl.secret_created(action.name)
        self.dirty = True
        self._event("Normal", "SecretCreated", f"generated an ed25519 key pair in Secret {action.name}")

    # --- Events ---------------------------------------------------------------------------------
    def _event(self, etype: str, reason: str, message: str) -> None:
        """Log an occurrence and hand it to the recorder, which writes it (aggregated) later."""
        if reason == "Restarting":
            self.ctl.metrics.inc("flatjob_restarts_total")
        log.info(message, extra={"reason": reason, "job": self.name, "type": etype})
        self.recorder.record(etype, reason, message, self.ctl.clock())

    def _flush_events(self, record: Obj) -> None:
        """Write the Events that are due: at most one per (type, reason) per 10 s, while this
        runtime leads (the loop may learn it lost the Lease while this cycle's request was out)."""
        now = self.ctl.clock()
        for write in self.recorder.due(record, now):
            if not self.ctl.leading():
                self.dirty = True
                return  # held back: written once the Lease is ours again, or by the next holder's own
            if not self._token():
                return
            try:
                self.recorder.send(self.ctl.cluster, write, now)
            except NotFound:
                self.recorder.lost(write)  # the Event expired (TTL): created again next time
            except Invalid:  # someone rewrote it without the fields the patch replaces (422): so is it
                self.recorder.lost(write)
                self.ctl.metrics.inc("flatjob_api_errors_total", op="event", status="422")
            except ApiError as exc:
                self.ctl.metrics.inc("flatjob_api_errors_total", op="event", status=str(exc.status))
                self.recorder.done(write, now)  # an Event is not worth retrying: the count moves on

    def _refuse(self, record: Obj, exc: Exception) -> None:
        """A record this runtime will not act on: an Event and a Stalled condition, once."""
        why = str(exc)
        reason = "VersionMismatch" if isinstance(exc, VersionMismatch) else getattr(exc, "reason", "InvalidRecord")
        if self.refused != why:
            log.error(why, extra={"job": self.name})
            self._event("Warning", reason, why)
        self._flush_events(record)  # every time: an Event held back by the write budget goes out once there are tokens
        self.refused = why
        self._cycle_wake = None
        old = trim.status_of(record)
        if old is None:  # too big to read: left as someone wrote it, not overwritten with a fresh ledger
            return
        status = refused_status(old, reason, why, _generation(record), self.ctl.clock())
        if status != old:
            self._write_status(record, status)


def _api_message(exc: ApiError) -> str:
    """The API server's own words from an error ("403 Forbidden: <message>" -> "<message>")."""
    text = str(exc)
    head, sep, rest = text.partition(": ")
    return rest if sep and head.split(" ", 1)[0].isdigit() else text


def _generation(record: Obj) -> int | None:
    value = (record.get("metadata") or {}).get("generation")
    return value if isinstance(value, int) else None


__all__ = ["ERROR_BACKOFF_CAP", "STATUS_EVERY", "JobWorker", "VersionMismatch", "owner_reference"]
