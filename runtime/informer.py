"""List once, then watch: a cache of (trimmed) objects kept current from a watch stream.

An expired resourceVersion (410) triggers a relist.  A stream the server ends (its
timeoutSeconds) is resumed at once from the last resourceVersion.  A stream that broke, a
list or watch that failed, or a server that cannot be reached is retried after a capped
exponential back-off with jitter (never sooner than a Retry-After the server sent, so a
throttled server is not hammered and many informers do not retry in lockstep); the informer
never sleeps itself, it says when it wants to be polled
again (`retry_at`), so the loop stays responsive to SIGTERM and to its other watches.
Nothing a watch or a list raises escapes `poll`.  `last_heard` is the last time the server
answered (a list, a watch opened, an event or bookmark), for the runtime's /healthz.

One informer serves a whole namespace's jobs in namespace mode: `key_of` says which job an
object belongs to, the cache is also kept by that key (`by_key`, as client-go's indexers
are), and `touched` collects the keys whose objects changed, for the work queue.

What an informer caches is bounded by what it admits, not by what is in the namespace:
anyone who may write there can add objects carrying a job's labels (before issue 21, 100
PodTemplates of 1 MB took the runtime to 152 MiB and stalled its job).  With `admit` set,
an object of another name is reduced to its name before it is trimmed (`gate`) and never
cached; `readmit` changes the names and says which newly admitted names were turned away
before (a job's PodTemplates may arrive before its record names them), and `refill` reads
just those again (their job's label), so adding a job never lists the whole collection.
With `skip` set (the namespace runtime), the objects of a job whose record is another mode's
(another team's `--runtime job` jobs) are stubbed by their job and never cached; `take_back`
reads a job's again by its label when its record moves here, `drop` forgets them when it leaves.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .api import ApiError, Expired, NotFound, Obj, Watch
from .backoff import retry_delay, seeded
from .nameset import NO_NAMES, PodNames

_REFUSED = "flatjob.dev/not-admitted"  # marks a stub of an object the informer does not cache
_SKIPPED = "flatjob.dev/not-served"  # marks a stub of an object of a job this runtime does not serve (its key)
REFUSED_NAMES = 4096  # names turned away that are remembered; past it any readmit lists again
MAX_BACKOFF = 30.0
SHORT_LIVED = 1.0  # a stream the server ends sooner than this counts as a failure, not a time-out

GONE_KEEP = 120.0  # seconds a deleted object's last state is kept for its job's next cycles
GONE_CAP = 4096  # last states kept at most, the oldest dropped first: a tenant deleting pods in bulk grows nothing beyond

log = logging.getLogger("flatjob.runtime")


def _revision(obj: Obj | None) -> int | None:
    """An object's resourceVersion as etcd's revision, when it is one (decimal, as every
    kube-apiserver's is); None for an opaque one, which is never compared."""
    rv = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return int(rv) if isinstance(rv, str) and 0 < len(rv) <= 20 and rv.isascii() and rv.isdigit() else None


def _behind(cached: Obj | None, event: Obj) -> bool:
    """Whether a watch event is older than the cached object: the runtime's own write put its
    answer in the cache (`written`) before the watch delivered the events made before it, which
    a watch delivers in resourceVersion order, never merged (apiserver cacher).  Applied, an
    older event took the cache back: a released pod read gated again, a deleted one not
    deleting, a DELETED of a pod's earlier incarnation dropped its successor (review 23,
    round 15).  Compared as revisions, as the API server's watch cache does."""
    have, got = _revision(cached), _revision(event)
    return have is not None and got is not None and got < have

@dataclass
class Informer:
    """One watched collection, cached by object name."""

    list_fn: Callable[[], tuple[list[Obj], str]]
    watch_fn: Callable[[str], Watch]
    clock: Callable[[], float] = time.monotonic
    name: str = "objects"
    cache: dict[str, Obj] = field(default_factory=dict)
    resource_version: str = "0"
    relists: int = 0
    reconnects: int = 0
    errors: int = 0
    synced: bool = False
    last_heard: float = 0.0
    retry_at: float | None = None  # set while broken: when to list or reconnect again
    _watch: Watch | None = None
    _pending: str | None = "relist"  # None (watching) | "reopen" | "relist"
    _opened: float = 0.0
    _failures: int = 0
    _rng: random.Random | None = None
    key_of: Callable[[Obj], Any] | None = None  # the job an object belongs to (None: no index)
    seed: str = ""  # the process's identity: its retries' jitter differs from every other runtime's (no relists in lockstep)
    by_key: dict[Any, dict[str, Obj]] = field(default_factory=dict)  # job -> name -> object
    touched: set[Any] = field(default_factory=set)  # jobs whose objects changed since `drain`
    admit: Callable[[str], bool] | None = None  # the names cached (None: every name)
    admitted: PodNames | None = None  # the names `readmit` was last given
    turned_away: set[str] = field(default_factory=set)  # names seen but not admitted since the last list
    _overflow: bool = False  # more names were turned away than REFUSED_NAMES
    # Jobs this runtime does not serve (their record is another mode's): their objects are
    # stubbed by key, never cached, and their keys kept (at most one per record) to read them
    # again should their record move here (`take_back`); a name turned away is not remembered.
    skip: Callable[[Any], bool] | None = None
    skipped: set[Any] = field(default_factory=set)
    _moved: dict[str, bool] = field(default_factory=dict)  # names written now -> changed by the watch since (`written`)
    _connecting: bool = False  # a list or watch request is out (another thread must not start a second)
    # What the cache is known to lack until the next whole list: the jobs whose objects could not
    # be read again (`take_back`, `refill`, a stub of a job served since), and `_lost` when the
    # job is unknown (a turned-away name admitted while its event was queued).  No cycle runs on
    # them (client-go's WaitForCacheSync): an absent pod would read as a vanished one.
    unread: set[Any] = field(default_factory=set)
    # The last state of each object a DELETED event removed (the event carries it), by name, for
    # GONE_KEEP seconds or until the name is stored again: a pod that ended and was deleted before
    # a cycle saw it end (a completed pod drained or collected at once) is judged by it.
    gone: dict[str, tuple[Obj, float]] = field(default_factory=dict)
    _lost: bool = False

    def gate(self, trim: Callable[[Obj], Obj]) -> Callable[[Obj], Obj]:
        """`trim` for this informer's list and watch: an object it does not admit becomes a stub
        (its name only), which is never cached, before `trim` spends anything on it."""

        def gated(obj: Obj) -> Obj:
            meta = (obj.get("metadata") or {}) if isinstance(obj, dict) else {}
            name = meta.get("name")
            if self.skip is not None and self.key_of is not None and isinstance(name, str):
                key = self.key_of(obj)
                if key is not None and self.skip(key):
                    return {"metadata": {"name": name, "resourceVersion": meta.get("resourceVersion")}, _SKIPPED: key}
            admit = self.admit
            if admit is not None and isinstance(name, str) and not admit(name):  # (a bookmark has no name)
                return {"metadata": {"name": name, "resourceVersion": meta.get("resourceVersion")}, _REFUSED: True}
            return trim(obj)

        return gated

    def readmit(self, names: PodNames | None) -> frozenset[str]:
        """Cache only these names from now on (None: every name).  Returns the names admitted now
        that were turned away before (dropped ones included): their objects are read again with
        `refill`; past REFUSED_NAMES, or back to every name, the whole collection is listed again."""
        if names == self.admitted:
            return frozenset()
        before, self.admitted = self.admitted, names
        self.admit = None if names is None else names.__contains__
        if not self.synced:
            return frozenset()
        for name in [n for n in self.cache if self.admit is not None and not self.admit(n)]:
            self._forget(name)
            self._turn_away(name)  # admitted again later, it must be read again: no event brings it back
        if names is None or self._overflow:
            if names is None or not names <= (before or NO_NAMES):
                self._relist_soon()
            return frozenset()
        return names & self.turned_away

    def refill(self, key: Any, fetch: Callable[[], tuple[list[Obj], str]], names: frozenset[str]) -> None:
        """Read again objects of names `readmit` returned (`fetch`: a list narrowed to them, by
        their job `key`'s label); on failure the whole collection is listed again, and the job
        waits for it."""
        if self._read_again(key, fetch, lambda obj: (obj.get("metadata") or {}).get("name") in names):
            self.turned_away -= names  # the ones not found no longer exist

    def take_back(self, key: Any, fetch: Callable[[], tuple[list[Obj], str]]) -> None:
        """Read a job's objects again once it is served (`fetch`: a list by its labels); on
        failure the whole collection is listed again."""
        if key in self.skipped and self.key_of is not None:
            self.skipped.discard(key)
            key_of = self.key_of
            self._read_again(key, fetch, lambda obj: key_of(obj) == key)

    def _read_again(self, key: Any, fetch: Callable[[], tuple[list[Obj], str]], wanted: Callable[[Obj], bool]) -> bool:
        """Store what `fetch` lists that is `wanted` and not a stub; False (a relist, and `key`
        unread until it is made) on failure."""
        try:
            items, _ = fetch()
        except Exception:
            self.unread.add(key)
            self._relist_soon()
            return False
        for obj in items:
            if _SKIPPED not in obj and _REFUSED not in obj and wanted(obj):
                self.store(obj)
        return True

    def due_at(self, now: float) -> float | None:
        """When the loop must poll this informer although no event comes: its retry time, or now
        when a relist is pending with none (`_relist_soon`: a job's objects wait for it)."""
        if self.retry_at is not None:
            return self.retry_at
        return now if self._pending is not None and self.synced else None  # (one never listed has a retry time, or is not started)

    @property
    def whole(self) -> bool:
        """Listed, and lacking nothing it cannot name the job of."""
        return self.synced and not self._lost

    def ready_for(self, key: Any) -> bool:
        """Whether a cycle of job `key` may run on this cache: it holds all of the job's objects
        (perhaps late, as a broken watch leaves it) or the job is unknown to be missing any."""
        return self.whole and key not in self.unread

    def drop(self, key: Any) -> None:
        """A job no longer served: what is cached of it goes (events bring stubs from now on)."""
        for name in list(self.of(key)) if self.key_of is not None else ():
            self._forget(name)
        self.skipped.add(key)

    def _relist_soon(self) -> None:
        self._close()
        self._pending, self.retry_at = "relist", None

    def start(self) -> bool:
        """Initial list and watch; False (retried by later polls) when the server is away."""
        self.last_heard = self.clock()
        return self._connect(relist=True)

    def poll(self, timeout: float | None = 0.0) -> bool:
        """Apply the events that arrived (waiting up to `timeout`); True when the cache changed."""
        if self._pending is not None or self._watch is None:
            if self.retry_at is not None and self.clock() < self.retry_at:
                return False
            return self._connect(relist=self._pending != "reopen")
        try:
            events = self._watch.next_events(timeout)
        except Expired:
            return self._connect(relist=True)
        except Exception as exc:  # a broken stream, an unreachable server, even a bug: never the loop's end
            if isinstance(exc, ApiError) and exc.reason == "StreamClosed" and self.clock() - self._opened >= SHORT_LIVED:
                return self._connect(relist=False)  # the server's timeoutSeconds: resume at once
            self._fail(exc, "reopen")
            return False
        self._failures = 0
        if events:
            self.last_heard = self.clock()
        changed = False
        for etype, obj in events:
            changed |= self._apply(etype, obj)
        return changed

    def _connect(self, relist: bool) -> bool:
        """Reopen the watch from the last resourceVersion, or list again; True when relisted."""
        if self._connecting:
            return False  # another cycle thread's turn came while this one's request was out
        self._connecting = True
        try:
            if not relist:
                try:
                    self._open(self.resource_version)
                    self.reconnects += 1
                    return False
                except Expired:
                    pass
            self.turned_away, self._overflow = set(), False
            items, rv = self.list_fn()
            self._moved = dict.fromkeys(self._moved, True)
            old = self.cache
            self.skipped = {o[_SKIPPED] for o in items if _SKIPPED in o}
            stubs = [o["metadata"]["name"] for o in items if _SKIPPED not in o and self._refused(o)]
            self.cache = {o["metadata"]["name"]: o for o in items if _SKIPPED not in o and _REFUSED not in o}
            # A name `readmit` admitted while the list was out (another cycle thread's job) was
            # gated by the old names: its content is lost, as in `_apply` (review hx20).
            late = any(self.admit is None or self.admit(n) for n in stubs)
            self._reindex()
            if self.key_of is not None:  # the jobs whose objects the list changed
                self.touched |= {self.key_of(o) for n in old.keys() | self.cache.keys() if old.get(n) != self.cache.get(n) for o in (old.get(n), self.cache.get(n)) if o is not None}
            self.resource_version = rv
            self.relists += 1
            self.synced, self.unread, self._lost = True, set(), late
            self._open(rv)
            if late:
                self._relist_soon()
            return True
        except Exception as exc:
            self._fail(exc, "relist" if relist else "reopen")
            return False
        finally:
            self._connecting = False

    def _open(self, rv: str) -> None:
        self._close()
        self._watch = self.watch_fn(rv)
        self._opened = self.last_heard = self.clock()
        self._pending = self.retry_at = None

    def _fail(self, exc: Exception, pending: str) -> None:
        self.errors += 1
        self._failures += 1
        self._close()
        self._pending = pending
        if isinstance(exc, ApiError) and exc.status >= 400:  # the server answered: it is there (/healthz)
            self.last_heard = self.clock()
        if isinstance(exc, NotFound) and pending == "relist":  # the kind is not served (its CRD absent): none of it exists
            if self.cache:
                if self.key_of is not None:
                    self.touched |= {self.key_of(o) for o in self.cache.values()}
                self.cache = {}
                self._reindex()
            self.synced = True  # a namespace of GenericJobs alone is served; the list is tried again at the back-off cap
        if self._rng is None:
            self._rng = seeded(f"{self.seed}/{self.name}")
        self.retry_at = self.clock() + retry_delay(self._failures, MAX_BACKOFF, self._rng, exc)
        log.warning("watch failed", extra={"watch": self.name, "error": f"{type(exc).__name__}: {exc}"[:300], "retry_in": self.retry_at - self.clock()})

    def _apply(self, etype: str, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if rv:
            self.resource_version = str(rv)
        if etype == "BOOKMARK":
            return False
        name = meta.get("name")
        if not isinstance(name, str):
            return False
        if _behind(self.cache.get(name), obj):  # an event from before what the runtime's own write brought
            return False
        if etype == "DELETED":
            self._bury(name, obj)
            return self._forget(name)
        if _SKIPPED in obj:  # a job this runtime does not serve
            key = obj[_SKIPPED]
            if self.skip is not None and self.skip(key):
                self.skipped.add(key)
                return self._forget(name)
            self.unread.add(key)  # served since the stub was made: its content is lost
            self._relist_soon()
            return False
        if self._refused(obj):
            if self.admit is None or self.admit(name):  # turned away, then admitted while queued: its content is lost
                self._lost = True
                self._relist_soon()
            return self._forget(name)
        if self.admit is not None and not self.admit(name):  # gated before `readmit` dropped its name
            self._turn_away(name)
            return self._forget(name)
        if self.cache.get(name) == obj:
            return False
        self.store(obj)
        return True

    def _refused(self, obj: Obj) -> bool:
        """A stub `gate` made; its name is remembered so that admitting it reads it again."""
        if _REFUSED not in obj:
            return False
        self._turn_away(obj["metadata"]["name"])
        return True

    def _turn_away(self, name: str) -> None:
        if len(self.turned_away) < REFUSED_NAMES:
            self.turned_away.add(name)
        else:
            self._overflow = True

    # --- the cache, by name and by job ----------------------------------------------------------
    def store(self, obj: Obj) -> None:
        """Put an object in the cache (a watch event, or the runtime's own write's answer)."""
        name = obj["metadata"]["name"]
        self.gone.pop(name, None)
        self._forget(name)  # marks it moved for a write that is out (`written`)
        self.cache[name] = obj
        if self.key_of is not None:
            key = self.key_of(obj)
            self.touched.add(key)
            if key is not None:
                self.by_key.setdefault(key, {})[name] = obj

    def written(self, name: str, request: Callable[[Callable[[Obj], Obj]], Obj], trim: Callable[[Obj], Obj]) -> Obj:
        """Make the runtime's own write of `name` (`request(trim)`: the answer trimmed as it is
        parsed, never held whole) and cache its answer, unless the watch changed or removed
        `name` while the request was out (another cycle thread's turn: what it brought is as
        new or newer), or a relist ran meanwhile. Returns the trimmed answer."""
        self._moved[name] = False
        try:
            answer = request(trim)
        finally:
            moved = self._moved.pop(name, True)
        if not moved:
            self.store(answer)
        return answer

    def _forget(self, name: str) -> bool:
        if name in self._moved:
            self._moved[name] = True
        old = self.cache.pop(name, None)
        if old is None:
            return False
        if self.key_of is not None:
            key = self.key_of(old)
            self.touched.add(key)
            group = self.by_key.get(key)
            if group is not None:
                group.pop(name, None)
                if not group:
                    del self.by_key[key]
        return True

    def _reindex(self) -> None:
        self.by_key = {}
        if self.key_of is None:
            return
        for name, obj in self.cache.items():
            key = self.key_of(obj)
            if key is not None:
                self.by_key.setdefault(key, {})[name] = obj

    def _bury(self, name: str, obj: Obj) -> None:
        """Keep a DELETED event's object (its last state) for GONE_KEEP seconds, GONE_CAP at most."""
        now = self.clock()
        if name not in self.cache:  # never admitted (a stub, a name turned away): nothing to judge by
            return
        self.gone.pop(name, None)
        while self.gone and (len(self.gone) >= GONE_CAP or now - next(iter(self.gone.values()))[1] > GONE_KEEP):  # oldest first
            del self.gone[next(iter(self.gone))]
        self.gone[name] = (obj, now)

    def gone_of(self, key: Any) -> dict[str, Obj]:
        """The last states of one job's objects that a DELETED event removed lately, by name."""
        now = self.clock()
        return {n: o for n, (o, at) in self.gone.items() if now - at <= GONE_KEEP and (self.key_of is None or self.key_of(o) == key)}

    def of(self, key: Any) -> dict[str, Obj]:
        """The objects of one job, by name (the whole cache when there is no index)."""
        return self.cache if self.key_of is None else self.by_key.get(key, {})

    def drain(self) -> set[Any]:
        """The jobs whose objects changed since the last drain."""
        out, self.touched = self.touched, set()
        out.discard(None)
        return out

    def silent_for(self) -> float:
        """Seconds since the server last answered this informer."""
        return self.clock() - self.last_heard

    def _close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def close(self) -> None:
        self._close()

    def get(self, name: str) -> Any:
        return self.cache.get(name)
