"""Watches over HTTP, read both as raw chunked streams (as runtime/kube.py reads them) and with
kubernetes.watch.Watch: initial state, selection changes, bookmarks, 410 on a 200 stream,
timeoutSeconds, a resourceVersion from the future."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from kubernetes import watch as kwatch
from kubernetes.client.rest import ApiException

from .fakeserverkit import (  # noqa: F401
    GROUP,
    PLURAL,
    VERSION,
    api,
    call,
    core,
    custom,
    ns,
    pod,
    raw,
    record,
    server,
)

SAFETY = 60.0  # seconds: how long an expected event or end of stream is waited for, at most


class Lines:
    """A raw watch stream read on a thread, one decoded event per line."""

    def __init__(self, resp):
        self.resp, self.events, self.done = resp, [], threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        buffer = b""
        try:
            for chunk in self.resp.stream(amt=65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    self.events.append(json.loads(line))
        except Exception as exc:
            self.events.append({"type": "BROKEN", "object": repr(exc)})
        self.done.set()

    def close(self):
        """Shut the socket down: a plain close() would wait for the reader blocked on it."""
        shutdown = getattr(self.resp, "shutdown", None)
        if shutdown is not None:
            shutdown()
        else:  # urllib3 before 2.3
            sock = self.resp._fp.fp.raw._sock
            sock.shutdown(socket.SHUT_RDWR)
        self.done.wait(SAFETY)

    def wait(self, n, seconds=None):
        """The events once there are `n` (or after `seconds`, a safety time-out a passing run
        never reaches: 5 s was reached on a loaded machine)."""
        end = time.monotonic() + (SAFETY if seconds is None else seconds)
        while len(self.events) < n and time.monotonic() < end:
            time.sleep(0.01)
        return [(e["type"], (e["object"].get("metadata") or {}).get("name") if isinstance(e["object"], dict) else None) for e in self.events]


def _watch_pods(api, ns, **kw):  # noqa: F811
    resp = core(api).list_namespaced_pod(ns, watch=True, _preload_content=False, **kw)
    return Lines(resp)


def test_a_watch_from_a_list_sees_exactly_the_later_changes(api, ns, server) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("a", labels={"job": "j"}))
    listed = call(core(api).list_namespaced_pod, ns, label_selector="job=j")
    stream = _watch_pods(api, ns, label_selector="job=j", resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=30)
    call(core(api).create_namespaced_pod, ns, pod("b", labels={"job": "j"}))
    call(core(api).create_namespaced_pod, ns, pod("other", labels={"job": "k"}))
    call(core(api).patch_namespaced_pod, "a", ns, {"metadata": {"labels": {"job": "gone"}}})  # leaves the selection
    call(core(api).patch_namespaced_pod, "other", ns, {"metadata": {"labels": {"job": "j"}}})  # enters it
    call(core(api).delete_namespaced_pod, "b", ns)
    assert stream.wait(5) == [("ADDED", "b"), ("DELETED", "a"), ("ADDED", "other"), ("MODIFIED", "b"), ("DELETED", "b")]  # b, unscheduled: marked, then gone
    deleted_a = stream.events[1]["object"]
    assert deleted_a["metadata"]["labels"] == {"job": "j"}  # the previous state, at the event's resourceVersion
    assert stream.events[0]["object"]["kind"] == "Pod"
    stream.close()


@pytest.mark.parametrize("rv", [None, "0"])
def test_an_unset_or_zero_resource_version_starts_with_the_current_objects(api, ns, rv) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("a"))
    kw = {"resource_version": rv} if rv else {}
    stream = _watch_pods(api, ns, timeout_seconds=30, **kw)
    assert stream.wait(1) == [("ADDED", "a")]
    stream.close()


def test_an_expired_resource_version_is_an_error_event_on_a_200_stream(api, ns, server) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("a"))
    since = call(core(api).list_namespaced_pod, ns)["metadata"]["resourceVersion"]
    call(core(api).create_namespaced_pod, ns, pod("b"))
    server.cluster.compact()
    resp = core(api).list_namespaced_pod(ns, watch=True, resource_version=since, _preload_content=False)
    assert resp.status == 200
    stream = Lines(resp)
    assert stream.done.wait(SAFETY)
    error = stream.events[0]
    assert error["type"] == "ERROR"
    assert error["object"] == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": f"too old resource version: {since} ({server.cluster.rv})", "reason": "Expired", "code": 410}


def test_kubernetes_watch_raises_410_for_an_expired_resource_version(api, ns, server) -> None:  # noqa: F811
    since = call(core(api).list_namespaced_pod, ns)["metadata"]["resourceVersion"]
    call(core(api).create_namespaced_pod, ns, pod("a"))
    server.cluster.compact()
    with pytest.raises(ApiException) as err:
        for _ in kwatch.Watch().stream(core(api).list_namespaced_pod, ns, resource_version=since, timeout_seconds=5):
            pass
    assert err.value.status == 410


def test_the_server_ends_a_watch_after_timeout_seconds(api, ns) -> None:  # noqa: F811
    started = time.monotonic()
    events = list(kwatch.Watch().stream(core(api).list_namespaced_pod, ns, timeout_seconds=1))
    # Ended by its own second, not the server's default (DEFAULT_WATCH_SECONDS, 30 min): the upper
    # bound leaves a busy machine any delay short of that, the lower one is the server's own clock.
    assert events == [] and 0.9 < time.monotonic() - started < 60


def test_bookmarks_carry_only_the_resource_version(api, ns, server) -> None:  # noqa: F811
    since = call(core(api).list_namespaced_pod, ns)["metadata"]["resourceVersion"]
    stream = _watch_pods(api, ns, resource_version=since, allow_watch_bookmarks=True, timeout_seconds=30)
    call(core(api).create_namespaced_pod, ns, pod("a"))
    rv = server.bookmark_all()
    assert stream.wait(2)[1][0] == "BOOKMARK"
    assert stream.events[1]["object"] == {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv), "creationTimestamp": None}, "spec": {"containers": None}, "status": {}}
    plain = _watch_pods(api, ns, resource_version=str(rv), timeout_seconds=30)  # no allowWatchBookmarks: none
    server.bookmark_all(wait=0.2)
    call(core(api).create_namespaced_pod, ns, pod("b"))  # after the bookmark: the first event it may see
    assert plain.wait(1) == [("ADDED", "b")]
    stream.close()
    plain.close()


def test_bookmark_all_is_a_barrier_after_every_earlier_event(api, ns, server) -> None:  # noqa: F811
    stream = _watch_pods(api, ns, resource_version=call(core(api).list_namespaced_pod, ns)["metadata"]["resourceVersion"], allow_watch_bookmarks=True, timeout_seconds=30)
    for i in range(20):
        call(core(api).create_namespaced_pod, ns, pod(f"p{i}"))
    rv = server.bookmark_all()
    got = stream.wait(21)
    assert [t for t, _ in got] == ["ADDED"] * 20 + ["BOOKMARK"]
    assert int(stream.events[-1]["object"]["metadata"]["resourceVersion"]) == rv
    stream.close()


def test_periodic_bookmarks(api, ns, server) -> None:  # noqa: F811
    server.bookmark_every = 0.2
    try:
        stream = _watch_pods(api, ns, allow_watch_bookmarks=True, timeout_seconds=30)
        assert [t for t, _ in stream.wait(2)][:2] == ["BOOKMARK", "BOOKMARK"]
        stream.close()
    finally:
        server.bookmark_every = 60.0


def test_a_resource_version_from_the_future_waits_then_504(api, ns, server) -> None:  # noqa: F811
    import flatjob.runtime.sim.apiserver.watch as w

    w.TOO_LARGE_WAIT, saved = 0.2, w.TOO_LARGE_WAIT
    try:
        stream = _watch_pods(api, ns, resource_version=str(server.cluster.rv + 1000), timeout_seconds=30)
        assert stream.done.wait(SAFETY)
        error = stream.events[0]["object"]
        assert (error["code"], error["reason"], error["details"]["causes"][0]["reason"]) == (504, "Timeout", "ResourceVersionTooLarge")
    finally:
        w.TOO_LARGE_WAIT = saved


def test_record_watch_by_name_with_kubernetes_watch(api, ns) -> None:  # noqa: F811
    call(custom(api).create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, record("j"))
    call(custom(api).create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, record("k"))
    got = []
    for event in kwatch.Watch().stream(custom(api).list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, field_selector="metadata.name=j", timeout_seconds=1):
        got.append((event["type"], event["object"]["metadata"]["name"]))
    assert got == [("ADDED", "j")]


def test_send_initial_events_ends_with_the_annotated_bookmark(server, ns, api) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("a"))
    code, _, _ = raw(server, "GET", f"/api/v1/namespaces/{ns}/pods?watch=1&sendInitialEvents=true&resourceVersion=5&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
    assert code == 400
    resp = core(api).list_namespaced_pod(ns, watch=True, _preload_content=False, allow_watch_bookmarks=True, send_initial_events=True, resource_version_match="NotOlderThan", timeout_seconds=30)
    stream = Lines(resp)
    assert stream.wait(2) == [("ADDED", "a"), ("BOOKMARK", None)]
    assert stream.events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    stream.close()
