"""List once, then watch: runtime.informer.Informer against the fake cluster.

- the cache follows ADDED / MODIFIED / DELETED, and poll says whether it changed;
- 410 Expired relists (objects deleted meanwhile disappear from the cache);
- a broken stream reconnects from the last resourceVersion after a capped exponential
  back-off, losing and repeating nothing (a flaky watch wrapper injects the failures); the
  informer never sleeps: it returns at once and names the time to poll it again;
- a stream the server ends (timeoutSeconds) is resumed at once, without counting an error;
- a reconnect that itself gets 410 relists; nothing a list or a watch raises escapes poll.
"""

from __future__ import annotations

from typing import Any

from flatjob.compiler import keys
from flatjob.runtime.api import ApiError, Expired
from flatjob.runtime.backoff import JITTER
from flatjob.runtime.informer import MAX_BACKOFF, Informer
from flatjob.runtime.sim.cluster import FakeCluster

NS = "default"
SELECTOR = {keys.JOB_NAME: "j"}


def pod_body(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(SELECTOR)}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


class FlakyWatch:
    """Wraps a watch; raises the queued errors first, then behaves."""

    def __init__(self, inner: Any, errors: list[Exception]):
        self.inner = inner
        self.errors = errors

    def next_events(self, timeout: float | None = None) -> list[tuple[str, dict[str, Any]]]:
        if self.errors:
            raise self.errors.pop(0)
        return self.inner.next_events(timeout)

    def close(self) -> None:
        self.inner.close()


class Harness:
    """A FakeCluster, an informer on its pods, and the failures to inject into watches."""

    def __init__(self, seed: str = "") -> None:
        self.cluster = FakeCluster()
        self.stream_errors: list[Exception] = []  # raised by the current watch's next_events
        self.connect_errors: list[Exception] = []  # raised by watch_fn itself
        self.now = 100.0
        self.watched_from: list[str] = []
        self.informer = Informer(lambda: self.cluster.list_pods(NS, SELECTOR), self._watch, clock=lambda: self.now, name="pods", seed=seed)

    def back_off(self) -> float:
        """Seconds until the informer wants to be polled again (0 when it is watching), with
        the jitter taken off: the step it is on (1, 2, 4 ... 30)."""
        if self.informer.retry_at is None:
            return 0.0
        wait = self.informer.retry_at - self.now
        return next((b for b in (1.0, 2.0, 4.0, 8.0, 16.0, MAX_BACKOFF) if b <= wait <= b * (1 + JITTER)), wait)

    def poll_when_due(self) -> bool:
        if self.informer.retry_at is not None:
            self.now = max(self.now, self.informer.retry_at)
        return self.informer.poll()

    def _watch(self, rv: str) -> Any:
        self.watched_from.append(rv)
        if self.connect_errors:
            raise self.connect_errors.pop(0)
        return FlakyWatch(self.cluster.watch_pods(NS, SELECTOR, rv), self.stream_errors)

    def names(self) -> list[str]:
        return sorted(self.informer.cache)


def test_the_cache_follows_the_watch() -> None:
    h = Harness()
    h.cluster.create_pod(NS, pod_body("j-worker-0"))
    h.informer.start()
    assert h.names() == ["j-worker-0"] and h.informer.synced and h.informer.relists == 1
    assert h.informer.poll() is False  # nothing new
    h.cluster.create_pod(NS, pod_body("j-worker-1"))
    h.cluster.set_pod_status(NS, "j-worker-0", {"phase": "Running"})
    assert h.informer.poll() is True
    assert h.informer.get("j-worker-0")["status"]["phase"] == "Running"
    h.cluster.delete_pod(NS, "j-worker-1", None)
    assert h.informer.poll() is True
    assert h.names() == ["j-worker-0"]
    assert h.informer.resource_version == str(h.cluster.rv)


def test_an_event_equal_to_the_cache_is_no_change() -> None:
    # The controller puts the objects it writes into the cache; their watch events are no news.
    h = Harness()
    h.informer.start()
    h.informer.cache["j-worker-0"] = h.cluster.create_pod(NS, pod_body("j-worker-0"))
    assert h.informer.poll() is False


def test_410_relists() -> None:
    h = Harness()
    h.cluster.create_pod(NS, pod_body("j-worker-0"))
    h.cluster.create_pod(NS, pod_body("j-worker-1"))
    h.informer.start()
    h.cluster.delete_pod(NS, "j-worker-0", None)
    h.cluster.create_pod(NS, pod_body("j-worker-2"))
    h.cluster.compact()
    assert h.informer.poll() is True
    assert h.informer.relists == 2
    assert h.names() == ["j-worker-1", "j-worker-2"]
    h.cluster.create_pod(NS, pod_body("j-worker-3"))
    assert h.informer.poll() is True and h.names() == ["j-worker-1", "j-worker-2", "j-worker-3"]


def test_a_broken_stream_reconnects_from_the_last_version_without_loss() -> None:
    h = Harness()
    h.informer.start()
    h.cluster.create_pod(NS, pod_body("j-worker-0"))
    assert h.informer.poll() is True
    seen = h.informer.resource_version
    h.stream_errors.append(ApiError("stream reset"))
    h.cluster.create_pod(NS, pod_body("j-worker-1"))  # arrives while the stream is broken
    assert h.informer.poll() is False
    assert h.back_off() == 1.0 and h.informer.errors == 1
    h.now += 0.9  # not due yet: the wait is 1 s and up to 20 % more
    assert h.informer.poll() is False  # no reconnect, no sleep
    assert h.informer.reconnects == 0
    assert h.poll_when_due() is False
    assert (h.informer.errors, h.informer.reconnects, h.informer.relists) == (1, 1, 1)
    assert h.watched_from[-1] == seen
    assert h.informer.poll() is True
    assert h.names() == ["j-worker-0", "j-worker-1"]


def test_any_exception_is_a_stream_error() -> None:
    h = Harness()
    h.informer.start()
    h.stream_errors.append(ConnectionResetError("peer reset"))
    assert h.informer.poll() is False and h.informer.errors == 1
    h.stream_errors.append(KeyError("a bug"))
    assert h.poll_when_due() is False and h.informer.reconnects == 1
    assert h.informer.poll() is False and h.informer.errors == 2


def test_back_off_doubles_is_capped_and_resets_after_success() -> None:
    h = Harness()
    h.informer.start()
    h.stream_errors.append(ApiError("reset"))
    h.connect_errors.extend(ApiError("down") for _ in range(7))  # the API server is away a while
    waits = []
    h.informer.poll()
    for _ in range(8):
        waits.append(h.back_off())
        h.poll_when_due()
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, MAX_BACKOFF, MAX_BACKOFF, MAX_BACKOFF]
    assert h.informer.reconnects == 1  # the eighth attempt connected
    h.cluster.create_pod(NS, pod_body("j-worker-0"))
    assert h.informer.poll() is True
    h.stream_errors.append(ApiError("reset"))
    h.informer.poll()
    assert h.back_off() == 1.0


def test_two_runtime_processes_retry_after_different_jitter() -> None:
    """The same informer in two processes (namespaces, a rollout) backs off by the same steps
    but different jitter, seeded by the process's identity: after an API server outage they do
    not all relist at the same instants (review 24, round 5: seeded by the informer's name alone)."""
    waits = {}
    for identity in ("flatjob-7d9f-abcde", "flatjob-5c44-xyz12"):
        h = Harness(seed=identity)
        h.informer.start()
        h.connect_errors.extend(ApiError("down") for _ in range(6))
        h.stream_errors.append(ApiError("reset"))
        h.informer.poll()
        waits[identity] = []
        for _ in range(6):
            waits[identity].append(h.informer.retry_at - h.now)
            h.poll_when_due()
    first, second = waits.values()
    assert first != second and all(abs(a - b) < a * JITTER + 1e-9 for a, b in zip(first, second, strict=True))


def test_a_retry_after_from_the_server_is_waited_out() -> None:
    """429 with Retry-After: 7 (client-go checkWait): no retry before 7 s, however early the back-off."""
    h = Harness()
    h.informer.start()
    h.stream_errors.append(ApiError("reset"))
    h.connect_errors.append(ApiError("429 TooManyRequests: slow down", 429, "TooManyRequests", retry_after=7.0))
    h.informer.poll()
    h.poll_when_due()
    assert h.informer.retry_at is not None and h.informer.retry_at - h.now == 7.0


def test_a_stream_the_server_ends_is_resumed_at_once() -> None:
    h = Harness()
    h.informer.start()
    h.now += 300  # the server's timeoutSeconds
    h.stream_errors.append(ApiError("watch stream closed", 0, "StreamClosed"))
    assert h.informer.poll() is False
    assert (h.informer.errors, h.informer.reconnects, h.back_off()) == (0, 1, 0.0)
    h.stream_errors.append(ApiError("watch stream closed", 0, "StreamClosed"))  # at once again: not a time-out
    h.informer.poll()
    assert h.informer.errors == 1 and h.back_off() == 1.0


def test_a_reconnect_that_gets_410_relists() -> None:
    h = Harness()
    h.cluster.create_pod(NS, pod_body("j-worker-0"))
    h.informer.start()
    h.stream_errors.append(ApiError("reset"))
    h.connect_errors.append(Expired("too old"))
    h.cluster.delete_pod(NS, "j-worker-0", None)
    h.informer.poll()
    assert h.poll_when_due() is True
    assert h.informer.relists == 2
    assert h.names() == []


def test_a_failed_start_is_retried() -> None:
    h = Harness()
    h.connect_errors.append(ApiError("down"))  # the list worked, the watch did not open
    assert h.informer.start() is False and h.informer.retry_at is not None
    assert h.poll_when_due() is True and h.informer.relists == 2 and h.informer.retry_at is None


def test_silence_is_measured_from_the_last_answer() -> None:
    h = Harness()
    h.informer.start()
    h.now += 50
    assert h.informer.silent_for() == 50
    h.cluster.create_pod(NS, pod_body("j-worker-0"))
    h.informer.poll()
    assert h.informer.silent_for() == 0


def test_bookmarks_move_the_version_only() -> None:
    h = Harness()
    h.informer.start()
    changed = h.informer._apply("BOOKMARK", {"metadata": {"resourceVersion": "99"}})
    assert changed is False and h.informer.resource_version == "99" and h.names() == []


def test_events_older_than_the_runtimes_own_write_never_take_the_cache_back() -> None:
    """The runtime caches its write's answer (`written`) before the watch delivers the events
    made before it, which may come in a later read: applied then, they took the cache back, a
    released pod read gated again (review 23, round 15)."""
    h = Harness()
    h.informer.start()
    older = h.cluster.create_pod(NS, pod_body("j-worker-0"))
    h.cluster.set_pod_status(NS, "j-worker-0", {"phase": "Running", "message": "the runtime's write"})
    answer = h.cluster.list_pods(NS, SELECTOR)[0][0]  # what the write's answer carries: the newest object
    h.informer.written("j-worker-0", lambda _keep: answer, lambda o: o)
    assert h.informer._apply("ADDED", older) is False  # delivered after the answer: older, not applied
    assert h.informer.get("j-worker-0")["status"].get("message") == "the runtime's write"
    h.informer.poll()
    h.cluster.set_pod_status(NS, "j-worker-0", {"phase": "Succeeded"})
    assert h.informer.poll() is True and h.informer.get("j-worker-0")["status"]["phase"] == "Succeeded"


def test_the_deletion_of_an_earlier_incarnation_never_drops_its_successor() -> None:
    h = Harness()
    h.informer.start()
    h.cluster.create_pod(NS, pod_body("j-worker-0"))
    assert h.informer.poll() is True
    first = h.informer.get("j-worker-0")
    h.cluster.delete_pod(NS, "j-worker-0", 0)
    successor = h.cluster.create_pod(NS, pod_body("j-worker-0"))  # made before the DELETED was read
    h.informer.written("j-worker-0", lambda _keep: successor, lambda o: o)
    gone = {**first, "metadata": {**first["metadata"], "resourceVersion": str(int(successor["metadata"]["resourceVersion"]) - 1)}}
    assert h.informer._apply("DELETED", gone) is False
    assert h.informer.get("j-worker-0")["metadata"]["uid"] == successor["metadata"]["uid"] != first["metadata"]["uid"]


def test_an_opaque_resource_version_is_taken_as_it_comes() -> None:
    h = Harness()
    h.informer.start()
    h.informer.store({"metadata": {"name": "j-worker-0", "resourceVersion": "abc"}})
    h.informer._apply("MODIFIED", {"metadata": {"name": "j-worker-0", "resourceVersion": "1", "labels": {"x": "y"}}})
    assert h.informer.get("j-worker-0")["metadata"]["labels"] == {"x": "y"}


def test_a_deleted_objects_last_state_is_kept_a_while_for_cached_names_only_and_bounded() -> None:
    """The DELETED event's object judges a pod that ended before its deletion (outcomes.
    ended_before_deleted): kept GONE_KEEP seconds, only for names the cache held (a stub or a
    name turned away leaves nothing), and at most GONE_CAP, oldest first (a tenant deleting
    pods in bulk grows nothing beyond)."""
    from flatjob.runtime import informer as mod

    now = [0.0]
    inf = mod.Informer(lambda: ([], "1"), lambda rv: iter(()), clock=lambda: now[0])

    def pod(name: str, rv: int) -> dict[str, Any]:
        return {"metadata": {"name": name, "resourceVersion": str(rv), "labels": {}}}

    inf.store(pod("a", 1))
    inf._apply("DELETED", pod("a", 2))
    inf._apply("DELETED", pod("never-cached", 3))
    assert set(inf.gone_of(None)) == {"a"}
    now[0] = mod.GONE_KEEP + 1
    assert inf.gone_of(None) == {}
    for i in range(mod.GONE_CAP + 10):
        inf.store(pod(f"p{i}", 10 + 2 * i))
        inf._apply("DELETED", pod(f"p{i}", 11 + 2 * i))
    assert len(inf.gone) == mod.GONE_CAP and "p0" not in inf.gone and f"p{mod.GONE_CAP + 9}" in inf.gone
