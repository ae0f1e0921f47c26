"""Watches over the store's event log, with kube-apiserver's watch-cache semantics.

staging/src/k8s.io/apiserver/pkg/storage/cacher (cacher.go, cache_watcher.go, watch_cache.go):
- `resourceVersion` unset or "0": the current matching objects first, as ADDED events, then
  every later change; "N": the changes after N;
- a change makes an object enter the selection (ADDED), stay in it (MODIFIED) or leave it
  (DELETED, with the object's previous state at the event's resourceVersion);
- an N older than the compacted history: one ERROR event with a 410 Expired Status
  (`too old resource version: N (M)`), then the stream ends; the HTTP server sends it on a
  200 stream, in-process callers get runtime.api.Expired;
- an N newer than the store: the cacher waits up to 3 s for it, then an ERROR event with a 504
  `Too large resource version` Status;
- with allowWatchBookmarks, BOOKMARK events carry the resourceVersion up to which everything has
  been sent, in an otherwise empty object of the kind (for typed kinds the empty Go struct:
  `creationTimestamp: null`, a pod's `spec.containers: null`, `status: {}`); the cacher sends one
  about every minute and one right before the watch's timeout;
- sendInitialEvents=true (with resourceVersionMatch=NotOlderThan): the initial ADDED events end
  with a BOOKMARK annotated `k8s.io/initial-events-end: "true"`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...api import Obj
from .copies import clone
from .status import body_of, expired, timeout

if TYPE_CHECKING:
    from .kinds import Resource
    from .store import Store

Event = tuple[str, Obj]
TOO_LARGE_WAIT = 3.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# The zero value of each typed kind as its BOOKMARK carries it, besides metadata.
_EMPTY_TYPED: dict[str, Obj] = {
    "pods": {"spec": {"containers": None}, "status": {}},
    "podtemplates": {"template": {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}}},
    "leases": {"spec": {}},
    "resourcequotas": {"spec": {}, "status": {}},
    "events": {"involvedObject": {}, "reportingComponent": "", "reportingInstance": "", "source": {}, "firstTimestamp": None, "lastTimestamp": None, "eventTime": None},
}


def bookmark(res: Resource, rv: int, initial_end: bool = False) -> Obj:
    meta: Obj = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    if res.custom:
        return {"kind": res.kind, "apiVersion": res.api_version, "metadata": meta}
    meta["creationTimestamp"] = None
    extra = {} if res.from_storage else clone(_EMPTY_TYPED.get(res.key, {}))
    return {"kind": res.kind, "apiVersion": res.api_version, "metadata": meta, **extra}


class Watch:
    """One watch: a cursor into the store's log, the initial events, and bookmark requests."""

    def __init__(self, store: Store, res: Resource, namespace: str | None, match: Callable[[Obj], bool], since: int | None,
                 bookmarks: bool = False, initial_end: bool = False):
        self.store, self.res, self.namespace, self.match = store, res, namespace, match
        self.bookmarks = bookmarks
        self.pending: deque[Event] = deque()
        self.closed = False
        self.frozen = False  # half-open: the connection stays, nothing more is ever sent
        self.failed = False  # an ERROR event was sent; the stream ends
        self.bookmark_wanted = 0  # a BOOKMARK is owed once the cursor reaches this resourceVersion
        self.bookmark_sent = 0
        self.bookmark_now = False  # a periodic bookmark is due, whatever was sent before
        with store.lock:
            if since is None:  # unset or "0": the current state, then what follows
                for _, obj in store.of(res.key, namespace):
                    if match(obj):
                        self.pending.append(("ADDED", store.out(res, obj)))
                self.cursor = store.rv
                if initial_end:
                    self.pending.append(("BOOKMARK", bookmark(res, self.cursor, True)))
            else:
                self.cursor = since

    # --- reading the log -------------------------------------------------------------------------
    def _convert(self, change: object) -> Event | None:
        obj, prev, etype = change.obj, change.prev, change.type  # type: ignore[attr-defined]
        now = etype != "DELETED" and self.match(obj)
        before = prev is not None and self.match(prev)
        if now and not before:
            return "ADDED", self.store.out(self.res, obj)
        if now:
            return "MODIFIED", self.store.out(self.res, obj)
        if before:
            last = prev if etype != "DELETED" else obj
            gone = {**last, "metadata": {**last["metadata"], "resourceVersion": obj["metadata"]["resourceVersion"]}}
            return "DELETED", self.store.out(self.res, gone)
        return None

    def drain(self) -> list[Event]:
        """Events ready now, under the store's lock; an ERROR event when the history is gone."""
        out = list(self.pending)
        self.pending.clear()
        if self.cursor < self.store.compacted:
            self.failed = True
            exc = expired(f"too old resource version: {self.cursor} ({self.store.compacted})")
            return [*out, ("ERROR", body_of(exc))]
        for change in self.store.changes_since(self.cursor):
            if change.key == self.res.key and self.namespace in (None, change.namespace):
                event = self._convert(change)
                if event is not None:
                    out.append(event)
        self.cursor = max(self.cursor, self.store.rv)
        due = self.bookmark_wanted and self.cursor >= self.bookmark_wanted > self.bookmark_sent
        if self.bookmarks and (due or self.bookmark_now):
            out.append(("BOOKMARK", bookmark(self.res, self.cursor)))
            self.bookmark_sent = self.cursor
        self.bookmark_now = False
        return out

    def ready(self) -> bool:
        """Whether drain() has something (called under the lock)."""
        if self.pending or self.cursor < self.store.compacted or self.cursor < self.store.rv:
            return True
        return bool(self.bookmarks and (self.bookmark_wanted > self.bookmark_sent or self.bookmark_now))

    def too_large(self) -> Obj | None:
        """The 504 Status for a resourceVersion the store has not reached (after waiting)."""
        with self.store.changed:
            self.store.changed.wait_for(lambda: self.store.rv >= self.cursor, TOO_LARGE_WAIT)
            if self.store.rv >= self.cursor:
                return None
            exc = timeout(f"Too large resource version: {self.cursor}, current: {self.store.rv}")
            body = body_of(exc)
            body["details"]["causes"] = [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
            return body

    # --- in-process use ----------------------------------------------------------------------------
    def next_events(self, timeout: float | None = None) -> list[Event]:
        """Events since the last call; waits up to `timeout` seconds when there are none (never
        blocks when `timeout` is None or 0).  Raises runtime.api.Expired for a compacted start."""
        with self.store.changed:
            if timeout and not self.ready() and not self.closed:
                self.store.changed.wait_for(lambda: self.ready() or self.closed, timeout)
            if self.closed:
                return []
            events = self.drain()
        if events and events[-1][0] == "ERROR":
            raise expired(events[-1][1]["message"])
        return [(t, clone(o)) for t, o in events]

    def close(self) -> None:
        with self.store.changed:
            self.closed = True
            self.store.changed.notify_all()
