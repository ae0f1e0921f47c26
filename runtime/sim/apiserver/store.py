"""The fake's storage and generic registry: objects, resourceVersions, the event log, CRUD.

It follows k8s.io/apiserver/pkg/registry/generic/registry/store.go and the rest package:
- create: decode (strategy), defaults, mutating admission, system fields (uid, a UUID;
  creationTimestamp, RFC 3339), PrepareForCreate, validation (422), validating admission
  (quota, 403), then storage: AlreadyExists (409), a stored object over etcd's
  --max-request-bytes (1.5 MiB, measured here as compact JSON) refused with etcd's error (500);
  a resourceVersion in the body is refused like the etcd3 store refuses it;
- update: metadata.resourceVersion must match (409 Conflict, OptimisticLockErrorMsg), or be
  absent where the strategy allows an unconditional update (else 422); uid, creationTimestamp,
  deletionTimestamp and generation come from the stored object (rest/update.go BeforeUpdate);
  an update that changes nothing writes nothing (no new resourceVersion, no event);
- delete (rest/delete.go BeforeDelete, store.go Delete): preconditions (uid, resourceVersion:
  409), graceful deletion where the strategy asks for it (deletionTimestamp = now + grace,
  deletionGracePeriodSeconds, generation + 1; a second delete may only shorten it; grace 0
  removes), finalizers keep an object until they are gone, background garbage collection
  (gc.py) after removal;
- list: label and field selectors, limit/continue pages served from the snapshot of the first
  page (etcd3 store GetList: the continue token is base64 JSON {"v","rv","start"}; a token older
  than the compacted history is 410 Expired), remainingItemCount when nothing is filtered;
- every write appends to the event log the watches read (watch.py); the log keeps `history`
  entries, older resourceVersions are compacted away.
Stored objects are never modified in place: each write stores a new dict, so the event log and
list snapshots can share them.
"""

from __future__ import annotations

import base64
import bisect
import json
import random
import re
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

from ...api import Obj
from . import gc, managedfields, patches, selectors
from .clock import parse_time, stamp
from .copies import clone
from .defaults import SYSTEM_PRIORITY_CLASSES
from .kinds import Resource, by_key
from .status import (
    FieldError,
    already_exists,
    bad_request,
    conflict,
    error,
    etcd_too_large,
    expired,
    forbidden,
    invalid,
    invalid_field,
    not_acceptable_patch,
    not_found,
    required,
)
from .strategy import Context
from .watch import Watch

Key = tuple[str, str, str]
MAX_OBJECT_BYTES = 1_572_864  # etcd's default --max-request-bytes (1.5 MiB)
RETURNS_DELETED = frozenset({"pods", "podtemplates"})  # ReturnDeletedObject in their REST storage
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)
PATCH_TYPES = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"


class Change(NamedTuple):
    """One entry of the event log (a tuple whose first item is the resourceVersion)."""

    rv: int
    key: str  # the resource's store key
    namespace: str
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj  # the object after the change (DELETED: its last state at this resourceVersion)
    prev: Obj | None


def compact_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


class Store:
    """Objects by (resource key, namespace, name) and the log of their changes; thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.time, history: int = 10_000, seed: int = 0):
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[Key, Obj] = {}
        self.rv = 0
        self.log: list[Change] = []
        self.compacted = 0  # resourceVersions up to this one are gone from the log
        self.history = history
        self.clock = clock
        self.rng = random.Random(seed)
        self.priority_classes: dict[str, int] = dict(SYSTEM_PRIORITY_CLASSES)
        self.max_object_bytes = MAX_OBJECT_BYTES
        self.listeners: list[Callable[[Change], None]] = []
        self._snapshots: OrderedDict[tuple[str, str, int], dict[str, Obj]] = OrderedDict()
        self.watches: weakref.WeakSet[Watch] = weakref.WeakSet()
        self.keys_of: dict[str, set[Key]] = {}  # resource key -> the keys of its objects
        self._sorted: dict[str, list[Key]] = {}  # resource key -> its keys sorted, until one comes or goes
        self.dependents: dict[str, set[Key]] = {}  # owner uid -> the keys of objects naming it
        self.terminating: set[str] = set()  # namespaces being deleted: nothing new is created in them
        self.pod_mutators: list[Callable[[Obj], None]] = []  # mutating admission webhooks on pod creates (kueue.py)
        self.quota_due: dict[str, float] = {}  # namespace -> when the quota controller releases what its pods no longer use (quota.py)

    # --- bookkeeping ------------------------------------------------------------------------------
    def context(self) -> Context:
        now = self.clock()
        return Context(self, now, stamp(now), self.rng)

    def new_uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _append(self, key: Key, etype: str, obj: Obj, prev: Obj | None) -> Change:
        change = Change(self.rv, key[0], key[1], etype, obj, prev)
        self.log.append(change)
        if len(self.log) > self.history:
            drop = len(self.log) - self.history
            self.compacted = self.log[drop - 1].rv
            del self.log[:drop]
        for listener in list(self.listeners):
            listener(change)
        self.changed.notify_all()
        return change

    def _index(self, key: Key, old: Obj | None, new: Obj | None) -> None:
        """Keep the indexes by resource and by owner uid current."""
        if new is None:
            self.keys_of.get(key[0], set()).discard(key)
            self._sorted.pop(key[0], None)
        elif key not in self.keys_of.setdefault(key[0], set()):
            self.keys_of[key[0]].add(key)
            self._sorted.pop(key[0], None)
        before = {r.get("uid") for r in (old or {}).get("metadata", {}).get("ownerReferences") or []}
        after = {r.get("uid") for r in (new or {}).get("metadata", {}).get("ownerReferences") or []}
        for uid in before - after:
            self.dependents.get(uid, set()).discard(key)
        for uid in after - before:
            self.dependents.setdefault(uid, set()).add(key)

    def of(self, resource_key: str, namespace: str | None = None) -> list[tuple[Key, Obj]]:
        """The objects of one resource (in one namespace), sorted by key (under the lock: the
        HTTP server's threads write meanwhile)."""
        with self.lock:
            keys = self._sorted.get(resource_key)
            if keys is None:
                keys = self._sorted[resource_key] = sorted(self.keys_of.get(resource_key, ()))
            return [(k, self.objects[k]) for k in keys if namespace is None or k[1] == namespace]

    def compact(self) -> None:
        """Forget the whole event history: watches from before now get 410."""
        with self.lock:
            self.compacted = self.rv
            self.log.clear()
            self._snapshots.clear()
            self.changed.notify_all()

    def changes_since(self, rv: int) -> list[Change]:
        """Log entries after `rv` (the caller checks `compacted` first)."""
        start = bisect.bisect_right(self.log, rv, key=lambda c: c.rv)
        return self.log[start:]

    def _commit(self, res: Resource, key: Key, old: Obj | None, new: Obj, etype: str, ctx: Context) -> Obj:
        """Store a prepared object under a new resourceVersion, log it, run the follow-ups."""
        new["metadata"]["resourceVersion"] = str(self.rv + 1)
        if len(compact_json(new)) > self.max_object_bytes:
            raise etcd_too_large()
        self.rv += 1
        self.objects[key] = new
        self._index(key, old, new)
        self._append(key, etype, new, old)
        res.strategy.after_write(old, new, ctx)
        return new

    def _remove(self, res: Resource, key: Key, ctx: Context) -> Obj:
        old = self.objects.pop(key)
        self._index(key, old, None)
        self.rv += 1
        last = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self.rv)}}
        self._append(key, "DELETED", last, old)
        res.strategy.after_write(old, None, ctx)
        gc.collect(self, old)
        return last

    # --- reads ------------------------------------------------------------------------------------
    def _get(self, res: Resource, namespace: str, name: str) -> Obj:
        obj = self.objects.get((res.key, namespace, name))
        if obj is None:
            raise not_found(res.group, res.plural, name)
        return obj

    def get(self, res: Resource, namespace: str, name: str, subresource: str = "") -> Obj:
        with self.lock:
            obj = self._get(res, namespace, name)
            if subresource == "scale":
                return res.strategy.scale_of(obj)  # type: ignore[attr-defined]
            return self.out(res, obj)

    def out(self, res: Resource, obj: Obj) -> Obj:
        """The stored object as the resource's API version shows it."""
        return res.from_storage(obj) if res.from_storage else obj

    def _matcher(self, res: Resource, label_selector: str | None, field_selector: str | None) -> Callable[[Obj], bool]:
        labels = selectors.label_selector(label_selector)
        strategy = res.strategy
        unsupported = (lambda f: bad_request(f'"{f}" is not a known field selector: only "metadata.name", "metadata.namespace"')) if res.custom else (lambda f: bad_request(f"field label not supported: {f}"))
        fields = selectors.field_selector(field_selector, strategy.fields, strategy.field_labels, unsupported)
        return lambda obj: labels(obj["metadata"].get("labels") or {}) and fields(obj)

    def list(self, res: Resource, namespace: str | None, label_selector: str | None = None, field_selector: str | None = None,
             limit: int = 0, cont: str | None = None) -> Obj:
        """A List object (items without apiVersion/kind for built-in kinds, as typed lists have)."""
        with self.lock:
            match = self._matcher(res, label_selector, field_selector)
            if cont:
                rv, start = self._continue(cont)
                everything = self._snapshots.get((res.key, namespace, rv))
                if everything is None:
                    raise expired(EXPIRED_CONTINUE)
            else:
                rv, start = self.rv, ""
                everything = {(n if namespace is not None else f"{ns}/{n}"): o for (_, ns, n), o in self.of(res.key, namespace)}
            names = sorted(n for n in everything if n > start)
            items, rest = [], []
            for i, name in enumerate(names):
                if limit and len(items) >= limit:
                    rest = names[i:]
                    break
                obj = everything[name]
                if match(obj):
                    items.append(obj)
            meta: Obj = {"resourceVersion": str(rv)}
            if rest:
                self._snapshots[(res.key, namespace, rv)] = everything
                while len(self._snapshots) > 32:
                    self._snapshots.popitem(last=False)
                last = names[names.index(rest[0]) - 1] if names.index(rest[0]) else start
                token = {"v": "meta.k8s.io/v1", "rv": rv, "start": last + "\x00"}
                meta["continue"] = base64.urlsafe_b64encode(compact_json(token)).decode().rstrip("=")
                if not label_selector and not field_selector:
                    meta["remainingItemCount"] = len(rest)
            shown = [self.out(res, o) for o in items]
            if not res.custom:
                shown = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in shown]
            return {"kind": res.list_kind, "apiVersion": res.api_version, "metadata": meta, "items": shown}

    def watch(self, res: Resource, namespace: str | None, label_selector: str | None = None, field_selector: str | None = None,
              resource_version: str | None = None, bookmarks: bool = False, send_initial: bool = False) -> Watch:
        """A watch from `resource_version` (unset or "0": the current state first)."""
        with self.lock:
            match = self._matcher(res, label_selector, field_selector)
            since = None
            if resource_version not in (None, "", "0"):
                try:
                    since = int(resource_version)  # type: ignore[arg-type]
                except ValueError:
                    raise bad_request(f"invalid resource version: {resource_version}") from None
            if send_initial and since is not None:
                raise bad_request("sendInitialEvents is only supported with an unset or \"0\" resourceVersion")
            w = Watch(self, res, namespace, match, since, bookmarks, send_initial)
            self.watches.add(w)
            return w

    def bookmark_all(self) -> int:
        """Ask every open watch that allows bookmarks for a BOOKMARK at the current
        resourceVersion (sent after every earlier event); returns that resourceVersion."""
        with self.changed:
            for w in list(self.watches):
                if w.bookmarks and not w.closed and not w.failed:
                    w.bookmark_wanted = max(w.bookmark_wanted, self.rv)
            self.changed.notify_all()
            return self.rv

    def _continue(self, token: str) -> tuple[int, str]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            rv, start = int(data["rv"]), str(data["start"]).rstrip("\x00")
        except (ValueError, KeyError, TypeError):
            raise bad_request(f"continue key is not valid: {token}") from None
        if rv <= self.compacted and rv != self.rv:
            raise expired(EXPIRED_CONTINUE)
        return rv, start

    # --- writes -----------------------------------------------------------------------------------
    def _decode(self, res: Resource, body: Any, strict: bool, ctx: Context) -> Obj:
        if not isinstance(body, dict):
            raise bad_request(f"the body of the request is not a {res.kind} object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != res.api_version:
            raise bad_request(f"the API version in the data ({api_version}) does not match the expected API version ({res.api_version})")
        if kind and kind != res.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({res.kind})")
        body = clone(body)
        body["apiVersion"], body["kind"] = res.api_version, res.kind
        if res.to_storage:
            body = res.to_storage(body)
        obj, warnings = res.strategy.decode(body, res.kind, strict)
        ctx.warnings += warnings
        if not isinstance(obj.get("metadata", {}), dict):
            raise bad_request(f"{res.kind} in version \"{res.version}\" cannot be handled as a {res.kind}: metadata is not an object")
        return obj

    def _meta_errors(self, meta: Obj) -> list[FieldError]:
        errs = []
        name = meta.get("name", "")
        if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
            errs.append(invalid_field("metadata.name", name, SUBDOMAIN_MESSAGE))
        for value in (meta.get("labels") or {}).values():
            if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
                errs.append(invalid_field("metadata.labels", value, LABEL_MESSAGE))
        return errs

    def create(self, res: Resource, namespace: str, body: Any, manager: str = "", strict: bool = False) -> tuple[Obj, list[str]]:
        """POST: the stored object and the warnings of its decoding."""
        with self.lock:
            if namespace in self.terminating:  # the NamespaceLifecycle admission plugin
                name = (body.get("metadata") or {}).get("name") or "" if isinstance(body, dict) else ""
                raise forbidden(res.group, res.plural, name, f"unable to create new content in namespace {namespace} because it is being terminated")
            ctx = self.context()
            obj = self._decode(res, body, strict, ctx)
            meta = obj.setdefault("metadata", {})
            if meta.get("namespace") not in (None, "", namespace):
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            meta["namespace"] = namespace
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise invalid(res.group, res.kind, "", [required("metadata.name", "name or generateName is required")])
                meta["name"] = meta["generateName"] + "".join(self.rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            if meta.get("resourceVersion"):
                raise error(500, "", "resourceVersion should not be set on objects to be created")
            res.strategy.default(obj)
            res.strategy.admit(obj, ctx)
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
                meta.pop(k, None)
            meta["uid"] = self.new_uid()
            meta["creationTimestamp"] = ctx.stamp
            if res.strategy.generation:
                meta["generation"] = 1
            else:
                meta.pop("generation", None)
            res.strategy.prepare_create(obj, ctx)
            errs = res.strategy.validate_create(obj) + self._meta_errors(meta)
            if errs:
                raise invalid(res.group, res.kind, meta["name"], errs)
            res.strategy.check_create(obj, ctx)
            key = (res.key, namespace, meta["name"])
            if key in self.objects:
                deleting = bool(self.objects[key]["metadata"].get("deletionTimestamp"))
                raise already_exists(res.group, res.plural, meta["name"], deleting)
            meta["managedFields"] = managedfields.record(None, obj, manager or "unknown", "", ctx.stamp, res.api_version)
            stored = self._commit(res, key, None, _ordered(obj), "ADDED", ctx)
            gc.orphaned_at_birth(self, key, stored)
            return self.out(res, stored), ctx.warnings

    def update(self, res: Resource, namespace: str, name: str, body: Any, subresource: str = "", manager: str = "", strict: bool = False) -> tuple[Obj, list[str]]:
        """PUT on the object or its status or scale subresource."""
        with self.lock:
            ctx = self.context()
            current = self._get(res, namespace, name)
            if subresource == "scale":
                return self._scale(res, current, body, manager, ctx)
            obj = self._decode(res, body, strict, ctx)
            return self._update(res, current, obj, subresource, manager, ctx, patched=False), ctx.warnings

    def patch(self, res: Resource, namespace: str, name: str, patch_type: str, patch: Any, subresource: str = "", manager: str = "", strict: bool = False) -> tuple[Obj, list[str]]:
        """PATCH with a JSON patch, a merge patch or a strategic merge patch."""
        with self.lock:
            ctx = self.context()
            current = self._get(res, namespace, name)
            base = res.strategy.scale_of(current) if subresource == "scale" else self.out(res, current)  # type: ignore[attr-defined]
            if patch_type == "json":
                patched = patches.json_patch(base, patch)
            elif patch_type == "merge":
                patched = patches.merge_patch(base, patch)
            elif patch_type == "strategic" and res.strategy.strategic_merge and subresource != "scale":
                patched = patches.strategic_merge_patch(base, patch)
            else:
                raise not_acceptable_patch(PATCH_TYPES if patch_type == "strategic" else PATCH_TYPES + ", application/strategic-merge-patch+json")
            if not isinstance(patched, dict):
                raise bad_request("the patched object is not a JSON object")
            patched.setdefault("metadata", {}).setdefault("resourceVersion", current["metadata"]["resourceVersion"])
            if subresource == "scale":
                return self._scale(res, current, patched, manager, ctx)
            obj = self._decode(res, patched, strict, ctx)
            return self._update(res, current, obj, subresource, manager, ctx, patched=True), ctx.warnings

    def _scale(self, res: Resource, current: Obj, scale: Any, manager: str, ctx: Context) -> tuple[Obj, list[str]]:
        if not isinstance(scale, dict):
            raise bad_request("the body of the request is not a Scale object")
        updated = res.strategy.apply_scale(current, scale)  # type: ignore[attr-defined]
        if not (scale.get("metadata") or {}).get("resourceVersion"):
            updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        stored = self._update(res, current, updated, "scale", manager, ctx, patched=True)
        return res.strategy.scale_of(stored), ctx.warnings  # type: ignore[attr-defined]

    def _update(self, res: Resource, current: Obj, obj: Obj, subresource: str, manager: str, ctx: Context, patched: bool) -> Obj:
        meta, old_meta = obj.setdefault("metadata", {}), current["metadata"]
        name, namespace = old_meta["name"], old_meta.get("namespace", "")
        if meta.get("name") not in (None, "", name):
            raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        if meta.get("namespace") not in (None, "", namespace):
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        rv = meta.get("resourceVersion")
        if not rv and not patched and not res.strategy.unconditional_update:
            raise invalid(res.group, res.plural, name, [invalid_field("metadata.resourceVersion", 0, "must be specified for an update", shown="0x0")])
        if rv and rv != old_meta["resourceVersion"]:
            raise conflict(res.group, res.plural, name)
        res.strategy.default(obj)
        errs = _keep_system_fields(meta, old_meta)
        if subresource == "status":
            res.strategy.prepare_status(obj, current)
            errs += res.strategy.validate_status(obj, current)
        else:
            res.strategy.prepare_update(obj, current, ctx)
            if res.strategy.generation and res.strategy.spec_of(obj) != res.strategy.spec_of(current):
                obj["metadata"]["generation"] = old_meta.get("generation", 0) + 1
            errs += res.strategy.validate_update(obj, current) + self._meta_errors(obj["metadata"])
        if errs:
            raise invalid(res.group, res.kind, name, errs)
        if obj == current:
            return self.out(res, current)  # a no-op update writes nothing
        key = (res.key, namespace, name)
        obj["metadata"]["managedFields"] = managedfields.record(current, obj, manager or "unknown", "status" if subresource == "status" else "", ctx.stamp, res.api_version)
        if old_meta.get("deletionTimestamp") and not obj["metadata"].get("finalizers") and not old_meta.get("deletionGracePeriodSeconds"):
            return self.out(res, self._remove(res, key, ctx))  # store.go ShouldDeleteDuringUpdate
        return self.out(res, self._commit(res, key, current, _ordered(obj), "MODIFIED", ctx))

    def delete(self, res: Resource, namespace: str, name: str, options: Obj | None = None) -> Obj:
        """DELETE: the object (pods, pod templates) or a Success Status."""
        with self.lock:
            ctx = self.context()
            options = options or {}
            current = self._get(res, namespace, name)
            key = (res.key, namespace, name)
            meta = current["metadata"]
            pre = options.get("preconditions") or {}
            what = {"uid": ("UID", "The object might have been deleted and then recreated"), "resourceVersion": ("ResourceVersion", "The object might have been modified")}
            for field, (label, hint) in what.items():
                if pre.get(field) and pre[field] != meta.get(field):
                    why = f"the {label} in the precondition ({pre[field]}) does not match the {label} in record ({meta.get(field)}). {hint}"
                    raise conflict(res.group, res.kind, name, why)
            grace = options.get("gracePeriodSeconds")
            if isinstance(grace, int) and grace < 0:
                grace = 1
            if options.get("propagationPolicy") == "Orphan" or options.get("orphanDependents") is True:
                gc.orphan(self, current)
            result = self._delete(res, key, current, grace, ctx)
            if res.key in RETURNS_DELETED:
                return self.out(res, result)
            details = {"name": name, "group": res.group, "kind": res.plural, "uid": meta.get("uid")}
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {k: v for k, v in details.items() if v}}

    def _delete(self, res: Resource, key: Key, current: Obj, grace: int | None, ctx: Context) -> Obj:
        meta = current["metadata"]
        if meta.get("deletionTimestamp"):
            pending = meta.get("deletionGracePeriodSeconds")
            if not pending:
                return self._remove(res, key, ctx) if not meta.get("finalizers") else current
            if grace is None or grace >= pending:
                return current  # graceful deletion pending: nothing changes
            when = parse_time(meta["deletionTimestamp"]) - pending + grace
            return self._mark(res, key, current, when, grace, ctx, bump=False)
        period = res.strategy.grace_period(current, grace)
        if period:
            return self._mark(res, key, current, ctx.now + period, period, ctx, bump=True)
        if period == 0 or meta.get("finalizers"):  # a graceful kind deleted with grace 0 is marked too, then removed
            return self._mark(res, key, current, ctx.now, 0, ctx, bump=True)
        return self._remove(res, key, ctx)

    def _mark(self, res: Resource, key: Key, current: Obj, when: float, grace: int, ctx: Context, bump: bool) -> Obj:
        """Set deletionTimestamp and deletionGracePeriodSeconds (graceful deletion, finalizers);
        with grace 0 and no finalizer, then remove it: two writes, MODIFIED then DELETED, whose
        object carries the deletion's date (registry/store.go Delete: "The deletion operation
        happens in two phases. 1. Update to set DeletionGracePeriodSeconds and DeletionTimestamp
        2. Delete the object from storage", rest/delete.go BeforeDelete)."""
        new = clone(current)
        meta = new["metadata"]
        meta["deletionTimestamp"] = stamp(when)
        meta["deletionGracePeriodSeconds"] = grace
        if bump and meta.get("generation"):
            meta["generation"] += 1
        marked = self._commit(res, key, current, _ordered(new), "MODIFIED", ctx)
        if grace == 0 and not meta.get("finalizers"):
            return self._remove(res, key, ctx)
        return marked

    # --- what controllers do behind the API ---------------------------------------------------------
    def bind(self, namespace: str, name: str, node: str) -> None:
        """The pods/binding subresource (the scheduler's assignment)."""
        from .pods import bind

        with self.lock:
            ctx = self.context()
            res = by_key("pods")
            current = self._get(res, namespace, name)
            new = clone(current)
            refusal = bind(new, node, ctx.stamp)
            if refusal:
                raise conflict("", "pods", name, refusal) if "already assigned" in refusal else error(500, "", refusal)
            new["metadata"]["managedFields"] = managedfields.record(current, new, "kube-scheduler", "status", ctx.stamp, "v1")
            self._commit(res, (res.key, namespace, name), current, _ordered(new), "MODIFIED", ctx)

    def system_update(self, key: Key, new: Obj, manager: str) -> None:
        """A controller's write that needs no validation (garbage collector patches)."""
        res = by_key(key[0])
        ctx = self.context()
        current = self.objects[key]
        new["metadata"]["managedFields"] = managedfields.record(current, new, manager, "", ctx.stamp, res.api_version)
        self._commit(res, key, current, _ordered(new), "MODIFIED", ctx)

    def system_delete(self, key: Key) -> None:
        """A controller's delete with default options (background propagation, pods graceful)."""
        res = by_key(key[0])
        current = self.objects.get(key)
        if current is None:
            raise not_found(res.group, res.plural, key[2])
        self._delete(res, key, current, None, self.context())

    def write_status_internal(self, key_resource: str, namespace: str, name: str, status: Obj) -> None:
        """A controller's status write (the quota controller's usage)."""
        key = (key_resource, namespace, name)
        current = self.objects[key]
        new = {**current, "status": status, "metadata": dict(current["metadata"])}
        self.system_update(key, new, "kube-controller-manager")


def _keep_system_fields(meta: Obj, old: Obj) -> list[FieldError]:
    """rest.BeforeUpdate: what an update cannot change comes from the stored object."""
    errs = []
    if meta.get("uid") and meta["uid"] != old.get("uid"):
        errs.append(invalid_field("metadata.uid", meta["uid"], "field is immutable"))
    meta.update(name=old["name"], namespace=old.get("namespace", ""))
    for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "managedFields", "resourceVersion"):
        meta.pop(k, None)
        if k in old:
            meta[k] = old[k]
    return errs


_TOP = ("apiVersion", "kind", "metadata", "spec", "template", "data", "type", "status")


def _ordered(obj: Obj) -> Obj:
    """Top-level keys in the order the API serializes them (apiVersion, kind, metadata, spec...)."""
    out = {k: obj[k] for k in _TOP if k in obj}
    out.update((k, v) for k, v in obj.items() if k not in out)
    return out
