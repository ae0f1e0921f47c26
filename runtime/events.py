"""Events, aggregated as client-go's recorder does, and never more than one write per reason
per WINDOW.

client-go (tools/record/events_cache.go, EventCorrelator) sends a repeat of an Event as a
PATCH of its `count` and `lastTimestamp` (eventLogger), and after ten similar events that
differ only in their message writes them as one, its message prefixed "(combined from
similar events): " (EventAggregator).  A 1000-pod job that fails at once would otherwise
write 1000 `Restarting` Events.  Here every occurrence of a (type, reason) within WINDOW of
the last write is held back and counted; one write carries them all when the window ends:
the first occurrence creates the Event, later ones patch it, so `kubectl describe` shows one
line per reason with its count and the latest message.  `pending` says when to come back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .api import EVENTS, Cluster

WINDOW = 10.0  # seconds between two writes of the same (type, reason)
COMBINED = "(combined from similar events): "
SOURCE = "flatjob-runtime"

Obj = dict[str, Any]


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


@dataclass
class _Series:
    """What was written for one (type, reason), and what waits to be."""

    name: str | None = None  # the Event object, once created
    count: int = 0  # occurrences the object counts
    first: float = 0.0
    written_at: float | None = None
    waiting: int = 0  # occurrences not written yet
    message: str = ""  # the latest occurrence's message
    mixed: bool = False  # the messages differ: written as combined
    last: float = 0.0  # the latest occurrence's time


@dataclass(frozen=True)
class Write:
    """One Event write: create `body`, or patch the Event `name` with JSON patch `ops`."""

    key: tuple[str, str]
    body: Obj | None = None
    name: str | None = None
    ops: tuple[Obj, ...] = ()


@dataclass
class EventRecorder:
    """The Events of one job record."""

    namespace: str
    series: dict[tuple[str, str], _Series] = field(default_factory=dict)

    def record(self, etype: str, reason: str, message: str, now: float) -> None:
        s = self.series.setdefault((etype, reason), _Series(first=now))
        s.mixed |= bool(s.message) and s.message != message
        s.waiting, s.message, s.last = s.waiting + 1, message[:1024], now

    def pending(self, now: float) -> float | None:
        """When the next held-back write is due (None: nothing waits)."""
        times = [now if s.written_at is None else s.written_at + WINDOW for s in self.series.values() if s.waiting]
        return min(times) if times else None

    def due(self, involved: Obj, now: float) -> list[Write]:
        """The writes to make now, for the record `involved` (its apiVersion, kind, metadata)."""
        out = []
        for key, s in sorted(self.series.items()):
            if not s.waiting or (s.written_at is not None and now < s.written_at + WINDOW):
                continue
            count = s.count + s.waiting
            message = (COMBINED if s.mixed else "") + s.message
            if s.name is None:
                out.append(Write(key, body=self._body(involved, key, message, count, s)))
            else:
                out.append(Write(key, name=s.name, ops=(
                    {"op": "replace", "path": "/count", "value": count},
                    {"op": "replace", "path": "/lastTimestamp", "value": iso(s.last)},
                    {"op": "replace", "path": "/message", "value": message},
                )))
        return out

    def done(self, write: Write, now: float, name: str | None = None) -> None:
        """The write went through (`name`: the created Event's); its occurrences are counted."""
        s = self.series[write.key]
        s.count, s.waiting, s.written_at = s.count + s.waiting, 0, now
        if name is not None:
            s.name = name

    def send(self, cluster: Cluster, write: Write, now: float) -> None:
        """Make one due write (the Event created, or its count patched) and count it done;
        an ApiError is the caller's to judge."""
        if write.body is not None:
            created = cluster.create(EVENTS, self.namespace, write.body)
            self.done(write, now, str(((created or {}).get("metadata") or {}).get("name") or ""))
        else:
            cluster.patch(EVENTS, self.namespace, write.name or "", list(write.ops))
            self.done(write, now)

    def lost(self, write: Write) -> None:
        """The Event to patch is gone (expired after its TTL): the next write creates a new one."""
        s = self.series[write.key]
        s.name, s.count = None, 0

    def _body(self, involved: Obj, key: tuple[str, str], message: str, count: int, s: _Series) -> Obj:
        meta = involved.get("metadata") or {}
        name = meta.get("name", "")
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": self.namespace},
            "involvedObject": {"apiVersion": involved.get("apiVersion"), "kind": involved.get("kind"), "name": name, "namespace": self.namespace, "uid": meta.get("uid")},
            "reason": key[1],
            "message": message,
            "type": key[0],
            "source": {"component": SOURCE},
            "firstTimestamp": iso(s.first),
            "lastTimestamp": iso(s.last),
            "count": count,
        }
