"""The reconcile loop: observe (informers) -> decide (pure) -> write status once -> act.

One Controller per job.  It never polls: it wakes on watch events, and on timers the
decisions ask for (a back-off or a deadline expiring, the Lease to renew).  The status,
with the ledger, is written before any action, with optimistic concurrency; actions are
idempotent and re-derived every cycle, so a crash at any point is recovered by the next
cycle of the next process.
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
from flatjob.compiler.render.record import PLURALS
from flatjob.compiler.version import __version__

from .api import AlreadyExists, ApiError, Cluster, Conflict, Invalid, NotFound, Obj
from .decisions import Action, Cycle, World, reconcile
from .informer import Informer
from .job import RecordError, job_view, record_plan, render_pod_named
from .lease import RENEW_EVERY, decide_lease, lease_body
from .metrics import Metrics
from .model import GATE, JobView, Ledger
from .observe import pod_state
from .sshkeys import ssh_secret

log = logging.getLogger("flatjob.runtime")


class VersionMismatch(RuntimeError):
    """The record was compiled by another flatjob version; acting on it could diverge from git."""


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
    wake_at: float | None = None
    last_cycle: Cycle | None = None
    refused: str | None = None  # why the controller refuses to act (version mismatch...)
    leader: bool = False
    cycles: int = 0
    _view_key: Any = None
    _view: JobView | None = None
    _plan: Any = None
    _secret_seen: bool = False
    _podgroup_seen: bool = False
    _dirty: bool = True
    _lease_until: float | None = None

    def __post_init__(self) -> None:
        plural = PLURALS[self.kind]
        self.plural = plural
        self.pods = Informer(
            lambda: self.cluster.list_pods(self.namespace, {keys.JOB_NAME: self.name}),
            lambda rv: self.cluster.watch_pods(self.namespace, {keys.JOB_NAME: self.name}, rv),
        )
        self.records = Informer(
            lambda: self.cluster.list_records(self.namespace, plural, self.name),
            lambda rv: self.cluster.watch_records(self.namespace, plural, self.name, rv),
        )

    # --- the loop -------------------------------------------------------------------------
    def start(self) -> None:
        """List and watch the job's pods and record."""
        self.records.start()
        self.pods.start()

    def step(self, timeout: float = 0.0) -> bool:
        """Take in watch events (waiting up to `timeout`), then reconcile if needed."""
        changed = self.records.poll(0.0)
        changed |= self.pods.poll(timeout)
        now = self.clock()
        due = self.wake_at is not None and now >= self.wake_at
        if not (changed or due or self._dirty):
            return False
        self._dirty = False
        self.reconcile()
        return True

    def reconcile(self) -> Cycle | None:
        """One cycle: decide, write status (once), then act."""
        started = time.perf_counter()
        try:
            return self._reconcile()
        finally:
            self.metrics.observe(time.perf_counter() - started)

    def _reconcile(self) -> Cycle | None:
        record = self.records.get(self.name)
        if record is None:
            self.wake_at = None
            return None
        if not self._hold_lease():
            return None
        try:
            job = self._job_view(record)
        except (VersionMismatch, RecordError) as exc:
            self._refuse(record, str(exc))
            return None
        self.refused = None
        status = record.get("status") or {}
        ledger = Ledger.from_dict(status.get("runtime"))
        pods = {n: pod_state(o, (job.pod(n).container if job.pod(n) else None)) for n, o in self.pods.cache.items()}
        world = self._world(job)
        cycle = reconcile(job, pods, ledger, world, status, self.clock())
        self.cycles += 1
        if cycle.status != status and not self._write_status(record, cycle.status):
            self._dirty = True
            return None
        self.last_cycle = cycle
        for action in cycle.actions:
            self._act(action, record)
        if cycle.actions:
            self._dirty = True  # our own changes are in the cache already; look at them once more
        for etype, reason, message in cycle.events:
            self._event(record, etype, reason, message)
        self.wake_at = self._next_wake(cycle.wake_at)
        return cycle

    def _next_wake(self, wake: float | None) -> float | None:
        lease = self._lease_until if self.use_lease else None
        times = [t for t in (wake, lease) if t is not None]
        return min(times) if times else None

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
        key = (meta.get("generation"), json.dumps(record.get("spec"), sort_keys=True), json.dumps(annotations, sort_keys=True))
        if key != self._view_key:
            self._view = job_view(record)
            self._plan = record_plan(record)
            self._view_key = key
        assert self._view is not None
        return self._view

    def _world(self, job: JobView) -> World:
        ours = job.ssh_secret is not None and job.ssh_secret == f"{job.name}-ssh"
        if job.ssh_secret and not self._secret_seen:
            self._secret_seen = self._exists(self.cluster.get_secret, job.ssh_secret)
        if job.podgroup and not self._podgroup_seen:
            self._podgroup_seen = self._exists(self.cluster.get_podgroup, job.name)
        return World(
            secret_exists=self._secret_seen or not job.ssh_secret,
            secret_is_ours=ours,
            podgroup_exists=self._podgroup_seen or not job.podgroup,
        )

    def _exists(self, get: Callable[[str, str], Obj], name: str) -> bool:
        try:
            get(self.namespace, name)
            return True
        except NotFound:
            return False
        except ApiError as exc:
            self._api_error("get", exc)
            return False

    # --- writing ----------------------------------------------------------------------------
    def _write_status(self, record: Obj, status: dict[str, Any]) -> bool:
        body = {"apiVersion": record["apiVersion"], "kind": record["kind"], "metadata": copy.deepcopy(record["metadata"]), "status": status}
        try:
            updated = self.cluster.replace_record_status(self.namespace, self.plural, body)
        except Conflict:
            self.metrics.inc("flatjob_api_errors_total", op="status", status="409")
            return False  # someone else wrote; the watch brings the new version, then we decide again
        except ApiError as exc:
            self._api_error("status", exc)
            return False
        self.metrics.inc("flatjob_status_writes_total")
        self.records.cache[self.name] = updated
        return True

    def _act(self, action: Action, record: Obj) -> None:
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
        except ApiError as exc:
            self._dirty = True
            self._api_error(action.kind, exc)

    def _release(self, action: Action, record: Obj) -> None:
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
        if not (pod["metadata"].get("annotations")):
            ops.append({"op": "add", "path": "/metadata/annotations", "value": dict(action.annotations)})
        else:
            ops += [{"op": "add", "path": f"/metadata/annotations/{k.replace('~', '~0').replace('/', '~1')}", "value": v} for k, v in sorted(action.annotations.items())]
        self.pods.cache[action.name] = self.cluster.patch_pod(self.namespace, action.name, ops)
        self.metrics.inc("flatjob_releases_total")

    def _create(self, action: Action, record: Obj) -> None:
        body = render_pod_named(self._plan, action.name)
        if body is None:
            return
        ledger = Ledger.from_dict((record.get("status") or {}).get("runtime"))
        carry = ledger.carry.get(action.name) or {}
        meta = body["metadata"]
        meta["labels"] = {**(carry.get("labels") or {}), **meta.get("labels", {})}
        meta["annotations"] = {**(carry.get("annotations") or {}), **meta.get("annotations", {})}
        self.pods.cache[action.name] = self.cluster.create_pod(self.namespace, body)

    def _delete(self, action: Action, record: Obj) -> None:
        self.cluster.delete_pod(self.namespace, action.name, action.uid)

    def _create_secret(self, action: Action, record: Obj) -> None:
        self.cluster.create_secret(self.namespace, self.secret_factory(action.name, self.namespace, record))
        self._secret_seen = True
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
            self.cluster.create_event(self.namespace, body)
        except ApiError as exc:
            self._api_error("event", exc)

    def _refuse(self, record: Obj, why: str) -> None:
        if self.refused != why:
            log.error(why, extra={"job": self.name})
            self._event(record, "Warning", "VersionMismatch" if "compiled by" in why else "InvalidRecord", why)
        self.refused = why

    def _api_error(self, op: str, exc: ApiError) -> None:
        self.metrics.inc("flatjob_api_errors_total", op=op, status=str(exc.status))
        log.warning("api error", extra={"op": op, "status": exc.status, "error": str(exc)})

    # --- leader election ---------------------------------------------------------------------
    def _hold_lease(self) -> bool:
        """Acquire or renew the Lease; False (and a wake-up at its expiry) when another holds it."""
        if not self.use_lease:
            self.leader = True
            return True
        now = self.clock()
        if self.leader and self._lease_until is not None and now < self._lease_until:
            return True
        name = f"{self.name}-runtime"
        try:
            current = self.cluster.get_lease(self.namespace, name)
        except NotFound:
            current = None
        except ApiError as exc:
            self._api_error("lease", exc)
            return self.leader
        decision = decide_lease(current, self.identity, now)
        if decision.action == "wait":
            self.leader = False
            self.wake_at = decision.until
            return False
        body = lease_body(name, self.namespace, self.identity, now, current)
        try:
            if current is None:
                self.cluster.create_lease(self.namespace, body)
            else:
                self.cluster.replace_lease(self.namespace, body)
        except (Conflict, AlreadyExists):
            self.leader = False
            self._dirty = True
            return False
        except ApiError as exc:
            self._api_error("lease", exc)
            return self.leader
        self.leader = True
        self._lease_until = now + RENEW_EVERY
        return True

    def release_lease(self) -> None:
        """On graceful shutdown: hand the Lease over at once."""
        if not (self.use_lease and self.leader):
            return
        name = f"{self.name}-runtime"
        try:
            current = self.cluster.get_lease(self.namespace, name)
            if (current.get("spec") or {}).get("holderIdentity") == self.identity:
                body = lease_body(name, self.namespace, self.identity, self.clock(), current)
                body["spec"]["holderIdentity"] = ""
                self.cluster.replace_lease(self.namespace, body)
        except ApiError:
            pass
        self.leader = False


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
