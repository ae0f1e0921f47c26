"""runtime.kube on the wire, against scripted HTTP answers the fake API server never gives.

The fake API server (runtime.sim.server) behaves like kube-apiserver; these cases are what a
real network and a real server can also do: an HTML 502 from a proxy, a body that is not
JSON, a reset or refused connection, a server that never answers (read time-out), a watch
line that is not JSON, a list split over `continue` pages.  Every one must surface as a
runtime.api.ApiError (or a watch that ends), never as a urllib3 or JSON exception.
Request bodies are checked byte for byte: plain JSON, integer quantities kept as integers.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

pytest.importorskip("kubernetes")

from kubernetes import client

from flatjob.runtime.api import (
    PODS,
    AlreadyExists,
    ApiError,
    Conflict,
    Expired,
    Forbidden,
    Invalid,
    NotFound,
    Unreachable,
    record_resource,
)
from flatjob.runtime.kube import (
    LIST_RESTARTS,
    PAGE_BYTES,
    PAGE_VALUES,
    KubeCluster,
    NoClusterConfig,
    Timeouts,
    json_values,
    load_configuration,
    path,
)

Handler = Callable[[BaseHTTPRequestHandler, bytes], None]
SAFETY = 30.0  # seconds


class Scripted:
    """A loopback HTTP server whose answers the test scripts, recording every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.answer: Handler = lambda h, body: send(h, 200, {})
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                outer.answer(self, body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

            def log_message(self, fmt: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def cluster(self, **timeouts: float) -> KubeCluster:
        config = client.Configuration()
        config.host = self.url
        config.api_key = {"authorization": "tok"}
        config.api_key_prefix = {"authorization": "Bearer"}
        # Safety time-outs a passing run never nears (tests of a time-out pass their own): 1 s
        # was reached under load by an answer that serializes a page of 1000s of values.
        return KubeCluster(config, Timeouts(**{"connect": SAFETY, "read": SAFETY, "watch_read": SAFETY, **timeouts}))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def send(h: BaseHTTPRequestHandler, code: int, doc: Any, content_type: str = "application/json") -> None:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    h.send_response(code)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message}


def stream(h: BaseHTTPRequestHandler, lines: list[bytes], hold: threading.Event | None = None) -> None:
    """A chunked watch response: these lines, then (unless held open) the end of the stream."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    for line in lines:
        h.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        h.wfile.flush()
    if hold is not None:
        hold.wait(5)
        return
    h.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def server() -> Iterator[Scripted]:
    s = Scripted()
    yield s
    s.close()


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [(404, "NotFound", NotFound), (409, "Conflict", Conflict), (409, "AlreadyExists", AlreadyExists), (410, "Expired", Expired), (422, "Invalid", Invalid), (403, "Forbidden", Forbidden), (500, "InternalError", ApiError)],
)
def test_status_answers_become_api_errors(server: Scripted, code: int, reason: str, expected: type) -> None:
    server.answer = lambda h, body: send(h, code, status(code, reason, f"it says {reason}"))
    with pytest.raises(expected) as err:
        server.cluster().get(PODS, "default", "p")
    assert err.value.status == code and f"it says {reason}" in str(err.value)
    assert type(err.value) is expected


def test_a_proxy_page_that_is_not_json_is_an_api_error(server: Scripted) -> None:
    server.answer = lambda h, body: send(h, 502, b"<html>Bad Gateway</html>", "text/html")
    with pytest.raises(ApiError) as err:
        server.cluster().get(PODS, "default", "p")
    assert err.value.status == 502 and "Bad Gateway" in str(err.value)


def test_a_200_that_is_not_json_is_an_api_error(server: Scripted) -> None:
    server.answer = lambda h, body: send(h, 200, b"{not json", "application/json")
    with pytest.raises(ApiError) as err:
        server.cluster().get(PODS, "default", "p")
    assert err.value.reason == "BadResponse"


def test_a_refused_connection_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    with pytest.raises(Unreachable):
        KubeCluster(config, Timeouts(connect=0.5, read=0.5)).get(PODS, "default", "p")


def test_a_server_that_never_answers_times_out(server: Scripted) -> None:
    hold = threading.Event()
    server.answer = lambda h, body: hold.wait(5)
    with pytest.raises(Unreachable) as err:
        server.cluster(read=0.3).get(PODS, "default", "p")
    hold.set()
    assert "Timeout" in str(err.value) or "timed out" in str(err.value)


def test_a_reset_mid_answer_is_unreachable(server: Scripted) -> None:
    def half(h: BaseHTTPRequestHandler, body: bytes) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "1000")
        h.end_headers()
        h.wfile.write(b'{"kind": "Pod"')
        h.wfile.flush()
        h.connection.shutdown(socket.SHUT_RDWR)

    server.answer = half
    with pytest.raises(ApiError):
        server.cluster().get(PODS, "default", "p")


def test_bodies_are_plain_json_with_integer_quantities_and_unknown_fields(server: Scripted) -> None:
    server.answer = lambda h, body: send(h, 201, json.loads(body))
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": 1.5}}}], "aFieldFromTheFuture": {"x": 1}}}
    created = server.cluster().create(PODS, "ns", pod)
    assert created == pod
    method, url, headers, body = server.requests[-1]
    assert (method, url) == ("POST", "/api/v1/namespaces/ns/pods")
    assert json.loads(body) == pod and b'"nvidia.com/gpu":1' in body
    assert headers["Content-Type"] == "application/json" and headers["Authorization"] == "Bearer tok"
    assert headers["User-Agent"].startswith("flatjob-runtime/")


def test_patch_is_a_json_patch_and_delete_carries_the_uid_precondition(server: Scripted) -> None:
    server.answer = lambda h, body: send(h, 200, {"metadata": {"name": "p"}})
    kube = server.cluster()
    kube.patch(PODS, "ns", "p", [{"op": "remove", "path": "/spec/schedulingGates/0"}])
    kube.delete(PODS, "ns", "p", "u-1")
    (m1, u1, h1, b1), (m2, u2, _, b2) = server.requests[-2:]
    assert (m1, u1, h1["Content-Type"]) == ("PATCH", "/api/v1/namespaces/ns/pods/p", "application/json-patch+json")
    assert json.loads(b1) == [{"op": "remove", "path": "/spec/schedulingGates/0"}]
    assert (m2, u2) == ("DELETE", "/api/v1/namespaces/ns/pods/p")
    assert json.loads(b2)["preconditions"] == {"uid": "u-1"} and json.loads(b2)["propagationPolicy"] == "Background"


def test_paths_of_core_custom_and_sub_resources() -> None:
    assert path(PODS, "a b", "x/y") == "/api/v1/namespaces/a%20b/pods/x%2Fy"
    assert path(record_resource("pytorchtrainingjobs"), "ns", "j", "status") == "/apis/flatjob.dev/v1beta1/namespaces/ns/pytorchtrainingjobs/j/status"


def test_lists_follow_continue_tokens_and_trim_each_page(server: Scripted) -> None:
    pages = {
        None: {"metadata": {"resourceVersion": "7", "continue": "c1"}, "items": [{"metadata": {"name": "a"}, "spec": {"big": "x" * 100}}]},
        "c1": {"metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "b"}, "spec": {"big": "y"}}]},
    }

    def answer(h: BaseHTTPRequestHandler, body: bytes) -> None:
        from urllib.parse import parse_qs, urlparse

        q = parse_qs(urlparse(h.path).query)
        send(h, 200, pages[q.get("continue", [None])[0]])

    server.answer = answer
    items, rv = server.cluster().list(PODS, "ns", labels={"k": "v"}, trim=lambda o: {"metadata": o["metadata"]})
    assert (items, rv) == ([{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}], "7")
    first, second = (r[1] for r in server.requests[-2:])
    assert "labelSelector=k%3Dv" in first and "limit=" in first and "continue=c1" in second


def _expiring(server: Scripted, expire: int) -> None:
    """Pages of one object each; the first `expire` continue tokens are too old (410)."""
    names = ["a", "b", "c"]
    expired = [0]

    def answer(h: BaseHTTPRequestHandler, body: bytes) -> None:
        from urllib.parse import parse_qs, urlparse

        q = parse_qs(urlparse(h.path).query)
        at = int(q["continue"][0]) if "continue" in q else 0
        if at and expired[0] < expire:
            expired[0] += 1
            send(h, 410, status(410, "Expired", "The provided continue parameter is too old to display a consistent list result."))
            return
        meta: dict[str, Any] = {"resourceVersion": str(9 + expired[0])}
        if at + 1 < len(names):
            meta["continue"] = str(at + 1)
        send(h, 200, {"metadata": meta, "items": [{"metadata": {"name": names[at]}}]})

    server.answer = answer


def test_a_continue_token_that_expired_lists_again_from_the_start(server: Scripted) -> None:
    """client-go's pager (FullListIfExpired): a 410 on a later page lists again from the start,
    here still in pages (the whole list in one answer could be tens of MB); the record would
    otherwise stay stale while saying Ready."""
    _expiring(server, 1)
    items, rv = server.cluster().list(PODS, "ns")
    assert ([i["metadata"]["name"] for i in items], rv) == (["a", "b", "c"], "10")
    assert all("limit=" in r[1] for r in server.requests)


def test_a_list_whose_tokens_keep_expiring_gives_up(server: Scripted) -> None:
    """Started again at most LIST_RESTARTS times, then Expired: the informer relists later, with back-off."""
    _expiring(server, 100)
    with pytest.raises(Expired):
        server.cluster().list(PODS, "ns")
    assert len(server.requests) == 2 * (LIST_RESTARTS + 1)


def test_past_a_page_too_large_the_pages_grow_back(server: Scripted) -> None:
    """One page holding a big object is read again in smaller pages; the pages after it are full
    again (1000 objects behind one big one: 13 requests, not 1000)."""
    def answer(h: BaseHTTPRequestHandler, body: bytes) -> None:
        from urllib.parse import parse_qs, urlparse

        q = parse_qs(urlparse(h.path).query)
        at, limit = int(q.get("continue", ["0"])[0]), int(q["limit"][0])
        end = min(at + limit, 1001)
        items = [{"metadata": {"name": f"o{i}"}, **({"pad": "x" * PAGE_BYTES} if i == 0 and limit > 1 else {})} for i in range(at, end)]
        send(h, 200, {"metadata": {"resourceVersion": "5", **({"continue": str(end)} if end < 1001 else {})}, "items": items})

    server.answer = answer
    items, _ = server.cluster().list(PODS, "ns")
    assert [i["metadata"]["name"] for i in items] == [f"o{i}" for i in range(1001)]
    assert [int(parse_qs(urlparse(r[1]).query)["limit"][0]) for r in server.requests] == [250, 31, 3, 1, 8, 64, 250, 250, 250, 250]


def test_a_page_of_many_small_values_is_asked_for_in_smaller_pages_and_one_object_is_parsed_whatever_it_holds(server: Scripted) -> None:
    """Bytes alone do not bound what a page costs parsed: 1.3 MB of `{"name":"a"}` is ~21 MiB of
    Python objects, and a 4 MiB page of PodTemplates holding them took the runtime to 178 MiB of
    its 128 (hx22). A page of more than PAGE_VALUES values is read again in smaller pages, down
    to one object, which is parsed (etcd bounds it)."""
    def values(i: int) -> list[int]:  # item 0 alone holds more than a page may
        return [0] * (PAGE_VALUES + 10 if i == 0 else PAGE_VALUES // 2)

    def answer(h: BaseHTTPRequestHandler, body: bytes) -> None:
        q = parse_qs(urlparse(h.path).query)
        at, limit = int(q.get("continue", ["0"])[0]), int(q["limit"][0])
        end = min(at + limit, 6)
        items = [{"metadata": {"name": f"o{i}"}, "v": values(i)} for i in range(at, end)]
        send(h, 200, {"metadata": {"resourceVersion": "5", **({"continue": str(end)} if end < 6 else {})}, "items": items})

    server.answer = answer
    items, _ = server.cluster().list(PODS, "ns", trim=lambda o: {"metadata": o["metadata"]})
    assert [i["metadata"]["name"] for i in items] == [f"o{i}" for i in range(6)]
    limits = [int(parse_qs(urlparse(r[1]).query)["limit"][0]) for r in server.requests]
    assert limits == [250, 31, 3, 1, 8, 1, 8, 1, 8, 1, 8, 1, 8]  # no page of two such objects is parsed
    assert json_values(b'{"a":[1,{"b":"c,d"}],"e":[]}') >= 7


def test_a_dense_page_is_parsed_and_trimmed_under_the_one_dense_lock(server: Scripted) -> None:
    """Ten records whose statuses someone filled with 1.3 MB of small objects (~31 MiB parsed
    each), read on several threads at once, took the namespace runtime to 136.5 MiB of its 128
    (issue 21 round 2). A text of more than nesting.DENSE_VALUES values is parsed only under
    nesting.DENSE, and its page trimmed before the lock goes, so no two are held parsed at once;
    a sparse page is parsed without it."""
    from flatjob.runtime import nesting

    def answer(h: BaseHTTPRequestHandler, body: bytes) -> None:
        q = parse_qs(urlparse(h.path).query)
        at = int(q.get("continue", ["0"])[0])
        bulk = [0] * (nesting.DENSE_VALUES + 10) if at == 0 else []
        send(h, 200, {"metadata": {"resourceVersion": "5", **({"continue": "1"} if at == 0 else {})}, "items": [{"metadata": {"name": f"o{at}"}, "v": bulk}]})

    seen: list[tuple[str, bool]] = []

    def trim(o: dict[str, Any]) -> dict[str, Any]:
        seen.append((o["metadata"]["name"], nesting.DENSE._is_owned()))  # type: ignore[attr-defined]
        return {"metadata": o["metadata"]}

    server.answer = answer
    items, _ = server.cluster().list(PODS, "ns", trim=trim)
    assert [i["metadata"]["name"] for i in items] == ["o0", "o1"]
    assert seen == [("o0", True), ("o1", False)]


def test_a_dense_text_waits_while_another_thread_holds_one_parsed() -> None:
    """nesting.loads_then: one dense text parsed (and kept parsed) in the process at a time."""
    from flatjob.runtime import nesting

    dense = json.dumps([0] * (nesting.DENSE_VALUES + 10)).encode()
    done = threading.Event()
    with nesting.DENSE:  # another thread holds one parsed
        reader = threading.Thread(target=lambda: done.set() if nesting.loads_then(dense, len) else None, daemon=True)
        reader.start()
        assert nesting.loads_then(b"[1,2]", len) == 2  # a sparse text never waits (and this thread may re-enter)
        assert not done.wait(0.2)  # (still waiting: no bound on how long it takes once free)
    assert done.wait(60)
    reader.join(60)


@pytest.mark.parametrize(("code", "header", "expected"), [(429, "7", 7.0), (503, "2", 2.0), (429, "Fri, 31 Dec 1999 23:59:59 GMT", None), (409, "5", None), (429, "99999", 300.0), (429, "²", None), (503, "9" * 5000, None)])
def test_retry_after_goes_with_a_throttled_answer(server: Scripted, code: int, header: str, expected: float | None) -> None:
    """client-go honours an integer Retry-After on a 429 or 5xx answer (rest/with_retry.go)."""
    def answer(h: BaseHTTPRequestHandler, body: bytes) -> None:
        data = json.dumps(status(code, "TooManyRequests", "slow down")).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Retry-After", header)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    server.answer = answer
    with pytest.raises(ApiError) as err:
        server.cluster().create(PODS, "ns", {"metadata": {"name": "p"}})
    assert err.value.retry_after == expected


def test_a_list_answer_that_is_not_a_list_is_an_api_error(server: Scripted) -> None:
    server.answer = lambda h, body: send(h, 200, {"kind": "Status"})
    with pytest.raises(ApiError):
        server.cluster().list(PODS, "ns")


def test_watch_events_errors_and_the_end_of_the_stream(server: Scripted) -> None:
    lines = [
        json.dumps({"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "2"}, "spec": {"x": 1}}}).encode() + b"\n",
        json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}}).encode() + b"\n",
        json.dumps({"type": "ERROR", "object": status(410, "Expired", "too old resource version: 1 (3)")}).encode() + b"\n",
    ]
    server.answer = lambda h, body: stream(h, lines)
    kube = server.cluster()
    w = kube.watch(PODS, "ns", "1", trim=lambda o: {"metadata": o["metadata"]})
    events = []
    with pytest.raises(Expired):
        for _ in range(20):
            events += w.next_events(1.0)
    assert events == [("ADDED", {"metadata": {"name": "a", "resourceVersion": "2"}}), ("BOOKMARK", {"metadata": {"resourceVersion": "3"}})]
    with pytest.raises(Expired):  # the end is final
        w.next_events(0.1)
    w.close()
    query = server.requests[-1][1]
    assert "watch=true" in query and "allowWatchBookmarks=true" in query and "timeoutSeconds=" in query and "resourceVersion=1" in query
    assert kube.notify.is_set()


def test_watches_ask_the_server_to_end_them_at_jittered_times(server: Scripted) -> None:
    """client-go's reflector asks minWatchTimeout x (1 + rand): watches opened together do not
    all end and resume together (issue 24: relists in lockstep)."""
    kube = server.cluster()
    times = [kube.watch_timeout() for _ in range(50)]
    assert all(300 <= t <= 600 for t in times) and len(set(times)) > 20
    other = type(kube)(kube.http.configuration, identity="another-runtime")
    assert [other.watch_timeout() for _ in range(50)] != times  # another process, other times


@pytest.mark.parametrize(("lines", "reason"), [([], "StreamClosed"), ([b"{not json\n"], "StreamError"), ([b'["a list"]\n'], "StreamError")])
def test_a_watch_that_ends_or_breaks_raises_once_its_events_are_read(server: Scripted, lines: list[bytes], reason: str) -> None:
    server.answer = lambda h, body: stream(h, lines)
    w = server.cluster().watch(PODS, "ns", "1")
    with pytest.raises(ApiError) as err:
        for _ in range(20):
            w.next_events(1.0)
    assert err.value.reason == reason
    w.close()


def test_a_silent_watch_ends_by_its_read_time_out(server: Scripted) -> None:
    hold = threading.Event()
    server.answer = lambda h, body: stream(h, [], hold)
    w = server.cluster(watch_read=0.3).watch(PODS, "ns", "1")
    with pytest.raises(ApiError) as err:
        for _ in range(20):
            w.next_events(0.5)
    hold.set()
    assert err.value.reason == "StreamError"
    w.close()


def test_a_watch_refused_by_the_server_is_its_status(server: Scripted) -> None:
    server.answer = lambda h, body: send(h, 403, status(403, "Forbidden", "pods is forbidden"))
    with pytest.raises(Forbidden):
        server.cluster().watch(PODS, "ns", "1")


def test_no_service_account_and_no_kubeconfig_is_no_cluster_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Outside a pod, with KUBECONFIG naming nothing: the user's to fix (`flatjob runtime`
    says so, exit 1), not the client's ConfigException escaping as an internal error."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(NoClusterConfig):
        load_configuration()
