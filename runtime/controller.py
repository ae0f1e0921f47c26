"""The reconcile loop: observe (informers) -> decide (pure) -> write status once -> act.

One Controller per job.  It never polls: it wakes on watch events, and on timers the
decisions ask for (a back-off or a deadline expiring, the Lease to renew, a watch to retry).
The status, with the ledger, is written before any action, with optimistic concurrency;
actions are idempotent and re-derived every cycle, so a crash at any point is recovered by
the next cycle of the next process.

Nothing one call or one cycle raises ends the loop: API errors, unreachable servers and
input the runtime did not expect are logged, counted in /metrics and retried after a capped
back-off.  A record it cannot act on gets an Event and a Stalled condition saying why.
"""

from __future__ import annotations

import copy
import json
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
    EVENTS,
    LEASES,
    POD_TEMPLATES,
    PODGROUPS,
    PODS,
    SECRETS,
    AlreadyExists,
    ApiError,
    Cluster,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Obj,
    record_resource,
)
from .decisions import Action, Cycle, World, reconcile, scale_backoff
from .decisions.refuse import refused_status
from .informer import Informer
from .job import RecordError, admitted_pods, job_view
from .lease import RENEW_EVERY, Observed, decide_lease, leading, lease_body, observe, released_body
from .metrics import Metrics
from .model import GATE, JobView, Ledger
from .observe import pod_state
from .sshkeys import foreign_secret, ssh_secret

log = logging.getLogger("flatjob.runtime")

ERROR_BACKOFF_CAP = 30.0  # seconds: the longest wait before retrying a failed cycle or action
LEASE_RETRY = 2.0  # seconds between Lease attempts while renewing fails (client-go's retryPeriod)


class VersionMismatch(RuntimeError):
    """The record was compiled by another flatjob version; acting on it could diverge from git."""


def owner_reference(record: Obj) -> Obj:
    """An ownerReference to the job record (garbage collection deletes the dependent with it)."""
    meta = record.get("metadata") or {}
    return {"apiVersion": record.get("apiVersion"), "kind": record.get("kind"), "name": meta.get("name"), "uid": meta.get("uid")}


@dataclass
class Controller:
    """Reconciles one job record and its pods."""

    cluster: Cluster
    namespace: str
    kind: str
    name: str
    identity: str = "runtime"
    clock: Callable[[], float] = time.time
    version: str = __version__
    metrics: Metrics = field(default_factory=Metrics)
    secret_factory: Callable[[str, str, Obj], Obj] = ssh_secret
    use_lease: bool = True
    backoff_scale: float = 1.0  # restart back-offs times this (run-local's --backoff-scale)
    wake_at: float | None = None
    last_cycle: Cycle | None = None
    refused: str | None = None  # why the controller refuses to act (version mismatch...)
    cycles: int = 0
    _view_key: Any = None
    _view: JobView | None = None
    _refused: tuple[str, str] | None = None  # a create the API server refused, for the next cycle
    _dirty: bool = True
    _cycle_wake: float | None = None
    _renewed_at: float | None = None  # last successful Lease renewal (None: not the leader)
    _lease_wake: float | None = None
    _observed: Observed | None = None
    _failures: int = 0  # consecutive failed cycles or actions
    _retry_at: float | None = None
    _reported: str | None = None  # the last unexpected error reported as an Event
    _writes: int = 0  # status writes in the current cycle (one by design)

    def __post_init__(self) -> None:
        self.plural = keys.RECORD_PLURALS[self.kind]
        self.record_res = record_resource(self.plural)
        self.records = self._informer("record", self.record_res, fields={"metadata.name": self.name}, trim_fn=trim.record)
        self.pods = self._informer("pods", PODS, labels={keys.JOB_NAME: self.name}, trim_fn=trim.pod)
        self.templates = self._informer("podtemplates", POD_TEMPLATES, labels={keys.JOB_NAME: self.name}, trim_fn=trim.template)
        self.secrets: Informer | None = None  # watched once the record names the Secret
        self.podgroups: Informer | None = None
        self.tensorboards: Informer | None = None  # the TensorBoard Deployment (status.tensorboard)

    def _informer(self, what: str, res: Any, *, labels: dict[str, str] | None = None, fields: dict[str, str] | None = None, trim_fn: Callable[[Obj], Obj]) -> Informer:
        informer = Informer(
            lambda: self.cluster.list(res, self.namespace, labels=labels, fields=fields, trim=informer.gate(trim_fn)),
            lambda rv: self.cluster.watch(res, self.namespace, rv, labels=labels, fields=fields, trim=informer.gate(trim_fn)),
            clock=self.clock,
            name=what,
        )
        return informer

    def informers(self) -> list[Informer]:
        return [i for i in (self.records, self.templates, self.pods, self.secrets, self.podgroups, self.tensorboards) if i is not None]

    def close(self) -> None:
        """Stop every watch (their reader threads end)."""
        for informer in self.informers():
            informer.close()

    # --- the loop -------------------------------------------------------------------------
    def start(self) -> None:
        """List and watch the job's record, PodTemplates and pods (retried later if the server is away)."""
        self.records.start()
        self.templates.readmit(admitted_pods(self.records.get(self.name)))  # only the job's own PodTemplates are read
        self.templates.start()
        self.pods.start()

    def observe(self, timeout: float = 0.0) -> bool:
        """Take in watch events (waiting up to `timeout` on the pods); True when anything changed."""
        changed = False
        for informer in self.informers():
            changed |= informer.poll(timeout if informer is self.pods else 0.0)
        self._dirty |= changed
        return changed

    def step(self, timeout: float = 0.0) -> bool:
        """Take in watch events, then reconcile if anything changed or a timer is due."""
        self.observe(timeout)
        now = self.clock()
        due = self.wake_at is not None and now >= self.wake_at
        ran = False
        if (self._retry_at is None or now >= self._retry_at) and (due or self._dirty or self._retry_at is not None):
            self._dirty = False
            self._retry_at = None
            self.reconcile()
            ran = True
        self._set_wake()  # a watch may have broken meanwhile: its retry time counts too
        return ran

    def reconcile(self) -> Cycle | None:
        """One cycle: decide, write status (once), then act; nothing it raises escapes."""
        started = time.perf_counter()
        self._writes = 0
        try:
            cycle = self._reconcile()
            if self._retry_at is None:
                self._failures = 0
            return cycle
        except Exception as exc:  # a bug or input nobody expected: report, back off, retry
            self._fail("cycle", exc)
            self._report(exc)
            return None
        finally:
            self.metrics.observe(time.perf_counter() - started)
            self.metrics.maximum("flatjob_cycle_status_writes_max", self._writes)
            self._set_wake()

    def _reconcile(self) -> Cycle | None:
        record = self.records.get(self.name)
        if record is None:
            self._cycle_wake = None
            return None
        if not self._hold_lease(record):
            return None
        try:
            job = self._job_view(record)
            status = record.get("status") if isinstance(record.get("status"), dict) else {}
            try:
                ledger = Ledger.from_dict(status.get("runtime"))
            except (TypeError, ValueError, AttributeError) as exc:
                raise RecordError(f"status.runtime of {self.name} is unreadable ({exc}); restore it or delete the record's status") from None
        except (VersionMismatch, RecordError) as exc:
            self._refuse(record, exc)
            return None
        self.refused = None
        self._reported = None
        owner = (record.get("metadata") or {}).get("uid")
        pods = {n: pod_state(o, (job.pod(n).container if job.pod(n) else None), owner) for n, o in self.pods.cache.items()}
        world, self._refused = self._world(job), None
        if world.secret_is_ours and self.secrets is not None and (foreign := foreign_secret(job.ssh_secret or "", self.secrets.get(job.ssh_secret), record)):
            self._refuse(record, foreign)  # someone else's <job>-ssh: every pod would trust their key
            return None
        now = self.clock()
        cycle = scale_backoff(reconcile(job, pods, ledger, world, status, now), ledger, now, self.backoff_scale)
        self.cycles += 1
        if cycle.status != status and not self._write_status(record, cycle.status):
            return None
        self.last_cycle = cycle
        for action in cycle.actions:
            if not self.leading():
                self._dirty = True
                return cycle  # the Lease is no longer ours: the next holder takes it from the ledger
            self._act(action, record)
        if cycle.actions:
            self._dirty = True  # our own changes are in the cache already; look at them once more
        for etype, reason, message in cycle.events:
            self._event(record, etype, reason, message)
        self._cycle_wake = cycle.wake_at
        return cycle

    def _set_wake(self) -> None:
        """The next time the loop must run although no watch event arrives."""
        times = [self._cycle_wake, self._retry_at]
        if self.use_lease:
            times.append(self._lease_wake)
        times += [i.retry_at for i in self.informers()]
        times = [t for t in times if t is not None]
        self.wake_at = min(times) if times else None

    def _fail(self, what: str, exc: Exception) -> None:
        """Count a failure and retry after a capped, doubling back-off."""
        self._failures += 1
        self._dirty = True
        self._retry_at = self.clock() + min(2.0 ** (self._failures - 1), ERROR_BACKOFF_CAP)
        status = str(exc.status) if isinstance(exc, ApiError) else type(exc).__name__
        self.metrics.inc("flatjob_api_errors_total" if isinstance(exc, ApiError) else "flatjob_loop_errors_total", op=what, status=status)
        log.warning(f"{what} failed", extra={"job": self.name, "error": f"{type(exc).__name__}: {exc}"[:500], "retry_in": self._retry_at - self.clock()})

    def _report(self, exc: Exception) -> None:
        """An Event and a Stalled condition for an unexpected failure (once per distinct error)."""
        text = f"{type(exc).__name__}: {exc}"[:500]
        if text == self._reported:
            return
        self._reported = text
        log.exception("reconcile failed", extra={"job": self.name})
        record = self.records.get(self.name)
        if record is None:
            return
        why = f"the runtime could not reconcile this job ({text}); it retries with back-off"
        self._event(record, "Warning", "ReconcileError", why)
        self._write_status(record, refused_status(record.get("status"), "ReconcileError", why, _generation(record), self.clock()))

    # --- reading ----------------------------------------------------------------------------
    def _job_view(self, record: Obj) -> JobView:
        meta = record.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        rendered_by = annotations.get(keys.VERSION)
        if rendered_by != self.version:
            raise VersionMismatch(
                f"record {self.name} was compiled by flatjob {rendered_by}, but this runtime is flatjob {self.version}; "
                "recompile with the same version (the runtime image tag must equal the compiler version)"
            )
        self.templates.readmit(admitted_pods(record))  # lists again when the record names other pods
        templates = tuple(sorted((n, (t.get("metadata") or {}).get("resourceVersion")) for n, t in self.templates.cache.items()))
        key = (meta.get("generation"), json.dumps(record.get("spec"), sort_keys=True, default=str), json.dumps(annotations, sort_keys=True), templates)
        if key != self._view_key:
            try:
                self._view = job_view(record, self.templates.cache)
            except RecordError:
                raise
            except Exception as exc:  # a spec that passed the schema but not the planner
                raise RecordError(f"record {self.name} cannot be planned: {type(exc).__name__}: {exc}") from None
            self._view_key = key
        assert self._view is not None
        return self._view

    def _world(self, job: JobView) -> World:
        """Which of the objects a release waits for exist (watched by name, never polled)."""
        self.secrets = self._named(self.secrets, SECRETS, job.ssh_secret)
        self.podgroups = self._named(self.podgroups, PODGROUPS, job.name if job.podgroup else None)
        self.tensorboards = self._named(self.tensorboards, DEPLOYMENTS, job.tensorboard, trim.deployment)
        return World(
            secret_exists=not job.ssh_secret or (self.secrets is not None and self.secrets.synced and job.ssh_secret in self.secrets.cache),
            secret_is_ours=job.ssh_secret is not None and job.ssh_secret == f"{job.name}-ssh",
            podgroup_exists=not job.podgroup or (self.podgroups is not None and job.name in self.podgroups.cache),
            refused=self._refused,
            tensorboard_ready=trim.ready(self.tensorboards.get(job.tensorboard)) if self.tensorboards is not None and self.tensorboards.synced else None,
        )

    def _named(self, current: Informer | None, res: Any, name: str | None, trim_fn: Callable[[Obj], Obj] = trim.named) -> Informer | None:
        """An informer on one named object, replaced when the name changes."""
        if name is None:
            if current is not None:
                current.close()
            return None
        if current is not None and current.name == f"{res.plural}/{name}":
            return current
        if current is not None:
            current.close()
        informer = self._informer(f"{res.plural}/{name}", res, fields={"metadata.name": name}, trim_fn=trim_fn)
        informer.start()
        return informer

    # --- writing ----------------------------------------------------------------------------
    def leading(self) -> bool:
        """Whether this runtime may act now (always without a Lease)."""
        return not self.use_lease or leading(self._renewed_at, self.clock())

    def _write_status(self, record: Obj, status: dict[str, Any]) -> bool:
        if not self.leading():
            return False
        body = {"apiVersion": record["apiVersion"], "kind": record["kind"], "metadata": copy.deepcopy(record["metadata"]), "status": status}
        try:
            updated = self.cluster.replace(self.record_res, self.namespace, body, sub="status")
        except Conflict:
            self.metrics.inc("flatjob_api_errors_total", op="status", status="409")
            self._dirty = True
            return False  # someone else wrote; the watch brings the new version, then we decide again
        except ApiError as exc:
            self._fail("status", exc)
            return False
        self.metrics.inc("flatjob_status_writes_total")
        self._writes += 1
        self.records.cache[self.name] = trim.record(updated)
        return True

    def _act(self, action: Action, record: Obj) -> None:
        if action.kind == "create" and self._refused is not None:
            return  # one refusal is enough: the gang is rolled back next cycle
        try:
            {
                "release": self._release,
                "create": self._create,
                "delete": self._delete,
                "create-secret": self._create_secret,
            }[action.kind](action, record)
        except (NotFound, AlreadyExists):
            pass  # someone (a GitOps tool, the kubelet) got there first: fine
        except (Conflict, Invalid) as exc:
            self._dirty = True  # our view was stale; the next cycle sees the new state
            log.info("stale action", extra={"action": action.kind, "pod": action.name, "error": str(exc)})
        except Exception as exc:  # an API error, an unreachable server, a bug: retried after back-off
            if isinstance(exc, Forbidden):
                self._report(exc)  # RBAC or a webhook will not change by retrying: say so on the record
            self._fail(action.kind, exc)

    def _release(self, action: Action, record: Obj) -> None:
        """Remove flatjob's scheduling gate from exactly this incarnation (a JSON patch with tests)."""
        pod = self.pods.get(action.name)
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
        self.pods.cache[action.name] = trim.pod(self.cluster.patch(PODS, self.namespace, action.name, ops))
        self.metrics.inc("flatjob_releases_total")

    def _create(self, action: Action, record: Obj) -> None:
        """The pod, from its PodTemplate verbatim, plus the runtime's annotations and owner."""
        template = self.templates.get(action.name)
        if template is None:
            return
        body = trim.pod_from_template(template, self.namespace, action.annotations, {**owner_reference(record), "controller": True})
        try:
            created = self.cluster.create(PODS, self.namespace, body)
        except (Forbidden, Invalid) as exc:  # quota, an admission webhook: the gang is rolled back next cycle
            self._refused = (action.name, _api_message(exc))
            self._dirty = True
            self.metrics.inc("flatjob_api_errors_total", op="create", status=str(exc.status))
            return
        self.pods.cache[action.name] = trim.pod(created)

    def _delete(self, action: Action, record: Obj) -> None:
        self.cluster.delete(PODS, self.namespace, action.name, action.uid)

    def _create_secret(self, action: Action, record: Obj) -> None:
        self.cluster.create(SECRETS, self.namespace, self.secret_factory(action.name, self.namespace, record))
        self._dirty = True
        self._event(record, "Normal", "SecretCreated", f"generated an ed25519 key pair in Secret {action.name}")

    def _event(self, record: Obj, etype: str, reason: str, message: str) -> None:
        if reason == "Restarting":
            self.metrics.inc("flatjob_restarts_total")
        meta = record.get("metadata") or {}
        now = self.clock()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{self.name}.", "namespace": self.namespace},
            "involvedObject": {"apiVersion": record.get("apiVersion"), "kind": record.get("kind"), "name": self.name, "namespace": self.namespace, "uid": meta.get("uid")},
            "reason": reason,
            "message": message[:1024],
            "type": etype,
            "source": {"component": "flatjob-runtime"},
            "firstTimestamp": _iso(now),
            "lastTimestamp": _iso(now),
            "count": 1,
        }
        log.info(message, extra={"reason": reason, "job": self.name, "type": etype})
        try:
            self.cluster.create(EVENTS, self.namespace, body)
        except ApiError as exc:
            self.metrics.inc("flatjob_api_errors_total", op="event", status=str(exc.status))

    def _refuse(self, record: Obj, exc: Exception) -> None:
        """A record this runtime will not act on: an Event and a Stalled condition, once."""
        why = str(exc)
        reason = "VersionMismatch" if isinstance(exc, VersionMismatch) else getattr(exc, "reason", "InvalidRecord")
        if self.refused != why:
            log.error(why, extra={"job": self.name})
            self._event(record, "Warning", reason, why)
        self.refused = why
        self._cycle_wake = None
        status = refused_status(record.get("status"), reason, why, _generation(record), self.clock())
        if status != record.get("status"):
            self._write_status(record, status)

    # --- leader election ---------------------------------------------------------------------
    def _hold_lease(self, record: Obj) -> bool:
        """Acquire or renew the Lease when due; True while this runtime may act."""
        if not self.use_lease:
            return True
        now = self.clock()
        if self._renewed_at is not None and now - self._renewed_at < RENEW_EVERY:
            return True
        if self._renewed_at is None and self._lease_wake is not None and now < self._lease_wake:
            return False  # another runtime holds it: look again when it may have expired
        name = f"{self.name}-runtime"
        try:
            current = self.cluster.get(LEASES, self.namespace, name)
        except NotFound:
            current = None
        except ApiError as exc:
            return self._lease_failed(exc, now)
        self._observed = observe(current, self._observed, now)
        decision = decide_lease(current, self.identity, self._observed, now)
        if decision.action == "wait":
            self._renewed_at = None
            self._lease_wake = decision.until
            return False
        body = lease_body(name, self.namespace, self.identity, now, current, owner_reference(record))
        try:
            if current is None:
                self.cluster.create(LEASES, self.namespace, body)
            else:
                self.cluster.replace(LEASES, self.namespace, body)
        except (Conflict, AlreadyExists):
            self._renewed_at = None  # another runtime won the race; look again soon
            self._lease_wake = now + LEASE_RETRY
            return False
        except ApiError as exc:
            return self._lease_failed(exc, now)
        if self._renewed_at is None:
            log.info("acquired the lease", extra={"job": self.name, "identity": self.identity})
        self._renewed_at = now
        self._lease_wake = now + RENEW_EVERY
        return True

    def _lease_failed(self, exc: ApiError, now: float) -> bool:
        """The Lease could not be read or written: act on only within the renew deadline."""
        self.metrics.inc("flatjob_api_errors_total", op="lease", status=str(exc.status))
        self._lease_wake = now + LEASE_RETRY
        still = leading(self._renewed_at, now)
        if not still and self._renewed_at is not None:
            log.warning("lost the lease: not renewed within the deadline", extra={"job": self.name, "error": str(exc)[:300]})
            self._renewed_at = None
        return still

    def release_lease(self) -> None:
        """On graceful shutdown: hand the Lease over at once."""
        if not (self.use_lease and self._renewed_at is not None):
            return
        try:
            current = self.cluster.get(LEASES, self.namespace, f"{self.name}-runtime")
            if (current.get("spec") or {}).get("holderIdentity") == self.identity:
                self.cluster.replace(LEASES, self.namespace, released_body(current, self.clock()))
        except ApiError:
            pass
        self._renewed_at = None

    def healthy(self, deadline: float) -> bool:
        """False when a watch has heard nothing from the server for longer than `deadline`."""
        return all(i.silent_for() <= deadline for i in self.informers())


def _api_message(exc: ApiError) -> str:
    """The API server's own words from an error ("403 Forbidden: <message>" -> "<message>")."""
    text = str(exc)
    head, sep, rest = text.partition(": ")
    return rest if sep and head.split(" ", 1)[0].isdigit() else text


def _generation(record: Obj) -> int | None:
    value = (record.get("metadata") or {}).get("generation")
    return value if isinstance(value, int) else None


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
