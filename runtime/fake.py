"""An in-process fake of the API server calls the runtime makes (see runtime.api.Cluster).

What it emulates, faithfully enough for the runtime's logic to be tested against it:
- resourceVersion on every write; 409 Conflict on a stale status update or on a delete
  whose UID precondition does not match; AlreadyExists on create; NotFound;
- watch streams from a resourceVersion, and 410 Expired once that version is compacted away;
- the status subresource (status writes never change spec or generation; spec writes bump
  generation) and the scale subresource of the elastic records (spec.elastic.expectedReplicas);
- graceful pod deletion (a running pod gets a deletionTimestamp, the kubelet stand-in stops it);
- pod immutability: scheduling gates can only be removed, never added to an existing pod,
  and the rest of the pod spec cannot change (422 Invalid);
- JSON patches with `test` preconditions, as the runtime sends them (a failed patch, a failed
  `test` included, is 422 Invalid, as kube-apiserver answers it).

What it does not emulate: authentication and RBAC, admission webhooks, field managers and
server-side apply, defaulting of pod fields, scheduling, resource quotas, owner-reference
garbage collection, and any kind the runtime does not touch.  Mutating calls are counted
(`calls`), and `crash_after` makes the N-th next mutating call raise Crash, to kill a
runtime at an arbitrary point in chaos tests.
"""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from .api import AlreadyExists, Conflict, Expired, Invalid, NotFound, Obj

Key = tuple[str, str, str]  # (resource, namespace, name)


class Crash(BaseException):
    """Raised by the fake to kill the process under test at a chosen API call."""


def _matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


class FakeWatch:
    """A watch over the fake's event log; never blocks (simulations drive time themselves)."""

    def __init__(self, cluster: FakeCluster, accept: Callable[[str, Obj], bool], since: int):
        self.cluster = cluster
        self.accept = accept
        self.cursor = since
        self.closed = False

    def next_events(self, timeout: float | None = None) -> list[tuple[str, Obj]]:
        if self.cursor < self.cluster.compacted:
            raise Expired(f"too old resource version: {self.cursor} ({self.cluster.compacted})")
        out = []
        for rv, resource, etype, obj in self.cluster.log:
            if rv > self.cursor and self.accept(resource, obj):
                out.append((etype, copy.deepcopy(obj)))
        self.cursor = self.cluster.rv
        return out

    def close(self) -> None:
        self.closed = True


class FakeCluster:
    """In-memory API objects with resourceVersions, watches and the subresources above."""

    def __init__(self, clock: Callable[[], float] = lambda: 0.0, history: int = 10_000):
        self.objects: dict[Key, Obj] = {}
        self.rv = 0
        self.log: list[tuple[int, str, str, Obj]] = []
        self.compacted = 0  # watches from before this resourceVersion get 410
        self.history = history
        self.clock = clock
        self.calls: Counter[str] = Counter()
        self.crash_after: int | None = None
        self._uids = itertools.count(1)

    # --- bookkeeping -----------------------------------------------------------------
    def _mutating(self, call: str) -> None:
        self.calls[call] += 1
        if self.crash_after is not None:
            if self.crash_after <= 0:
                self.crash_after = None
                raise Crash(call)
            self.crash_after -= 1

    def _bump(self, resource: str, etype: str, obj: Obj) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.log.append((self.rv, resource, etype, copy.deepcopy(obj)))
        if len(self.log) > self.history:
            drop = len(self.log) - self.history
            self.compacted = self.log[drop - 1][0]
            del self.log[:drop]

    def compact(self) -> None:
        """Forget the whole event history: every open watch gets 410 next time."""
        self.compacted = self.rv
        self.log.clear()

    def _create(self, resource: str, namespace: str, body: Obj) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        key = (resource, namespace, meta["name"])
        if key in self.objects:
            raise AlreadyExists(f"{resource} {meta['name']!r} already exists")
        meta["namespace"] = namespace
        meta["uid"] = f"uid-{next(self._uids):06d}"
        meta["creationTimestamp"] = self.clock()
        meta.setdefault("generation", 1)
        self.objects[key] = obj
        self._bump(resource, "ADDED", obj)
        return copy.deepcopy(obj)

    def _get(self, resource: str, namespace: str, name: str) -> Obj:
        try:
            return self.objects[(resource, namespace, name)]
        except KeyError:
            raise NotFound(f"{resource} {name!r} not found") from None

    def _list(self, resource: str, namespace: str, accept: Callable[[Obj], bool]) -> tuple[list[Obj], str]:
        items = [copy.deepcopy(o) for (r, ns, _), o in sorted(self.objects.items()) if r == resource and ns == namespace and accept(o)]
        return items, str(self.rv)

    def _remove(self, resource: str, namespace: str, name: str) -> None:
        obj = self.objects.pop((resource, namespace, name))
        self._bump(resource, "DELETED", obj)

    # --- pods ------------------------------------------------------------------------
    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> tuple[list[Obj], str]:
        self.calls["list_pods"] += 1
        return self._list("pods", namespace, lambda o: _matches(o["metadata"].get("labels") or {}, selector))

    def watch_pods(self, namespace: str, selector: Mapping[str, str], resource_version: str) -> FakeWatch:
        self.calls["watch_pods"] += 1
        accept = lambda r, o: r == "pods" and o["metadata"].get("namespace") == namespace and _matches(o["metadata"].get("labels") or {}, selector)  # noqa: E731
        return FakeWatch(self, accept, int(resource_version))

    def create_pod(self, namespace: str, body: Obj) -> Obj:
        self._mutating("create_pod")
        obj = copy.deepcopy(body)
        obj["status"] = {"phase": "Pending"}
        return self._create("pods", namespace, obj)

    def patch_pod(self, namespace: str, name: str, patch: Any) -> Obj:
        """Apply a JSON patch (list of ops, `test` checked first) to a pod."""
        self._mutating("patch_pod")
        current = self._get("pods", namespace, name)
        updated = copy.deepcopy(current)
        for op in patch:
            self._apply_op(updated, op)
        old_gates = [g["name"] for g in current["spec"].get("schedulingGates") or []]
        new_gates = [g["name"] for g in updated["spec"].get("schedulingGates") or []]
        if any(g not in old_gates for g in new_gates):
            raise Invalid("spec.schedulingGates: Forbidden: only deletion is allowed, but found new scheduling gate")
        strip = lambda s: {k: v for k, v in s.items() if k != "schedulingGates"}  # noqa: E731
        if strip(updated["spec"]) != strip(current["spec"]):
            raise Invalid("spec: Forbidden: pod updates may not change fields other than scheduling gates")
        if updated["metadata"].get("uid") != current["metadata"]["uid"]:
            raise Conflict("Precondition failed: UID")
        self.objects[("pods", namespace, name)] = updated
        self._bump("pods", "MODIFIED", updated)
        return copy.deepcopy(updated)

    @staticmethod
    def _locate(obj: Obj, op: Mapping[str, Any]) -> tuple[Any, Any]:
        """The container holding the op's target and the key or index in it (RFC 6902)."""
        parts = [_unescape(p) for p in op["path"].lstrip("/").split("/")]
        parent: Any = obj
        try:  # every part of the path but the last must exist
            for p in parts[:-1]:
                parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        except (KeyError, IndexError, ValueError, TypeError):
            raise Invalid(f"{op['op']} {op['path']}: missing path") from None
        last = parts[-1]
        if isinstance(parent, dict):
            return parent, last
        if not isinstance(parent, list):
            raise Invalid(f"{op['op']} {op['path']}: not an object or array")
        adding = op["op"] == "add"
        if last == "-" and adding:
            return parent, len(parent)  # "-" appends
        if last.isdigit() and int(last) < len(parent) + adding:
            return parent, int(last)
        raise Invalid(f"{op['op']} {op['path']}: bad array index")

    @classmethod
    def _apply_op(cls, obj: Obj, op: Mapping[str, Any]) -> None:
        parent, index = cls._locate(obj, op)
        present = index in parent if isinstance(parent, dict) else index < len(parent)
        kind = op["op"]
        if kind not in ("test", "remove", "add", "replace"):
            raise Invalid(f"unsupported op {kind}")
        if kind in ("test", "remove", "replace") and not present:
            raise Invalid(f"{kind} {op['path']}: missing")
        if kind == "test" and parent[index] != op["value"]:
            # The API server answers any failed JSON patch, a failed `test` included, with 422.
            raise Invalid(f"test failed at {op['path']}: {parent[index]!r} != {op['value']!r}")
        if kind == "remove":
            del parent[index]
        elif kind == "add" and isinstance(parent, list):
            parent.insert(index, op["value"])
        elif kind in ("add", "replace"):
            parent[index] = op["value"]

    def delete_pod(self, namespace: str, name: str, uid: str | None) -> None:
        """Delete with a UID precondition; running pods terminate gracefully first."""
        self._mutating("delete_pod")
        obj = self._get("pods", namespace, name)
        if uid is not None and obj["metadata"]["uid"] != uid:
            raise Conflict(f"Precondition failed: UID in precondition: {uid}, UID in object meta: {obj['metadata']['uid']}")
        if obj["metadata"].get("deletionTimestamp") is not None:
            return
        if obj.get("status", {}).get("phase") == "Running":
            obj["metadata"]["deletionTimestamp"] = self.clock()
            self._bump("pods", "MODIFIED", obj)
        else:
            self._remove("pods", namespace, name)

    # --- records (flatjob.dev job records) ---------------------------------------------
    def list_records(self, namespace: str, plural: str, name: str) -> tuple[list[Obj], str]:
        self.calls["list_records"] += 1
        return self._list(f"records/{plural}", namespace, lambda o: o["metadata"]["name"] == name)

    def watch_records(self, namespace: str, plural: str, name: str, resource_version: str) -> FakeWatch:
        self.calls["watch_records"] += 1
        res = f"records/{plural}"
        accept = lambda r, o: r == res and o["metadata"].get("namespace") == namespace and o["metadata"]["name"] == name  # noqa: E731
        return FakeWatch(self, accept, int(resource_version))

    def replace_record_status(self, namespace: str, plural: str, body: Obj) -> Obj:
        """The status subresource: optimistic concurrency on resourceVersion; spec untouched."""
        self._mutating("replace_record_status")
        name = body["metadata"]["name"]
        current = self._get(f"records/{plural}", namespace, name)
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified; please apply your changes to the latest version and try again")
        current["status"] = copy.deepcopy(body.get("status"))
        self._bump(f"records/{plural}", "MODIFIED", current)
        return copy.deepcopy(current)

    def apply_record(self, namespace: str, plural: str, body: Obj) -> Obj:
        """Create or update a record's metadata and spec (a GitOps apply); status is kept."""
        res = f"records/{plural}"
        key = (res, namespace, body["metadata"]["name"])
        if key not in self.objects:
            obj = copy.deepcopy(body)
            obj.pop("status", None)
            return self._create(res, namespace, obj)
        current = self.objects[key]
        changed = current.get("spec") != body.get("spec")
        meta = body.get("metadata") or {}
        if not changed and all(current["metadata"].get(k) == meta.get(k) for k in ("labels", "annotations")):
            return copy.deepcopy(current)
        current["spec"] = copy.deepcopy(body.get("spec"))
        for k in ("labels", "annotations"):
            if k in meta:
                current["metadata"][k] = copy.deepcopy(meta[k])
        if changed:
            current["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        self._bump(res, "MODIFIED", current)
        return copy.deepcopy(current)

    def scale_record(self, namespace: str, plural: str, name: str, replicas: int) -> Obj:
        """The scale subresource: sets spec.elastic.expectedReplicas."""
        res = f"records/{plural}"
        current = self._get(res, namespace, name)
        elastic = (current.get("spec") or {}).get("elastic")
        if not elastic:
            raise NotFound("the record has no scale subresource value (not elastic)")
        if elastic.get("expectedReplicas") == replicas:
            return copy.deepcopy(current)  # a no-op update changes neither generation nor resourceVersion
        elastic["expectedReplicas"] = replicas
        current["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        self._bump(res, "MODIFIED", current)
        return copy.deepcopy(current)

    def delete_record(self, namespace: str, plural: str, name: str) -> None:
        self._remove(f"records/{plural}", namespace, name)

    # --- everything else ---------------------------------------------------------------
    def get_secret(self, namespace: str, name: str) -> Obj:
        self.calls["get_secret"] += 1
        return copy.deepcopy(self._get("secrets", namespace, name))

    def create_secret(self, namespace: str, body: Obj) -> Obj:
        self._mutating("create_secret")
        return self._create("secrets", namespace, body)

    def get_podgroup(self, namespace: str, name: str) -> Obj:
        self.calls["get_podgroup"] += 1
        return copy.deepcopy(self._get("podgroups", namespace, name))

    def create_event(self, namespace: str, body: Obj) -> None:
        self._mutating("create_event")
        body = copy.deepcopy(body)
        body.setdefault("metadata", {}).setdefault("name", f"event-{self.rv + 1}")
        self._create("events", namespace, body)

    def get_lease(self, namespace: str, name: str) -> Obj:
        self.calls["get_lease"] += 1
        return copy.deepcopy(self._get("leases", namespace, name))

    def create_lease(self, namespace: str, body: Obj) -> Obj:
        self._mutating("create_lease")
        return self._create("leases", namespace, body)

    def replace_lease(self, namespace: str, body: Obj) -> Obj:
        self._mutating("replace_lease")
        current = self._get("leases", namespace, body["metadata"]["name"])
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict("lease changed")
        current["spec"] = copy.deepcopy(body["spec"])
        self._bump("leases", "MODIFIED", current)
        return copy.deepcopy(current)

    # --- helpers for tests and GitOps simulations -----------------------------------------
    def apply(self, obj: Obj) -> None:
        """Create any object the way a GitOps tool would (pods and records get their rules)."""
        ns = obj["metadata"].get("namespace", "default")
        kind = obj["kind"]
        if obj.get("apiVersion", "").startswith("flatjob.dev/"):
            self.apply_record(ns, kind.lower() + "s", obj)
        elif kind == "Pod":
            self.create_pod(ns, obj)
        else:
            resource = {"Secret": "secrets", "PodGroup": "podgroups"}.get(kind, kind.lower() + "s")
            key = (resource, ns, obj["metadata"]["name"])
            if key not in self.objects:
                self._create(resource, ns, obj)

    def pods(self, namespace: str = "default") -> dict[str, Obj]:
        return {name: o for (r, ns, name), o in self.objects.items() if r == "pods" and ns == namespace}

    def record(self, namespace: str, plural: str, name: str) -> Obj:
        return copy.deepcopy(self._get(f"records/{plural}", namespace, name))

    def set_pod_status(self, namespace: str, name: str, status: Obj, remove: bool = False) -> None:
        """The kubelet's side: write a pod's status, or remove a terminated, deleting pod."""
        key = ("pods", namespace, name)
        if remove:
            self._remove("pods", namespace, name)
            return
        self.objects[key]["status"] = status
        self._bump("pods", "MODIFIED", self.objects[key])
