"""The reconcile loop: observe (informers) -> queue the jobs that changed -> each job's cycle
(worker.py: decide, write status once, act).

One Controller serves a Scope (scope.py): one job (per-job mode), or every flatjob job of its
namespace (namespace mode), with one informer per kind for all of them (label selector
`flatjob.dev/job-name`) and a work queue keyed by job, as client-go controllers are built.
It never polls: it wakes on watch events, and on timers the jobs ask for (a back-off or a
deadline expiring), the Lease to renew, a watch to retry, the write budget to refill.

A job's cycle that fails backs that job off alone; the others go on.  In namespace mode the
cycles run on a few threads that take turns holding one lock, let go of only while a request
waits (turns.py): a job whose requests hang holds one thread, never the others' status.  The status, with the
ledger, is written before any action, with optimistic concurrency; actions are idempotent
and re-derived every cycle, so a crash at any point is recovered by the next cycle of the
next process.  Writes share one token bucket; a job whose cycle ran out of tokens goes back
to the end of the queue, so a job restarting a thousand pods never keeps the others' status
waiting for long.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flatjob.compiler import keys
from flatjob.compiler.version import __version__

from . import trim
from .api import (
    DEPLOYMENTS,
    LEASES,
    POD_TEMPLATES,
    PODGROUPS,
    PODS,
    SECRETS,
    AlreadyExists,
    ApiError,
    Cluster,
    Conflict,
    NotFound,
    Obj,
    record_resource,
)
from .backoff import retry_delay, seeded
from .decisions import Cycle
from .decisions.restart import SETTLE
from .events import EventRecorder, Write
from .informer import Informer
from .job import admitted_pods
from .lease import (
    RENEW_DEADLINE,
    RENEW_EVERY,
    Observed,
    decide_lease,
    held_message,
    leading,
    lease_body,
    observe,
    released_body,
)
from .lookups import LabelWatch, Lookup, NamedWatches, SecretProbe
from .metrics import Metrics
from .nameset import PodNames
from .ratelimit import TokenBucket
from .scope import NAMESPACE_RUNTIME, JobKey, Scope, job_key
from .sshkeys import ssh_secret
from .turns import CONCURRENCY, CyclePool, TurnLock, Unlocked
from .worker import JobWorker, VersionMismatch, owner_reference, uid_of

log = logging.getLogger("flatjob.runtime")

LEASE_RETRY = 2.0  # seconds between Lease attempts while renewing fails (client-go's retryPeriod)
DRAIN_BUDGET = 5.0  # wall seconds one step runs cycles; the rest stay queued for the next turn (watch events, health)
STOP_WAIT = 5.0  # wall seconds a shutdown waits for the cycles in flight before it hands the Lease over
DEPLOYMENT_RECHECK = 300.0  # the namespace runtime's Deployment was not found (run-local, a hand-made one): looked for again after this
# Namespace mode: the Lease is renewed on a cycle thread under this key (no job's: kinds are never empty).
LEASE_KEY = ("", "lease")
# Namespace mode: PodGroups and TensorBoard Deployments are watched once, by these labels.
PODGROUP_LABELS = {"app.kubernetes.io/component": "podgroup", "app.kubernetes.io/managed-by": "flatjob"}
TENSORBOARD_LABELS = {keys.ROLE: "tensorboard"}

__all__ = ["CONCURRENCY", "Controller", "VersionMismatch", "owner_reference"]


def _landed(lease: Obj, identity: str, tried: str) -> bool:
    """Whether a Lease is the write this process sent without an answer (a time-out after the API
    server applied it): it names this runtime with the very renewTime it sent, to the
    microsecond (client-go renews on the name alone, which a forged holderIdentity passes:
    lease.decide_lease).  Asked only within the renew deadline of the last renewal known to
    have landed: no one may take the Lease over before then, so a replay of that renewTime by
    someone who read it cannot make two runtimes lead (review of the lost-answer change)."""
    spec = lease.get("spec") or {}
    return isinstance(spec, dict) and spec.get("holderIdentity") == identity and spec.get("renewTime") == tried


@dataclass
class Controller:
    """Reconciles the job records of its scope (one job, or a whole namespace) and their pods."""

    cluster: Cluster
    namespace: str
    kind: str | None = None  # with `name`: one job (per-job mode); both None: the namespace
    name: str | None = None
    identity: str = "runtime"
    clock: Callable[[], float] = time.time
    # Leadership's clock: monotonic in the pod (cli), so a wall-clock step back (NTP, a VM
    # resumed) never stretches a leader's term past RENEW_DEADLINE, as client-go's monotonic
    # time.Now() does not; None: `clock` (tests run both on one virtual clock).
    mono: Callable[[], float] | None = None
    version: str = __version__
    metrics: Metrics = field(default_factory=Metrics)
    secret_factory: Callable[[str, str, Obj], Obj] = ssh_secret
    use_lease: bool = True
    backoff_scale: float = 1.0  # restart back-offs times this (run-local's --backoff-scale)
    settle: float = SETTLE  # a failure that would end a job waits this long for a disruption (run-local: 0)
    concurrency: int = 1  # jobs' cycles at once (namespace mode; 1: on the loop's own thread, in queue order)
    turn_wait: float = 0.0  # wall seconds a step waits for the cycles it started (tests: all of them, for a virtual clock)
    notify: Any = None  # a threading.Event set when a cycle ends on its thread (the loop's wake-up)
    wake_at: float | None = None
    _renewed_at: float | None = None  # last successful Lease renewal (None: not the leader)
    _lease_version: str | None = None  # the Lease's resourceVersion this process's last write returned
    _lease_tried: str | None = None  # the renewTime of a Lease write whose answer never came (it may have landed)
    _lease_wake: float | None = None
    _lease_failures: int = 0  # Lease requests failed in a row (their back-off)
    _observed: Observed | None = None
    _throttled_until: float | None = None  # the write bucket was empty: act again then
    _deciding: float = 0.0  # seconds the last cycle took to decide (token: wake that much before a burst is due)
    _stop_by: float | None = None  # shutting down: the cycles in flight are waited for until then (wall clock)
    _deployment: Obj | None = None  # the namespace runtime's own Deployment, as an ownerReference (its Lease goes with it)
    _deployment_next: float = 0.0  # when to look for it again
    _waiting_since: float | None = None  # when others' holding of the Lease began to keep this runtime waiting (lease clock)
    _held_said_at: float | None = None  # when it last said so (held_message)
    _held_events: dict[str, tuple[Obj, EventRecorder]] = field(default_factory=dict)  # LeaseHeld, by involved object: the Lease, its own Pod

    def __post_init__(self) -> None:
        self.scope = Scope(self.namespace, self.kind, self.name)
        self._lease_clock = self.mono or self.clock
        self.lock = TurnLock()
        self.pool: CyclePool | None = None
        if self.concurrency > 1 and not self.scope.per_job:  # one job needs no threads
            self.cluster = Unlocked(self.cluster, self.lock)  # type: ignore[assignment]
            self.pool = CyclePool(self.concurrency, self.lock, self._cycle_done, self._cycle_failed)
        self.bucket = TokenBucket(self.clock)
        self.rng = seeded(self.identity)
        self.workers: dict[JobKey, JobWorker] = {}
        self.made_secrets: dict[tuple[str, str], str] = {}  # (Secret name, record uid) -> uid of the one this process created (sshkeys)
        self._pod_names: dict[JobKey, tuple[Any, PodNames]] = {}  # (uid, generation) -> the PodTemplates a record names
        self.queue: dict[JobKey, None] = {}  # jobs to look at, in arrival order
        fields = self.scope.record_fields()
        self.records = {k: self._informer(f"records/{k}", record_resource(keys.RECORD_PLURALS[k]), fields=fields, trim_fn=self._trim_record, lift=trim.RECORD_LIFT,
                                          key_of=lambda o, k=k: (k, o["metadata"]["name"])) for k in self.scope.kinds}
        labels = self.scope.job_labels()
        self.pods = self._informer("pods", PODS, labels=labels, trim_fn=trim.pod, key_of=job_key)
        self.templates = self._informer("podtemplates", POD_TEMPLATES, labels=labels, trim_fn=trim.template, key_of=job_key)
        for informer in (self.pods, self.templates):  # another team's job-mode jobs: not cached (their record says)
            informer.skip = self._not_served
        self.secrets: Lookup
        self.podgroups: Lookup
        self.tensorboards: Lookup
        if self.scope.per_job:
            self.secrets = NamedWatches(lambda n: self._named(SECRETS, n, trim.named))
            self.podgroups = NamedWatches(lambda n: self._named(PODGROUPS, n, trim.podgroup))
            self.tensorboards = NamedWatches(lambda n: self._named(DEPLOYMENTS, n, trim.deployment))
        else:
            self.secrets = SecretProbe(self.cluster, self.namespace, SECRETS, trim.named, self.clock)
            self.podgroups = self._label_watch("podgroups", PODGROUPS, PODGROUP_LABELS, trim.podgroup)
            self.tensorboards = self._label_watch("tensorboards", DEPLOYMENTS, TENSORBOARD_LABELS, trim.deployment)

    def _not_served(self, key: JobKey) -> bool:
        """Whether the job's record is here and another runtime's (another mode)."""
        record = self.record_of(key)
        return record is not None and not self.scope.serves(record)

    def _trim_record(self, obj: Obj) -> Obj:
        """A record as cached: whole if this runtime serves it, else its name and mode only."""
        return trim.record(obj) if self.scope.serves(obj) else trim.unserved_record(obj)

    def _informer(self, what: str, res: Any, *, labels: dict[str, str | None] | None = None, fields: dict[str, str] | None = None,
                  trim_fn: Callable[[Obj], Obj], key_of: Callable[[Obj], Any] | None = None, lift: tuple[str, ...] = ()) -> Informer:
        informer = Informer(
            lambda: self.cluster.list(res, self.namespace, labels=labels, fields=fields, trim=informer.gate(trim_fn), lift=lift),  # type: ignore[arg-type]
            lambda rv: self.cluster.watch(res, self.namespace, rv, labels=labels, fields=fields, trim=informer.gate(trim_fn), lift=lift),  # type: ignore[arg-type]
            clock=self.clock,
            name=what,
            key_of=key_of,
            seed=self.identity,
        )
        return informer

    def _label_watch(self, what: str, res: Any, labels: dict[str, str | None], trim_fn: Callable[[Obj], Obj]) -> LabelWatch:
        """A namespace-wide watch by label that caches only the names served jobs want."""
        informer = self._informer(what, res, labels=labels, trim_fn=trim_fn, key_of=_name)
        return LabelWatch(informer, lambda name: self.cluster.list(res, self.namespace, labels=labels, fields={"metadata.name": name}, trim=informer.gate(trim_fn)))  # type: ignore[no-any-return]

    def _named(self, res: Any, name: str, trim_fn: Callable[[Obj], Obj]) -> Informer:
        """An informer on one object, by name (per-job mode)."""
        return self._informer(f"{res.plural}/{name}", res, fields={"metadata.name": name}, trim_fn=trim_fn, key_of=lambda o, n=name: n)

    # --- what it watches ---------------------------------------------------------------------
    def informers(self) -> list[Informer]:
        return [*self.records.values(), self.templates, self.pods, *self.secrets.informers(), *self.podgroups.informers(), *self.tensorboards.informers()]

    def synced(self) -> bool:
        """The records and pods have been listed (/readyz)."""
        return all(i.synced for i in self.records.values()) and self.pods.synced

    def _cached(self, key: JobKey) -> bool:
        """Whether the caches hold all a cycle of this job reads (client-go's WaitForCacheSync):
        on a pods cache not yet listed, or missing this job's, every running pod would look
        vanished and be replaced (review 24, round 7)."""
        return all(i.synced for i in self.records.values()) and self.pods.ready_for(key) and self.templates.ready_for(key)

    def close(self) -> None:
        """Stop the cycles (waiting up to STOP_WAIT for those in flight), every watch (their
        reader threads end) and the cycle threads."""
        with self.lock:
            idle = self._stop_cycles()
            for informer in self.informers():
                informer.close()
        if self.pool is not None:
            self.pool.close(join=1.0 if idle else 0.0)

    def _stop_cycles(self) -> bool:
        """Start no more cycles, and wait for those in flight, STOP_WAIT in all however often it
        is asked (release_lease, then close); True when none is left."""
        if self.pool is None:
            return True
        self.queue.clear()
        if self._stop_by is None:
            self._stop_by = time.monotonic() + STOP_WAIT
        return self.pool.wait(max(0.0, self._stop_by - time.monotonic()))

    def record_of(self, key: JobKey) -> Obj | None:
        informer = self.records.get(key[0])
        return informer.get(key[1]) if informer is not None else None

    def want_lookups(self) -> None:
        """Look up the Secrets, PodGroups and Deployments the served jobs name, no others."""
        wanted = [w.wants() for w in self.workers.values()]
        for lookup, names in ((self.secrets, {s for s, _, _ in wanted}), (self.podgroups, {g for _, g, _ in wanted}), (self.tensorboards, {t for _, _, t in wanted})):
            lookup.want({n for n in names if n})

    def _forget_secrets(self, uid: str | None) -> None:
        """The Secrets this process made for a record that is gone: no cycle of it asks again, and
        a namespace runtime serving sweeps of SSH jobs kept one entry per job it ever served
        (review hx24).  Kept while the record is only served by another runtime (it may come back)."""
        for made in [m for m in self.made_secrets if m[1] == uid]:
            del self.made_secrets[made]

    def secret_created(self, name: str) -> None:
        if isinstance(self.secrets, SecretProbe):
            self.secrets.forget(name)

    # --- the loop ------------------------------------------------------------------------------
    def start(self) -> None:
        """List and watch the records, PodTemplates and pods (retried later if the server is away)."""
        with self.lock:
            for informer in self.records.values():
                informer.start()
            self.templates.readmit(frozenset())  # none until a record names them
            self._readmit({(k, n) for k, i in self.records.items() for n in i.cache})
            self.templates.start()
            self.pods.start()

    def observe(self, timeout: float = 0.0) -> bool:
        """Take in watch events (waiting up to `timeout` on the pods) and queue the jobs they
        concern; True when anything changed."""
        with self.lock:
            return self._observe(timeout)

    def _observe(self, timeout: float) -> bool:
        changed = False
        for informer in self.informers():
            changed |= informer.poll(timeout if informer is self.pods else 0.0)
        touched: set[Any] = set()
        for informer in self.records.values():
            touched |= informer.drain()
        self._readmit(touched)
        pods = self.pods.drain()
        touched |= pods | self.templates.drain()
        # A job's pods changed: a namesake of another kind whose pod names they may hold looks
        # again at once (namesakes.py), not SECRET_TTL later.
        touched |= {(kind, name) for _, name in pods for kind in keys.RECORD_PLURALS if (kind, name) in self.workers}
        names = self.secrets.touched() | self.podgroups.touched() | self.tensorboards.touched()
        if names:  # a Secret, PodGroup or Deployment: the jobs that name it
            touched |= {k for k, w in self.workers.items() if names & set(w.wants())}
        for key in sorted(touched):
            self._enqueue(key)
        return changed

    def _readmit(self, changed: set[JobKey]) -> None:
        """Cache only the PodTemplates the served records name (anyone may add templates with a
        job's labels), and only the pods and templates of served jobs; `changed` are the records
        that may name others now, or have moved between modes."""
        served: list[JobKey] = []
        renamed = False  # whether the names any served record renders changed (a status echo changes none)
        for key in changed:
            record = self.record_of(key)
            if record is None or not self.scope.serves(record):
                renamed |= self._pod_names.pop(key, None) is not None
                for informer in (self.pods, self.templates):
                    if record is not None:  # another mode's now: what is cached of its pods and templates goes
                        informer.drop(key)
                    else:  # gone: its pods, if any come, are cached whole until a record says whose they are
                        informer.skipped.discard(key)
                continue
            served.append(key)
            meta = record.get("metadata") or {}
            mark = (meta.get("uid"), meta.get("generation") or meta.get("resourceVersion"))
            if self._pod_names.get(key, (None,))[0] != mark:
                names = admitted_pods(record)
                renamed |= self._pod_names.get(key, (None, None))[1] != names
                self._pod_names[key] = (mark, names)
        if not changed:
            return
        # O(pods in the namespace): only when a record renders other names, not on the echo of
        # every status write (review 24, round 7).
        union = PodNames.union(n for _, n in self._pod_names.values()) if renamed or self.templates.admitted is None else self.templates.admitted
        missing = self.templates.readmit(union)
        for key, (_, names) in sorted(self._pod_names.items()) if missing else ():
            if names & missing:  # turned away before its record named them: read that job's again
                self.templates.refill(key, lambda key=key: self._list_of(key, POD_TEMPLATES, self.templates, trim.template), names & missing)
        for key in sorted(served):  # moved here from another mode: its pods and templates are read again, by its label
            self.pods.take_back(key, lambda key=key: self._list_of(key, PODS, self.pods, trim.pod))
            self.templates.take_back(key, lambda key=key: self._list_of(key, POD_TEMPLATES, self.templates, trim.template))

    def _list_of(self, key: JobKey, res: Any, informer: Informer, trim_fn: Callable[[Obj], Obj]) -> tuple[list[Obj], str]:
        """One job's objects of a kind, by its labels, gated and trimmed as its informer does."""
        labels = {keys.JOB_KIND: key[0], keys.JOB_NAME: key[1]}
        return self.cluster.list(res, self.namespace, labels=labels, trim=informer.gate(trim_fn))  # type: ignore[no-any-return]

    def _enqueue(self, key: JobKey) -> None:
        if self.scope.per_job and key != (self.kind, self.name):
            return
        worker = self.workers.get(key)
        if worker is None:
            record = self.record_of(key)
            if record is None or not self.scope.serves(record):
                return
            worker = self.workers[key] = JobWorker(self, key)
        worker.dirty = True
        self.queue[key] = None

    def step(self, timeout: float = 0.0) -> bool:
        """Take in watch events, then run (or start, on the cycle threads) the cycles of the
        jobs that changed or are due."""
        with self.lock:
            ran = self._step(timeout)
            if ran and self.pool is not None and self.turn_wait > 0:
                self._whole_turn(self.pool)
            return ran

    def _whole_turn(self, pool: CyclePool) -> None:
        """With `turn_wait`: start the rest of the queue as threads come free and wait for every
        cycle, so one step runs each queued job once, as the loop's own thread does."""
        end = time.monotonic() + self.turn_wait
        while time.monotonic() < end:
            if self.queue and self._throttled_until is None:
                self._dispatch(self.clock(), pool)
            if not pool.busy or not pool.wait(end - time.monotonic(), since=pool.ended):
                break
        self._set_wake()

    def _step(self, timeout: float) -> bool:
        self._observe(timeout)
        now = self.clock()
        ran = False
        busy = self.pool.busy if self.pool is not None else set()
        for key, worker in list(self.workers.items()):
            record = self.record_of(key)
            if record is None or not self.scope.serves(record):
                del self.workers[key]  # gone, or served by another runtime: so is what we kept of it (and its wake times)
                self.queue.pop(key, None)
                if record is None:
                    self._forget_secrets(worker.uid)
                continue
            if worker.uid != uid_of(record):  # replaced under the same name (kubectl replace --force): a new job
                self._forget_secrets(worker.uid)
                worker = self.workers[key] = JobWorker(self, key)
                self.queue[key] = None
            if key not in busy and worker.due(now):  # one in flight says when it is due once it is done
                self.queue.setdefault(key, None)
        holding = self._hold_lease()  # renewed on its schedule, work or not (client-go's renew loop)
        throttled = self._throttled_until is not None and self.clock() < self._throttled_until  # after the Lease: a cycle may have run out meanwhile
        if self.queue and not throttled and holding:
            self._throttled_until = None
            ran = self._drain_queue(now) if self.pool is None else self._dispatch(now, self.pool)
        self._set_wake()
        return ran

    def _dispatch(self, now: float, pool: CyclePool) -> bool:
        """Start the queued jobs' cycles on the free threads, in queue order (a job goes to the
        back when it is queued again, so none waits for ever); jobs seen slow hold at most all
        threads but one, so one is always left for jobs that answer quickly."""
        started = False
        for key in list(self.queue):
            if pool.free() == 0:
                break
            if not self._startable(key, pool):
                continue  # stays queued: in flight, its objects not read yet, or no thread for a slow job yet
            worker = self.workers.get(key)
            del self.queue[key]
            if worker is None or not worker.due(now):
                continue
            pool.submit(key, worker.reconcile, worker.slow)
            started = True
        return started

    def _startable(self, key: JobKey, pool: CyclePool) -> bool:
        """A thread would take this queued job now."""
        if key in pool.busy or pool.free() == 0 or not self._cached(key):
            return False
        worker = self.workers.get(key)
        return worker is None or not worker.slow or len(pool.slow) < pool.size - 1

    def _cycle_failed(self, exc: BaseException) -> None:
        """Something a cycle did not contain (a bug in its own error path): logged, counted,
        and the thread serves on."""
        log.error("cycle failed", exc_info=exc)
        self.metrics.inc("flatjob_loop_errors_total", op="cycle", status="exception")

    def _cycle_done(self) -> None:
        """A cycle ended on its thread: the loop looks at what it left (its wake time, the queue)."""
        if self.notify is not None:
            self.notify.set()

    def _drain_queue(self, now: float) -> bool:
        """Run the queued jobs' cycles in order until the queue or the write budget is empty,
        renewing the Lease on its schedule between them (a long drain must not let it lapse)."""
        ran = False
        slow_ran = False
        started = time.monotonic()
        # Jobs whose last cycle was slow (a webhook on their record, throttled requests) go last,
        # one a turn: the others' status never waits behind more than one slow cycle.
        for key in sorted(self.queue, key=lambda k: bool((w := self.workers.get(k)) and w.slow)):
            worker = self.workers.get(key)
            if not self._hold_lease() or time.monotonic() - started > DRAIN_BUDGET:
                break  # the Lease is lost, or the turn is spent: the rest stay queued
            if not self._cached(key):
                continue  # stays queued until its objects are read (the informers' retry wakes the loop)
            if worker is not None and worker.slow:
                if slow_ran:
                    continue  # stays queued for the next turn
                slow_ran = True
            del self.queue[key]
            if worker is None or not worker.due(now):
                continue
            worker.reconcile()
            ran = True
            if self._throttled_until is not None:
                self.queue[key] = None  # out of tokens: to the back of the queue
                break
        return ran

    def reconcile(self) -> Cycle | None:
        """Run the cycle of this runtime's one job now (per-job mode; tests)."""
        if not self.scope.per_job:
            raise TypeError("a namespace runtime reconciles job by job: use step()")
        with self.lock:
            return self._reconcile_one()

    def _reconcile_one(self) -> Cycle | None:
        key = (str(self.kind), str(self.name))
        self._enqueue(key)
        worker = self.workers.get(key)
        if worker is None or not self._hold_lease():
            return None
        self.queue.pop(key, None)
        cycle = worker.reconcile()
        self._set_wake()
        return cycle

    @property
    def last_cycle(self) -> Cycle | None:
        """The last cycle of this runtime's one job (per-job mode; tests)."""
        worker = self.workers.get((str(self.kind), str(self.name)))
        return worker.last_cycle if worker is not None else None

    def token(self) -> bool:
        """A write token, or (the bucket is empty) a note to act again once a burst is due:
        early by what the last cycle took to decide (at most a burst's refill), so that the
        burst is there when the next cycle's writes begin. Woken when the bucket is full, a
        cycle's deciding ran while the full bucket dropped its tokens: a 1000-pod restart under
        load wrote 55 a second where the budget is 80, with no gain in manners (the bucket caps
        every second at rate + burst whenever it is asked)."""
        if self.bucket.take():
            return True
        lead = min(self._deciding, self.bucket.burst / self.bucket.rate)
        self._throttled_until = self.bucket.ready_at(self.bucket.burst) - lead  # a whole burst per turn, not one write
        return False

    def decided(self, seconds: float) -> None:
        """A cycle took this long (the controller's clock) from its start to its first write."""
        self._deciding = max(seconds, 0.0)

    def _set_wake(self) -> None:
        """The next time the loop must run although no watch event arrives: without the Lease
        only its own timer, as the jobs' timers wait for it (their past ones would spin the loop)."""
        now = self.clock()
        times: list[float | None] = []
        pool = self.pool
        busy = pool.busy if pool is not None else set()
        if self.leading():  # jobs left queued (out of write tokens, a turn's DRAIN_BUDGET spent): when tokens are back, or now
            waiting = any(self._startable(k, pool) for k in self.queue) if pool is not None else any(map(self._cached, self.queue))  # else a cycle's end, or a list, wakes the loop
            times.append((self._throttled_until or now) if waiting else None)
            unstuck = pool.unstuck_at() if pool is not None and self.queue and not waiting else None
            if unstuck is not None:  # a cycle about to count as stuck frees a place for a queued job
                times.append(now + max(unstuck - time.monotonic(), 0.0))
            # One in flight wakes the loop when done; a queued one is `waiting` above (its own past timer would spin the loop).
            times += [w.wake_at(now) for k, w in self.workers.items() if k not in busy and k not in self.queue]
        if self.use_lease and self._lease_wake is not None and LEASE_KEY not in busy:  # one in flight wakes the loop when done
            times.append(self._lease_wake - self._lease_clock() + now)  # on the loop's clock
        times += [i.due_at(now) for i in self.informers()]
        times = [t for t in times if t is not None]
        self.wake_at = min(times) if times else None

    def healthy(self, deadline: float) -> bool:
        """False when a watch has heard nothing from the server for longer than `deadline`."""
        return all(i.silent_for() <= deadline for i in self.informers())

    # --- leader election ---------------------------------------------------------------------
    def leading(self) -> bool:
        """Whether this runtime may act now (always without a Lease)."""
        return not self.use_lease or leading(self._renewed_at, self._lease_clock())

    def _lease_owner(self) -> Obj | None:
        """Who owns a new or ownerless Lease, so it goes with what made it: a per-job runtime's
        is its record's, the namespace runtime's its Deployment's (`flatjob`)."""
        if self.scope.per_job:
            record = self.record_of((str(self.kind), str(self.name)))
            return owner_reference(record) if record is not None else None
        return self._own_deployment()

    def _own_deployment(self) -> Obj | None:
        """The namespace runtime's Deployment as an ownerReference, read by name once (none in
        run-local, or under another name: the Lease then stays ownerless, looked for again later)."""
        now = self.clock()
        if self._deployment is not None or now < self._deployment_next:
            return self._deployment
        self._deployment_next = now + DEPLOYMENT_RECHECK
        try:
            found = self.cluster.get(DEPLOYMENTS, self.namespace, NAMESPACE_RUNTIME)
        except ApiError:
            return None
        meta = found.get("metadata") or {}
        if (meta.get("labels") or {}).get(keys.ROLE) == "runtime" and isinstance(meta.get("uid"), str):
            # Not a controller, no blockOwnerDeletion (that needs the Deployment's finalizers): GC deletes it after.
            self._deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAMESPACE_RUNTIME, "uid": meta["uid"]}
        return self._deployment

    def _hold_lease(self) -> bool:
        """Acquire or renew the Lease when due; True while this runtime may act.  With cycle
        threads, on one of them, as client-go's renew loop runs in a goroutine of its own: on the
        loop's thread, a Lease request that hangs (a half-open connection waits out the read
        time-out; a slow etcd) took in no watch event and started no cycle meanwhile, so every
        job's status waited for it (review hx24); the leader acts on within the renew deadline."""
        pool = self.pool
        if pool is None or not self.use_lease or (LEASE_KEY not in pool.busy and len(pool.busy) >= pool.cap):
            return self._renew_lease()  # one job, or as many cycles in flight as threads may be (the cap): never queued behind them
        if LEASE_KEY not in pool.busy and self._stop_by is None and self._lease_due():
            pool.submit(LEASE_KEY, self._renew_lease)  # its end wakes the loop (_cycle_done)
            if self.turn_wait > 0:  # tests on a virtual clock: its answer within the step, as every cycle's
                pool.wait(self.turn_wait)
        return self.leading()

    def _lease_due(self) -> bool:
        """Whether _renew_lease would send a request now."""
        now = self._lease_clock()
        if self._renewed_at is not None and now - self._renewed_at < RENEW_EVERY:
            return False
        return self._lease_wake is None or now >= self._lease_wake

    def _renew_lease(self) -> bool:
        """_hold_lease's work, on the caller's thread."""
        if not self.use_lease:
            return True
        now = self._lease_clock()
        if self._renewed_at is not None and now - self._renewed_at < RENEW_EVERY:
            return True
        if self._lease_wake is not None and now < self._lease_wake:  # another holds it, or a try just failed: not before then
            return self._renewed_at is not None and leading(self._renewed_at, now)
        name = self.scope.lease
        try:
            current = self.cluster.get(LEASES, self.namespace, name)
        except NotFound:
            current = None
        except ApiError as exc:
            return self._lease_failed(exc, now)
        # Seen now, after the GET returned (client-go's setObservedRecord): a slow GET must not
        # make another holder's renewal look older than it is.
        now = self._lease_clock()
        self._observed = observe(current, self._observed, now)
        mine = current is not None and self._lease_version is not None and (current.get("metadata") or {}).get("resourceVersion") == self._lease_version
        landed = self._lease_tried is not None and leading(self._renewed_at, now)  # past the deadline another may hold it, and anyone could have read that renewTime
        if current is not None and not mine and landed and _landed(current, self.identity, self._lease_tried or ""):
            mine, self._lease_version = True, (current.get("metadata") or {}).get("resourceVersion")  # our write, its answer lost
        self._lease_tried = None
        decision = decide_lease(current, self.identity, self._observed, now, holding=mine)
        if decision.action == "wait":
            self._renewed_at = None
            self._lease_wake = decision.until
            self._waiting_since = now if self._waiting_since is None else self._waiting_since
            self.metrics.set("flatjob_lease_waiting_seconds", now - self._waiting_since)
            if current is not None:
                self._say_lease_held(current, now)
            return False
        self._waiting_since = None
        self.metrics.set("flatjob_lease_waiting_seconds", 0)
        owned = current is not None and (current.get("metadata") or {}).get("ownerReferences")
        body = lease_body(name, self.namespace, self.identity, self.clock(), current, None if owned else self._lease_owner())  # renewTime: wall time
        try:
            written = self.cluster.create(LEASES, self.namespace, body) if current is None else self.cluster.replace(LEASES, self.namespace, body)
        except (Conflict, AlreadyExists):
            self._renewed_at = None  # another runtime won the race; look again soon
            self._lease_wake = now + LEASE_RETRY
            return False
        except ApiError as exc:
            self._lease_tried = body["spec"]["renewTime"]  # a time-out or a 5xx: the write may have landed all the same
            return self._lease_failed(exc, now)
        self._lease_version = (written.get("metadata") or {}).get("resourceVersion") if isinstance(written, dict) else None
        if self._renewed_at is None:
            log.info("acquired the lease", extra={"lease": name, "identity": self.identity})
        self._renewed_at = now
        self._lease_wake = now + RENEW_EVERY
        self._lease_failures = 0
        return True

    def _say_lease_held(self, lease: Obj, now: float) -> None:
        """Others have held the Lease longer than a hand-over takes: say who, where a user looks
        (the log; a Warning Event on the Lease and on this runtime's Pod, never on a record: a
        runtime that does not lead writes none), at most once per HELD_SAID_EVERY."""
        message = held_message(lease, self.identity, self._waiting_since or now, self._held_said_at, now)
        if message is None:
            return
        self._held_said_at = now
        spec = lease.get("spec") or {}
        log.warning("waiting for the Lease others hold", extra={"lease": self.scope.lease, "holder": str(spec.get("holderIdentity"))[:128],
                                                                  "acquire_time": str(spec.get("acquireTime"))[:64], "waiting_s": round(now - (self._waiting_since or now))})
        involved = [lease, *([pod] if (pod := self._own_pod()) is not None else [])]
        for obj in involved:
            kind = str(obj.get("kind") or "")
            kept = self._held_events.get(kind)
            if kept is None or (kept[0].get("metadata") or {}).get("uid") != (obj.get("metadata") or {}).get("uid"):
                kept = self._held_events[kind] = (obj, EventRecorder(self.namespace))
            recorder = kept[1]
            recorder.record("Warning", "LeaseHeld", message, self.clock())
            for write in recorder.due(obj, self.clock()):
                self._write_held_event(recorder, write)

    def _write_held_event(self, recorder: EventRecorder, write: Write) -> None:
        """One LeaseHeld Event write (not counted against the write budget: once per HELD_SAID_EVERY)."""
        try:
            recorder.send(self.cluster, write, self.clock())
        except ApiError as exc:  # gone (its TTL), rewritten, refused: created anew next time
            self.metrics.inc("flatjob_api_errors_total", op="event", status=str(exc.status))
            recorder.lost(write)

    def _own_pod(self) -> Obj | None:
        """This runtime's Pod (its identity is POD_NAME), for an Event `kubectl describe` shows
        (it matches the uid): listed by name, as the Role allows; None where there is none."""
        try:
            found, _ = self.cluster.list(PODS, self.namespace, fields={"metadata.name": self.identity}, trim=trim.named)
        except ApiError:
            return None
        pod = next(iter(found), None)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pod["metadata"]} if pod is not None else None

    def _lease_failed(self, exc: ApiError, now: float) -> bool:
        """The Lease could not be read or written: act on only within the renew deadline."""
        self.metrics.inc("flatjob_api_errors_total", op="lease", status=str(exc.status))
        self._lease_failures += 1  # each try waits longer, never less than the server's Retry-After (once per drain, not per job)
        self._lease_wake = now + max(LEASE_RETRY, retry_delay(self._lease_failures, RENEW_DEADLINE / 3, self.rng, exc))
        still = leading(self._renewed_at, now)
        if not still and self._renewed_at is not None:
            log.warning("lost the lease: not renewed within the deadline", extra={"lease": self.scope.lease, "error": str(exc)[:300]})
            self._renewed_at = None
        return still

    def release_lease(self) -> None:
        """On graceful shutdown: hand the Lease over at once, once no cycle is in flight (a cycle
        still waiting on a request after STOP_WAIT keeps the Lease: it lapses, and the next
        runtime waits for that, as client-go's ReleaseOnCancel asks)."""
        with self.lock:
            idle = self._stop_cycles()
            if self.use_lease and self._renewed_at is not None:
                if idle:
                    self._release_lease()
                else:
                    log.warning("cycles still in flight at shutdown: the Lease is left to lapse", extra={"lease": self.scope.lease})

    def _release_lease(self) -> None:
        try:
            current = self.cluster.get(LEASES, self.namespace, self.scope.lease)
            if (current.get("spec") or {}).get("holderIdentity") == self.identity:
                self.cluster.replace(LEASES, self.namespace, released_body(current, self.clock()))
        except ApiError:
            pass
        self._renewed_at = None


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name"))
