"""The objects a job waits for or reports besides its pods: its SSH Secret, PodGroup and
TensorBoard Deployment, found by name.

A per-job runtime watches each by name (a `metadata.name` field selector, which RBAC's
resourceNames covers): one watch per object, never polled.  A namespace runtime serving
hundreds of jobs cannot hold a watch per job; it watches PodGroups and TensorBoard
Deployments once for the namespace, by their labels, and reads a job's Secret by name when
the job needs it (its Role names each Secret it may read: list and watch of every Secret
in the namespace would let it read them all).  Every lookup answers (known, object): known
False means the runtime has not seen the answer yet, and the job waits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .api import ApiError, Cluster, NotFound, Obj, Resource
from .informer import Informer
from .nameset import PodNames

SECRET_TTL = 30.0  # seconds a namespace runtime trusts what it read of a Secret
SECRET_RETRY = 5.0  # seconds before a Secret that could not be read is read again


class NamedWatches:
    """One informer per name (per-job mode)."""

    def __init__(self, make: Callable[[str], Informer]):
        self.make = make
        self.watches: dict[str, Informer] = {}
        self._listed: set[str] = set()  # names whose watch has been listed: its first list may find none, which changes no cache

    def want(self, names: set[str]) -> None:
        """Watch exactly these names from now on."""
        for name in [n for n in self.watches if n not in names]:
            self.watches.pop(name).close()
            self._listed.discard(name)
        for name in sorted(names - set(self.watches)):
            informer = self.make(name)
            informer.start()
            self.watches[name] = informer

    def get(self, name: str) -> tuple[bool, Obj | None]:
        informer = self.watches.get(name)
        if informer is None or not informer.synced:
            return False, None
        return True, informer.get(name)

    def informers(self) -> list[Informer]:
        return list(self.watches.values())

    def recheck_at(self, name: str | None) -> float | None:
        """When to look again without an event (never: a watch brings every change)."""
        return None

    def touched(self) -> set[str]:
        """The names whose object changed, and those whose watch was first listed since the last
        call: a job that saw its Secret as not known yet (a failed first list) is looked at again
        once the answer is in, even when the answer is "none" (review of issue 24: a per-job
        runtime whose first Secret list failed once never made the Secret)."""
        first = {n for n, i in self.watches.items() if i.synced and n not in self._listed}
        self._listed |= first
        return first | {n for n, i in self.watches.items() if i.drain()}


class LabelWatch:
    """One informer for the namespace, by label (namespace mode), caching only the names served
    jobs want: anyone may label objects as a job's, and the cache must stay bounded whatever is
    in the namespace (review hx19); a name wanted after its object was turned away is read
    again by name (`fetch_one`)."""

    def __init__(self, informer: Informer, fetch_one: Callable[[str], tuple[list[Obj], str]]):
        self.informer = informer
        self.fetch_one = fetch_one
        self.started = False

    def want(self, names: set[str]) -> None:
        """Cache exactly these names from now on (the informer starts with the first)."""
        if not names and not self.started:
            return
        missing = self.informer.readmit(PodNames.of({}, names))
        if not self.started:
            self.started = True
            self.informer.start()
        for name in sorted(missing):
            self.informer.refill(name, lambda name=name: self.fetch_one(name), frozenset({name}))

    def get(self, name: str) -> tuple[bool, Obj | None]:
        if not self.informer.ready_for(name):
            return False, None
        return True, self.informer.get(name)

    def informers(self) -> list[Informer]:
        return [self.informer] if self.started else []

    def recheck_at(self, name: str | None) -> float | None:
        return None

    def touched(self) -> set[str]:
        return {k for k in self.informer.drain() if isinstance(k, str)}


@dataclass
class SecretProbe:
    """Secrets read by name when a job needs one, remembered for SECRET_TTL (namespace mode)."""

    cluster: Cluster
    namespace: str
    res: Resource
    trim: Callable[[Obj], Obj]
    clock: Callable[[], float]
    seen: dict[str, tuple[float, Obj | None]] = field(default_factory=dict)  # name -> (when read, trimmed object)
    failed: dict[str, float] = field(default_factory=dict)  # name -> when a read of it last failed: not again for SECRET_RETRY

    def want(self, names: set[str]) -> None:
        for name in [n for n in self.seen if n not in names]:
            del self.seen[name]
        for name in [n for n in self.failed if n not in names]:
            del self.failed[name]

    def get(self, name: str) -> tuple[bool, Obj | None]:
        now = self.clock()
        hit = self.seen.get(name)
        if hit is not None and now - hit[0] < SECRET_TTL:
            return True, hit[1]
        if now - self.failed.get(name, float("-inf")) < SECRET_RETRY:  # a failing server is asked once a SECRET_RETRY, not once a call
            return (True, hit[1]) if hit is not None else (False, None)
        try:
            obj: Obj | None = self.cluster.get(self.res, self.namespace, name, trim=self.trim)
        except NotFound:
            obj = None
        except ApiError:
            self.failed[name] = now
            return (True, hit[1]) if hit is not None else (False, None)
        self.failed.pop(name, None)
        self.seen[name] = (now, obj)
        return True, obj

    def recheck_at(self, name: str | None) -> float | None:
        """When what was read of the Secret is old enough to read it again (no watch tells)."""
        hit = self.seen.get(name or "")
        if hit is not None:
            return hit[0] + SECRET_TTL
        failed = self.failed.get(name or "")
        return failed + SECRET_RETRY if failed is not None else self.clock() + SECRET_RETRY

    def forget(self, name: str) -> None:
        """The runtime just created or lost it: read it again next time."""
        self.seen.pop(name, None)

    def informers(self) -> list[Informer]:
        return []

    def touched(self) -> set[str]:
        return set()


Lookup = Any  # NamedWatches | LabelWatch | SecretProbe
