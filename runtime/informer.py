"""List once, then watch: a cache of objects kept current from a watch stream (never polling).

An expired resourceVersion (410) triggers a relist; a broken stream reconnects from the
last seen resourceVersion with capped exponential back-off.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .api import ApiError, Expired, Obj, Watch

MAX_BACKOFF = 30.0


class _Broken:
    """Stands for a watch that could not be reopened: every poll tries again."""

    def next_events(self, timeout: float | None) -> list[tuple[str, Obj]]:
        raise ApiError("watch not connected", 0, "NotConnected")

    def close(self) -> None:
        pass


@dataclass
class Informer:
    """One watched collection, cached by object name."""

    list_fn: Callable[[], tuple[list[Obj], str]]
    watch_fn: Callable[[str], Watch]
    sleep: Callable[[float], None] = time.sleep
    cache: dict[str, Obj] = field(default_factory=dict)
    resource_version: str = "0"
    relists: int = 0
    reconnects: int = 0
    errors: int = 0
    synced: bool = False
    _watch: Watch | None = None
    _failures: int = 0

    def start(self) -> None:
        """Initial list and watch."""
        self._relist()

    def _relist(self) -> None:
        items, rv = self.list_fn()
        self.cache = {o["metadata"]["name"]: o for o in items}
        self.resource_version = rv
        self.relists += 1
        if self._watch is not None:
            self._watch.close()
        self._watch = self.watch_fn(rv)
        self.synced = True

    def poll(self, timeout: float | None = 0.0) -> bool:
        """Apply the events that arrived (waiting up to `timeout`); True when the cache changed."""
        if self._watch is None:
            try:
                self._relist()
            except (ApiError, OSError):
                self.errors += 1
                self._failures += 1
                self.sleep(min(2.0 ** (self._failures - 1), MAX_BACKOFF))
                return False
            return True
        try:
            events = self._watch.next_events(timeout)
        except Expired:
            self._relist()
            return True
        except (ApiError, OSError):
            self.errors += 1
            self._failures += 1
            self.sleep(min(2.0 ** (self._failures - 1), MAX_BACKOFF))
            self._watch.close()
            try:
                self._watch = self.watch_fn(self.resource_version)
                self.reconnects += 1
            except Expired:
                self._relist()
            except (ApiError, OSError):
                self._watch = _Broken()  # the next poll tries to reconnect again, after its back-off
            return False
        self._failures = 0
        changed = False
        for etype, obj in events:
            changed |= self._apply(etype, obj)
        return changed

    def _apply(self, etype: str, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if rv:
            self.resource_version = rv
        if etype == "BOOKMARK":
            return False
        name = meta.get("name")
        if etype == "DELETED":
            return self.cache.pop(name, None) is not None
        if self.cache.get(name) == obj:
            return False
        self.cache[name] = obj
        return True

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()

    def get(self, name: str) -> Any:
        return self.cache.get(name)
