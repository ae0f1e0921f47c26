"""The fake Kubernetes API server over HTTP: kube-apiserver's URLs in front of a FakeCluster.

FakeApiServer serves runtime.sim.cluster's store on 127.0.0.1 (an ephemeral port) to the real
`kubernetes` client: the REST paths (/api/v1/namespaces/<ns>/<plural>/<name>/<subresource>,
/apis/<group>/<version>/...), the verbs (GET, list, watch, POST, PUT, PATCH, DELETE), the query
parameters the client sends, `Status` error bodies with their HTTP codes, `Warning` headers,
the patch content types, discovery (/api, /apis, /version) and watches as chunked streams of
one JSON event per line that end after `timeoutSeconds` (1800 s when unset; kube-apiserver
picks 1800-3600 s).  The rules themselves are the store's: runtime/sim/cluster.py lists them.

Test controls, for chaos and lockstep tests: stop_serving()/resume_serving() (connections
refused meanwhile, every open connection dropped), drop_watches(), half_open_watches()
(sockets stay open, nothing more is ever sent), bookmark_all() (a BOOKMARK at the current
resourceVersion on every watch that allows bookmarks, after all earlier events; returns that
resourceVersion), `requests` (a Counter by (verb, resource)), `log` (one entry per request),
`on_request` (called with verb, resource, namespace, name and User-Agent; it may raise
ConnectionAbort to drop the request unanswered),
kubeconfig(path), api_client(), and close(), which leaves no thread behind.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..api import ApiError, Obj
from .apiserver import kinds, status
from .apiserver.kinds import Resource
from .apiserver.store import compact_json
from .apiserver.watch import Watch
from .cluster import FakeCluster

MAX_BODY = 3 * 1024 * 1024  # k8s.io/apiserver/pkg/server/config.go MaxRequestBodyBytes
DEFAULT_WATCH_SECONDS = 1800.0  # minRequestTimeout; kube-apiserver randomizes up to twice that
BOOKMARK_EVERY = 60.0  # the watch cache's bookmarkFrequency
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "apply",
}
VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-flatjob-fake", "gitCommit": "", "gitTreeState": "clean",
           "buildDate": "1970-01-01T00:00:00Z", "goVersion": "go1.23", "compiler": "gc", "platform": "linux/amd64"}


class ConnectionAbort(Exception):
    """Raised by an `on_request` hook: the request's connection is closed without an answer."""


@dataclass(frozen=True)
class Request:
    """One request as the log keeps it (never its body: Secrets travel in bodies)."""

    method: str
    path: str
    verb: str  # get list watch create update patch delete
    resource: str  # plural[.group][/subresource]
    namespace: str | None
    name: str | None
    code: int
    agent: str = ""  # the client's User-Agent (the runtime names its process there)
    query: str = ""  # the raw query string (selectors, watch parameters)


@dataclass(eq=False)
class _Stream:
    """An open watch connection."""

    watch: Watch
    sock: socket.socket
    bookmarks: bool
    frozen: bool = False
    dropped: bool = False
    sent_bookmark: int = 0


@dataclass
class _Route:
    res: Resource | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""
    info: Obj | None = None  # a discovery document
    text: str | None = None  # a plain-text answer (healthz)


def _flag(query: dict[str, list[str]], key: str) -> bool:
    return (query.get(key) or ["false"])[-1].lower() in ("true", "1")


def _one(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[-1] if values else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    _log_as: Callable[[int], None] | None = None  # logs the request being served, once
    _raw: bytes | None = b""  # the request's body, read first (None: over the limit, unread)
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is `FakeApiServer.log`."""

    # --- answering -------------------------------------------------------------------------------
    def _send(self, code: int, body: Obj | str, warnings: list[str] = (), retry_after: float | None = None) -> None:  # type: ignore[assignment]
        data = body.encode() if isinstance(body, str) else compact_json(body)
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8" if isinstance(body, str) else "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        if retry_after is not None:  # APF and max-in-flight's 429 (filters/maxinflight.go tooManyRequests), a 5xx's ServerTimeout: seconds
            self.send_header("Retry-After", str(int(retry_after)))
        for w in warnings:
            self.send_header("Warning", "299 - " + json.dumps(w))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, exc: ApiError) -> int:
        body = status.body_of(exc)
        self._send(body["code"], body, retry_after=exc.retry_after)
        return body["code"]

    def _read(self) -> None:
        """Read the request's body before anything can answer: an answer sent while the body is
        still unread leaves it in the connection, where a keep-alive client's next request would
        be parsed from it.  A body over the limit is not read; the connection closes after the
        413 instead."""
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._raw, self.close_connection = None, True
        else:
            self._raw = self.rfile.read(length) if length else b""

    def _body(self) -> Any:
        raw = self._raw
        if raw is None:
            raise status.too_large_body(MAX_BODY)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise status.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None
        except RecursionError:  # not emulated: kube-apiserver takes 10 000 levels (sigs.k8s.io/json maxDepth)
            raise status.bad_request("json parse error: nested deeper than this fake API server decodes") from None

    # --- the verbs ---------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        self._read()
        api: FakeApiServer = self.server.api
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        route = _route(url.path)
        verb = _verb(method, route, query)
        resource = ""
        if route.res is not None:
            resource = route.res.plural + (f".{route.res.group}" if route.res.group else "") + (f"/{route.subresource}" if route.subresource else "")
        code = 0
        agent = self.headers.get("User-Agent") or ""
        # Logged when the status line goes out (send_response), so a client that has its answer
        # finds its request in the log; a request that got no answer is logged at the end.
        self._log_as = lambda code: api._record(Request(method, url.path, verb, resource, route.namespace, route.name, code, agent, url.query))
        try:
            if api.on_request is not None:
                api.on_request(verb, resource, route.namespace, route.name, agent)
            code = self._dispatch(method, verb, route, query)
        except ConnectionAbort:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            code = -1
        except ApiError as exc:
            code = self._error(exc)
        finally:
            if self._log_as is not None:
                self._log_as(code)
            self._log_as = None

    def send_response(self, code: int, message: str | None = None) -> None:
        """The status line; the request enters the log now, before the client can read an answer."""
        if self._log_as is not None:
            log_as, self._log_as = self._log_as, None
            log_as(code)
        super().send_response(code, message)

    def _dispatch(self, method: str, verb: str, route: _Route, query: dict[str, list[str]]) -> int:
        if route.text is not None:
            self._send(200, route.text)
            return 200
        if route.info is not None:
            self._send(200, route.info)
            return 200
        res = route.res
        if res is None:
            raise status.error(404, "NotFound", "the server could not find the requested resource", {})
        if route.subresource not in ("", *res.subresources):
            raise status.error(404, "NotFound", "the server could not find the requested resource", {})
        if _one(query, "dryRun"):
            raise status.bad_request("dryRun is not emulated by the fake API server")
        store = self.server.api.cluster.store
        manager = _one(query, "fieldManager") or (self.headers.get("User-Agent") or "unknown").split("/")[0][:128]
        strict = (_one(query, "fieldValidation") or "").lower() == "strict"
        ns, name, sub = route.namespace, route.name, route.subresource
        if verb == "watch":
            return self._watch(res, ns, query)
        if verb == "list":
            self._send(200, store.list(res, ns, _one(query, "labelSelector"), _one(query, "fieldSelector"), int(_one(query, "limit") or 0), _one(query, "continue")))
            return 200
        if ns is None:
            raise status.method_not_allowed(method, res.plural)
        handlers: dict[str, Callable[[], tuple[int, Obj, list[str]]]] = {
            "get": lambda: (200, store.get(res, ns, name or "", sub), []),
            "create": lambda: (201, *store.create(res, ns, self._body(), manager, strict)),
            "update": lambda: (200, *store.update(res, ns, name or "", self._body(), sub, manager, strict)),
            "patch": lambda: self._patch(res, ns, name or "", sub, manager, strict),
            "delete": lambda: (200, store.delete(res, ns, name or "", self._delete_options(query)), []),
            "bind": lambda: self._bind(ns, name or ""),
        }
        if verb not in handlers:
            raise status.method_not_allowed(method, res.plural)
        code, body, warnings = handlers[verb]()
        self._send(code, body, warnings)
        return code

    def _patch(self, res: Resource, ns: str, name: str, sub: str, manager: str, strict: bool) -> tuple[int, Obj, list[str]]:
        kind = PATCH_TYPES.get((self.headers.get("Content-Type") or "").split(";")[0].strip())
        if kind is None or kind == "apply":
            raise status.not_acceptable_patch("application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
                                              + ("" if kind is None else "; server-side apply is not emulated by the fake API server"))
        store = self.server.api.cluster.store
        return (200, *store.patch(res, ns, name, kind, self._body(), sub, manager, strict))

    def _bind(self, ns: str, name: str) -> tuple[int, Obj, list[str]]:
        body = self._body() or {}
        node = (body.get("target") or {}).get("name")
        if not node:
            raise status.invalid("", "Binding", name, [status.required("target.name")])
        self.server.api.cluster.store.bind(ns, name, node)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, []

    def _delete_options(self, query: dict[str, list[str]]) -> Obj:
        options = self._body() or {}
        if not isinstance(options, dict):
            raise status.bad_request("the body of a delete is not DeleteOptions")
        grace = _one(query, "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = int(grace)
        policy = _one(query, "propagationPolicy")
        if policy is not None:
            options["propagationPolicy"] = policy
        return options

    # --- watches -------------------------------------------------------------------------------------
    def _watch(self, res: Resource, ns: str | None, query: dict[str, list[str]]) -> int:
        api: FakeApiServer = self.server.api
        store = api.cluster.store
        bookmarks = _flag(query, "allowWatchBookmarks")
        watch = store.watch(res, ns, _one(query, "labelSelector"), _one(query, "fieldSelector"), _one(query, "resourceVersion"), bookmarks, _flag(query, "sendInitialEvents"))
        seconds = float(_one(query, "timeoutSeconds") or api.default_watch_seconds)
        stream = _Stream(watch, self.connection, bookmarks, frozen=api.half_open_new)
        # Counted open before its headers go out: a client that has its answer may drop or
        # freeze the watch at once (drop_watches, half_open_watches), and must find it there.
        api._open(stream)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            self.close_connection = True
            self._stream(stream, time.monotonic() + seconds)
        except OSError:
            pass
        finally:
            api._closed(stream)
            watch.close()
        return 200

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _next_bookmark(self, now: float, deadline: float) -> float:
        """cache_watcher.go nextBookmarkTime: every minute, and 2 s before the deadline; none
        when that moment has passed."""
        when = min(now + self.server.api.bookmark_every, deadline - 2)
        return when if when >= now else float("inf")

    def _stream(self, stream: _Stream, deadline: float) -> None:
        api: FakeApiServer = self.server.api
        store, watch = api.cluster.store, stream.watch
        if watch.cursor > store.rv:
            late = watch.too_large()
            if late is not None:
                self._chunk(compact_json({"type": "ERROR", "object": late}) + b"\n")
                self._chunk(b"")
                return
        next_bookmark = self._next_bookmark(time.monotonic(), deadline)
        while True:
            until = min(deadline, next_bookmark)
            with store.changed:
                store.changed.wait_for(lambda until=until: api._stopping or stream.dropped or (not stream.frozen and watch.ready()) or time.monotonic() >= until, 0.25)
                if api._stopping or stream.dropped:
                    return
                if stream.frozen:
                    continue  # half-open: the socket stays, nothing is ever sent again
                now = time.monotonic()
                if now >= deadline:
                    break
                if stream.bookmarks and now >= next_bookmark:
                    watch.bookmark_now = True
                    next_bookmark = self._next_bookmark(now, deadline)
                events = watch.drain()
                sent = watch.bookmark_sent
            for etype, obj in events:
                self._chunk(compact_json({"type": etype, "object": obj}) + b"\n")
            if events and events[-1][0] == "ERROR":
                break
            if sent > stream.sent_bookmark:
                api._bookmarked(stream, sent)
        self._chunk(b"")  # the server ends the stream (timeoutSeconds)


class _HttpServer(HTTPServer):
    allow_reuse_address = True
    # The listen backlog: socketserver's default of 5 overflowed when a namespace runtime's
    # cycle threads opened connections at once (the 500-job bench: connections reset, status
    # writes retried a second later); Go's net.Listen, kube-apiserver's, asks for somaxconn.
    request_queue_size = 1024
    api: FakeApiServer

    def process_request(self, request: Any, client_address: Any) -> None:
        """One daemon thread per connection (a test that never closes its server must not hang
        at exit); the server tracks them itself and joins them on close.  Nagle's algorithm is
        off, as on every Go server (net.TCPConn's default): a response's body and each watch
        event would otherwise wait for the client's delayed ACK of the previous write, 40 ms."""
        with contextlib.suppress(OSError):
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.api._connect(request)
        thread = threading.Thread(target=self._handle, args=(request, client_address), name=f"fakeapi-conn:{client_address[1]}", daemon=True)
        self.api._handlers.add(thread)
        thread.start()

    def _handle(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except OSError:
            pass  # the client went away, or a chaos control dropped the connection
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self.api._handlers.discard(threading.current_thread())

    def shutdown_request(self, request: Any) -> None:
        self.api._disconnect(request)
        super().shutdown_request(request)


def _verb(method: str, route: _Route, query: dict[str, list[str]]) -> str:
    if route.subresource == "binding" and method == "POST":
        return "bind"
    if method == "GET":
        if route.name is None:
            return "watch" if _flag(query, "watch") else "list"
        return "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method] if route.name or method == "POST" else "deletecollection"


def _route(path: str) -> _Route:
    parts = [unquote(p) for p in path.strip("/").split("/") if p]
    if path in ("/healthz", "/readyz", "/livez"):
        return _Route(text="ok")
    if parts == ["version"]:
        return _Route(info=VERSION)
    if parts[:1] == ["api"]:
        group, rest = "", parts[1:]
    elif parts[:1] == ["apis"]:
        if len(parts) == 1:
            return _Route(info=_groups())
        if len(parts) == 2:
            return _Route(info=_group(parts[1]))
        group, rest = parts[1], parts[2:]
    else:
        return _Route()
    if not rest:
        return _Route(info={"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
    version, rest = rest[0], rest[1:]
    if not rest:
        return _Route(info=_resource_list(group, version))
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    res = kinds.by_path(group, version, rest[0])
    return _Route(res, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else "")


def _groups() -> Obj:
    groups: dict[str, str] = {}
    for r in kinds.resources():
        if r.group:
            groups.setdefault(r.group, r.version)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in sorted(groups)]}


def _group(group: str) -> Obj:
    version = next((r.version for r in kinds.resources() if r.group == group), None)
    if version is None:
        return {}
    gv = {"groupVersion": f"{group}/{version}", "version": version}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv], "preferredVersion": gv}


def _resource_list(group: str, version: str) -> Obj:
    out = []
    for r in kinds.resources():
        if r.group == group and r.version == version:
            out.append({"name": r.plural, "singularName": r.singular, "namespaced": True, "kind": r.kind, "verbs": list(r.verbs), **({"shortNames": list(r.short_names)} if r.short_names else {})})
            for sub in r.subresources:
                verbs = ["create"] if sub == "binding" else ["get", "patch", "update"]
                kind = {"scale": "Scale", "binding": "Binding"}.get(sub, r.kind)
                out.append({"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": True, "kind": kind, "verbs": verbs})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version, "resources": out}


@dataclass(eq=False)
class FakeApiServer:
    """A FakeCluster served over HTTP on 127.0.0.1 (see the module docstring)."""

    cluster: FakeCluster = field(default_factory=lambda: FakeCluster(time.time))
    port: int = 0
    bookmark_every: float = BOOKMARK_EVERY
    default_watch_seconds: float = DEFAULT_WATCH_SECONDS
    on_request: Callable[[str, str, str | None, str | None, str], None] | None = None  # verb, resource, namespace, name, User-Agent
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    log: list[Request] = field(default_factory=list)
    half_open_new: bool = False  # new watches start half-open

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        self._streams: set[_Stream] = set()
        self._stopping = False
        self._server: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self.resume_serving()

    # --- life cycle ----------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def serving(self) -> bool:
        return self._server is not None

    def resume_serving(self) -> None:
        """Listen (again) on the same port."""
        if self._server is not None:
            return
        server = _HttpServer(("127.0.0.1", self.port), _Handler)
        server.api = self
        self.port = server.server_address[1]
        self._stopping = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"fakeapi:{self.port}", daemon=True)
        self._thread.start()

    def stop_serving(self) -> None:
        """Stop listening (connections are refused) and drop every open connection."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = None
        with self.cluster.store.changed:
            self._stopping = True
            self.cluster.store.changed.notify_all()
        server.shutdown()
        server.socket.close()
        with self._lock:
            for sock in list(self._connections):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        server.server_close()
        for handler in list(self._handlers):
            handler.join()
        if thread is not None:
            thread.join()

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """Connections refused inside the block."""
        self.stop_serving()
        try:
            yield
        finally:
            self.resume_serving()

    def close(self) -> None:
        """Stop for good: no thread is left behind."""
        self.stop_serving()

    def __enter__(self) -> FakeApiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- chaos controls --------------------------------------------------------------------------------
    def drop_watches(self) -> int:
        """Close every open watch connection abruptly (mid-stream); returns how many."""
        with self._lock:
            streams = list(self._streams)
        with self.cluster.store.changed:
            for s in streams:
                s.dropped = True
            self.cluster.store.changed.notify_all()
        for s in streams:
            with contextlib.suppress(OSError):
                s.sock.shutdown(socket.SHUT_RDWR)
        return len(streams)

    def half_open_watches(self) -> int:
        """Leave every open watch half-open: its socket stays open and nothing more is sent."""
        with self._lock:
            streams = list(self._streams)
        with self.cluster.store.changed:
            for s in streams:
                s.frozen = True
        return len(streams)

    def bookmark_all(self, wait: float | None = 5.0) -> int:
        """A BOOKMARK at the current resourceVersion on every watch that allows bookmarks, sent
        after every earlier event; waits (up to `wait` s) until each is written; returns the
        resourceVersion."""
        rv = self.cluster.store.bookmark_all()
        if wait:
            end = time.monotonic() + wait
            with self._bookmarks:
                self._bookmarks.wait_for(lambda: all(s.sent_bookmark >= rv for s in self._live_bookmarking()), max(0.0, end - time.monotonic()))
        return rv

    def _live_bookmarking(self) -> list[_Stream]:
        return [s for s in self._streams if s.bookmarks and not s.frozen and not s.dropped and not s.watch.failed]

    # --- bookkeeping -----------------------------------------------------------------------------------
    @property
    def _bookmarks(self) -> threading.Condition:
        cond = self.__dict__.get("_bookmark_cond")
        if cond is None:
            cond = self.__dict__["_bookmark_cond"] = threading.Condition(self._lock)
        return cond

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests[(request.verb, request.resource)] += 1
            self.log.append(request)

    def _connect(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.add(sock)

    def _disconnect(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.discard(sock)

    def _open(self, stream: _Stream) -> None:
        with self._lock:
            self._streams.add(stream)

    def _closed(self, stream: _Stream) -> None:
        with self._bookmarks:
            self._streams.discard(stream)
            self._bookmarks.notify_all()

    def _bookmarked(self, stream: _Stream, rv: int) -> None:
        with self._bookmarks:
            stream.sent_bookmark = rv
            self._bookmarks.notify_all()

    @property
    def open_watches(self) -> int:
        with self._lock:
            return len(self._streams)

    # --- clients -------------------------------------------------------------------------------------
    def kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        """Write a kubeconfig that points at this server; returns its path."""
        import yaml

        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "flatjob-fake",
            "clusters": [{"name": "flatjob-fake", "cluster": {"server": self.url}}],
            "users": [{"name": "flatjob-fake", "user": {"token": "flatjob-fake"}}],
            "contexts": [{"name": "flatjob-fake", "context": {"cluster": "flatjob-fake", "user": "flatjob-fake", "namespace": namespace}}],
        }
        out = Path(path)
        out.write_text(yaml.safe_dump(config, sort_keys=False))
        return out

    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient configured for this server (imports the client lazily)."""
        from kubernetes import client

        config = client.Configuration()
        config.host = self.url
        config.api_key = {"authorization": "Bearer flatjob-fake"}
        return client.ApiClient(config)
