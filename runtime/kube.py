"""The real API server behind runtime.api.Cluster: the only module that imports `kubernetes`.

From the `kubernetes` client it takes what is stable across its versions: loading the
kubeconfig or the in-cluster config (TLS, client certificates, tokens and their refresh
hook, exec plugins) and the urllib3 pool built from it.  Requests and responses are plain
JSON on kube-apiserver's REST paths.  The client's typed models are never used: from v3x
they validate bodies into pydantic classes that refuse integer quantities (`nvidia.com/gpu:
1` raised before any request was sent) and drop fields the client version does not know.

Every failure a call can meet (an HTTP error status, a refused or reset connection, a
time-out, a body that is not JSON) becomes a runtime.api.ApiError, so nothing else escapes
into the controller.  Every call has a connect and a read time-out; watches read with a
time-out above the API server's bookmark interval and are reconnected by the informer.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from kubernetes import client, config

from flatjob.compiler import keys
from flatjob.compiler.digits import INT64_MAX, bounded
from flatjob.compiler.version import __version__

from . import nesting, sieve
from .api import (
    AlreadyExists,
    ApiError,
    Conflict,
    Expired,
    Forbidden,
    Invalid,
    Lift,
    NotFound,
    Obj,
    Resource,
    TooLarge,
    Unreachable,
)
from .backoff import seeded

_ERRORS: dict[int, type[ApiError]] = {403: Forbidden, 404: NotFound, 409: Conflict, 410: Expired, 413: TooLarge, 422: Invalid}
PAGE = 250  # objects per list page: bounds the memory one response takes before trimming
PAGE_BYTES = 4 * 1024 * 1024  # ... and so does this (a page over it is asked for again in smaller pages)
# ... and this, since bytes alone do not bound what a page costs parsed: 1.3 MB of `{"name":"a"}`
# env items, which a PodTemplate or pod anyone may make can hold, is ~21 MiB of Python objects
# (a 4 MiB page of them, ~60 MiB: 100 junk PodTemplates took the runtime to 178 MiB of its 128),
# where a page of 250 compiled pods is ~150 000 values. A page over it is asked for again in
# smaller pages, down to one object, which is parsed whatever it holds (etcd bounds it).
PAGE_VALUES = 250_000
LIST_RESTARTS = 2  # a list whose continue token expired is started again at most this often
BACKLOG = 2048  # events a watch may hold before its reader waits (TCP then pushes back)
USER_AGENT = f"flatjob-runtime/{__version__}"
RETRY_AFTER_CAP = 300  # seconds: a longer Retry-After is taken as this


class PageTooLarge(ApiError):
    """A list page larger than PAGE_BYTES, or of more than PAGE_VALUES values (not parsed)."""


json_values = nesting.json_values


@dataclass(frozen=True)
class Timeouts:
    """Seconds; `watch_read` must exceed the API server's bookmark interval (one minute)."""

    connect: float = 5.0
    read: float = 30.0
    watch_read: float = 90.0
    watch_server: int = 300  # timeoutSeconds asked of the server, 1 to 2 times this (jitter); the informer then resumes

    def scaled(self, factor: float) -> Timeouts:
        """The same timings `factor` times faster (tests on sped-up clocks)."""
        return replace(self, connect=self.connect * factor, read=self.read * factor, watch_read=self.watch_read * factor, watch_server=max(1, round(self.watch_server * factor)))


def path(res: Resource, namespace: str, name: str | None = None, sub: str | None = None) -> str:
    """kube-apiserver's REST path of a namespaced collection, object or subresource."""
    base = f"/api/{res.version}" if not res.group else f"/apis/{res.group}/{res.version}"
    out = f"{base}/namespaces/{quote(namespace, safe='')}/{res.plural}"
    if name is not None:
        out += f"/{quote(name, safe='')}"
    if sub is not None:
        out += f"/{sub}"
    return out


def selector(labels: Mapping[str, str | None]) -> str:
    """A selector's text: `k=v` for each pair, `k` alone (the label exists) for a None value."""
    return ",".join(k if v is None else f"{k}={v}" for k, v in sorted(labels.items()))


def retry_after(value: Any) -> float | None:
    """An integer Retry-After header in seconds (client-go reads only that form, with
    strconv.Atoi: ASCII digits that fit an int64; str.isdigit took "²", which int() refuses), capped."""
    seconds = bounded(str(value or "").strip(), 0, INT64_MAX)
    return None if seconds is None else float(min(seconds, RETRY_AFTER_CAP))


def _status_error(status: int, body: bytes, after: float | None = None) -> ApiError:
    """The ApiError for an error response, from its `Status` body when it has one; a 429 or
    5xx answer's Retry-After goes with it, for the caller's next try (client-go checkWait)."""
    try:
        doc = nesting.loads(body or b"{}")
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    reason = str(doc.get("reason") or "")
    message = str(doc.get("message") or body[:300].decode("utf-8", "replace"))
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExists(message)
    cls = _ERRORS.get(status, ApiError)
    wait = after if status == 429 or status >= 500 else None
    return cls(f"{status} {reason or 'error'}: {message}"[:1000], status, reason or None, wait)


class Transport:
    """JSON over the client's configured urllib3 pool, with its authentication."""

    def __init__(self, configuration: client.Configuration, timeouts: Timeouts, identity: str | None = None):
        self.configuration = configuration
        self.user_agent = f"{USER_AGENT} ({identity})" if identity else USER_AGENT
        self.host = configuration.host.rstrip("/")
        self.pool = client.ApiClient(configuration).rest_client.pool_manager
        self.timeouts = timeouts

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        token = self.configuration.get_api_key_with_prefix("authorization")
        if token:
            headers["Authorization"] = token
        elif self.configuration.username or self.configuration.password:
            headers.update(urllib3.util.make_headers(basic_auth=f"{self.configuration.username}:{self.configuration.password}"))
        return headers

    def open(self, method: str, url_path: str, query: Mapping[str, Any] | None = None, body: Any = None, content_type: str = "application/json", *, read: float | None = None) -> urllib3.BaseHTTPResponse:
        """Send one request; the response is not read yet (watches stream it)."""
        url = self.host + url_path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        timeout = urllib3.Timeout(connect=self.timeouts.connect, read=self.timeouts.read if read is None else read)
        try:
            resp = self.pool.request(method, url, body=data, headers=self._headers(content_type if data is not None else None), timeout=timeout, retries=False, preload_content=False, redirect=False)
        except Exception as exc:  # urllib3's MaxRetryError, ProtocolError, timeouts, OSError, SSL errors...
            raise Unreachable(f"{method} {url_path}: {type(exc).__name__}: {exc}") from None
        if resp.status >= 400:
            try:
                raw = resp.read()
            except Exception:
                raw = b""
            finally:
                resp.release_conn()
            raise _status_error(resp.status, raw, retry_after(resp.headers.get("Retry-After")))
        return resp

    def call(self, method: str, url_path: str, query: Mapping[str, Any] | None = None, body: Any = None, content_type: str = "application/json", max_bytes: int | None = None, max_values: int | None = None,
             keep: Callable[[Any], Any] = lambda answer: answer, decode: Callable[[bytes], Any] = nesting.loads) -> Any:
        """One request and what `keep` takes of its decoded JSON answer (a dense one parsed under
        nesting.DENSE till `keep` returns); PageTooLarge past `max_bytes` or `max_values`, unparsed."""
        resp = self.open(method, url_path, query, body, content_type)
        raw = b""
        try:
            raw = resp.read() if max_bytes is None else resp.read(max_bytes + 1)
        except Exception as exc:
            raise Unreachable(f"{method} {url_path}: reading the answer: {type(exc).__name__}: {exc}") from None
        finally:
            if max_bytes is not None and len(raw) > max_bytes:
                resp.close()  # the rest is never read: this connection is not reused
            resp.release_conn()
        if max_bytes is not None and len(raw) > max_bytes:
            raise PageTooLarge(f"{method} {url_path}: more than {max_bytes} bytes", 0, "PageTooLarge")
        if max_values is not None and json_values(raw) > max_values:
            raise PageTooLarge(f"{method} {url_path}: more than {max_values} JSON values", 0, "PageTooLarge")
        try:
            return nesting.loads_then(raw, keep, decode) if raw else keep(None)
        except ValueError as exc:
            raise ApiError(f"{method} {url_path}: the answer is not JSON: {exc}", 0, "BadResponse") from None


class HttpWatch:
    """A streamed watch; a thread turns response lines into (trimmed) events on a bounded queue.

    Every arrival also sets `notify`, shared by all watches of a cluster, so the controller
    can sleep on one event until any of its watches has news.  An ERROR event with a 410
    Status (kube-apiserver's "too old resource version") becomes Expired; a stream the
    server ends (timeoutSeconds) is StreamClosed, and a silent one ends by the read time-out.
    """

    def __init__(self, resp: urllib3.BaseHTTPResponse, notify: threading.Event, trim: Callable[[Obj], Obj], decode: Callable[[bytes], Any] = nesting.loads):
        self._resp = resp
        self._decode = decode
        self._notify = notify
        self._trim = trim
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=BACKLOG)
        self._closed = threading.Event()
        self._end: Exception | None = None
        self._thread = threading.Thread(target=self._pump, daemon=True, name="flatjob-watch")
        self._thread.start()

    def _put(self, item: Any) -> bool:
        """Queue an item unless the watch was closed meanwhile (never blocks for good)."""
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.5)
            except queue.Full:
                continue
            self._notify.set()
            return True
        return False

    def _pump(self) -> None:
        buffer = b""
        end: Any = ApiError("watch stream closed", 0, "StreamClosed")
        try:
            for chunk in self._resp.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip() and not self._put(nesting.loads_then(line, self._event, self._decode)):  # parsed, trimmed, and only then queued
                        return
        except Exception as exc:  # read time-out, reset connection, malformed line
            end = ApiError(f"watch stream failed: {type(exc).__name__}: {exc}", 0, "StreamError")
        self._put(end)

    def _event(self, item: Any) -> Any:
        if not isinstance(item, dict) or not isinstance(item.get("object"), dict):
            return ApiError(f"malformed watch event: {str(item)[:200]}", 0, "StreamError")
        if item.get("type") == "ERROR":
            status = item["object"]
            if status.get("code") == 410:
                return Expired(str(status.get("message", "too old resource version")))
            return ApiError(str(status.get("message", "watch error")), status.get("code") or 500, status.get("reason"))
        return (str(item.get("type")), self._trim(item["object"]))

    def next_events(self, timeout: float | None) -> list[tuple[str, Obj]]:
        if self._end is not None:
            raise self._end
        events: list[tuple[str, Obj]] = []
        try:
            item = self._queue.get(timeout=timeout) if timeout else self._queue.get_nowait()
        except queue.Empty:
            return events
        while True:
            if isinstance(item, Exception):
                self._end = item  # the stream is over: every later call raises it
                if events:
                    return events
                raise item
            events.append(item)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return events

    def close(self) -> None:
        self._closed.set()
        for stop in ("shutdown", "release_conn", "close"):  # shutdown (urllib3 >= 2.3) wakes a blocked read
            with contextlib.suppress(Exception):
                getattr(self._resp, stop, lambda: None)()


class NoClusterConfig(Exception):
    """Neither a pod's service account nor a usable kubeconfig: the user's to fix, not a bug."""


def load_configuration() -> client.Configuration:
    """In-cluster config when running in a pod, else the kubeconfig (KUBECONFIG)."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException:
        try:
            config.load_kube_config(client_configuration=configuration)
        except config.ConfigException as exc:
            raise NoClusterConfig(str(exc)) from None
    return configuration


class KubeCluster:
    """runtime.api.Cluster over HTTP: list (paginated), watch, get, create, replace, patch, delete."""

    def __init__(self, configuration: client.Configuration | None = None, timeouts: Timeouts | None = None, identity: str | None = None):
        self.timeouts = timeouts or Timeouts()
        self.http = Transport(configuration or load_configuration(), self.timeouts, identity)
        self.notify = threading.Event()
        self.rng = seeded(identity or USER_AGENT)

    def list(self, res: Resource, namespace: str, *, labels: Mapping[str, str] | None = None, fields: Mapping[str, str] | None = None, trim: Callable[[Obj], Obj] = lambda o: o,
             lift: Lift = ()) -> tuple[list[Obj], str]:
        """Every object that matches, page by page, each trimmed as its page arrives; the members
        named in `lift` of each object of a dense page come unparsed, as bytes (runtime.sieve)."""
        query: dict[str, Any] = {"limit": PAGE}
        if labels:
            query["labelSelector"] = selector(labels)
        if fields:
            query["fieldSelector"] = selector(fields)
        items: list[Obj] = []
        restarts = 0

        def page(data: Any) -> tuple[list[Obj], Any]:  # each page trimmed as it is parsed: never two pages parsed at once
            if not isinstance(data, dict) or not isinstance(data.get("items"), list):
                raise ApiError(f"list {res.plural}: not a list answer", 0, "BadResponse")
            meta = data.get("metadata")
            return [trim(o) for o in data["items"] if isinstance(o, dict)], meta if isinstance(meta, dict) else {}

        while True:
            try:  # a page is parsed only under PAGE_BYTES and PAGE_VALUES: anyone may fill the namespace with 1 MB objects
                values = PAGE_VALUES if query["limit"] > 1 else None  # one object is parsed whatever it holds
                kept, meta = self.http.call("GET", path(res, namespace), query, max_bytes=PAGE_BYTES, max_values=values, keep=page, decode=_decoder(lift, 3))
            except PageTooLarge:
                if query["limit"] == 1:
                    raise
                query["limit"] = max(1, query["limit"] // 8)  # the same page again, in smaller pages
                continue
            except Expired:
                if "continue" not in query or restarts == LIST_RESTARTS:
                    raise
                # The continue token outlived the server's history (410 on a later page): the
                # list again from its start, as client-go's pager does (tools/pager
                # FullListIfExpired), though still in pages (a namespace's pods in one answer
                # could be tens of MB) and at most LIST_RESTARTS times.
                restarts += 1
                query.pop("continue")
                query["limit"] = PAGE
                items = []
                continue
            items.extend(kept)
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion") or "")
            query["continue"] = token
            query["limit"] = min(PAGE, query["limit"] * 8)  # past a page of big objects, back to full pages

    def watch_timeout(self) -> int:
        """timeoutSeconds for one watch: between 1 and 2 times Timeouts.watch_server, at random, as
        client-go's reflector asks (minWatchTimeout x (1 + rand)), so watches opened together do
        not all end, and resume, together."""
        return round(self.timeouts.watch_server * (1.0 + self.rng.random()))

    def watch(self, res: Resource, namespace: str, resource_version: str, *, labels: Mapping[str, str] | None = None, fields: Mapping[str, str] | None = None, trim: Callable[[Obj], Obj] = lambda o: o,
              lift: Lift = ()) -> HttpWatch:
        query: dict[str, Any] = {"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true", "timeoutSeconds": self.watch_timeout()}
        if labels:
            query["labelSelector"] = selector(labels)
        if fields:
            query["fieldSelector"] = selector(fields)
        resp = self.http.open("GET", path(res, namespace), query, read=self.timeouts.watch_read)
        return HttpWatch(resp, self.notify, trim, _decoder(lift, 2))

    # `trim`: what of the answer is kept, taken as it is parsed (nesting.loads_then): a write's
    # answer is the whole object, which may hold whatever anyone wrote beside the runtime's part
    # (a record's spec: 1.3 MB of small objects, ~31 MiB parsed, at each status write).
    def get(self, res: Resource, namespace: str, name: str, *, trim: Callable[[Obj], Obj] = lambda o: o) -> Obj:
        return self.http.call("GET", path(res, namespace, name), keep=trim)

    def create(self, res: Resource, namespace: str, body: Obj, *, trim: Callable[[Obj], Obj] = lambda o: o) -> Obj:
        return self.http.call("POST", path(res, namespace), None, body, keep=trim)

    def replace(self, res: Resource, namespace: str, body: Obj, sub: str | None = None, *, trim: Callable[[Obj], Obj] = lambda o: o, lift: Lift = ()) -> Obj:
        return self.http.call("PUT", path(res, namespace, body["metadata"]["name"], sub), None, body, keep=trim, decode=_decoder(lift, 1))

    def patch(self, res: Resource, namespace: str, name: str, ops: list[Obj], *, trim: Callable[[Obj], Obj] = lambda o: o) -> Obj:
        """A JSON patch (RFC 6902): `test` operations make it conditional."""
        return self.http.call("PATCH", path(res, namespace, name), None, ops, "application/json-patch+json", keep=trim)

    def delete(self, res: Resource, namespace: str, name: str, uid: str | None = None) -> None:
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        self.http.call("DELETE", path(res, namespace, name), None, body)


def _decoder(lift: Lift, depth: int) -> Callable[[bytes], Any]:
    """How an answer is parsed: whole, or with the members `lift` names of its objects at
    `depth` (a list page's items: 3; a watch event's object: 2; an object alone: 1), or those
    a function of (depth, key) picks, left as bytes when the text is dense (runtime.sieve).
    Named members come with their objects' metadata.managedFields lifted too: the API server
    lists there each field a writer set (0.5 MB of `{"k1":{"a":0},...}` in a status is 0.65 MB
    of fieldsV1, 12 MiB parsed), and trim.meta never keeps them."""
    if not lift:
        return nesting.loads
    if callable(lift):
        return lambda raw: sieve.loads(raw, lift)
    named = sieve.members((depth,), lift)
    managed = sieve.members((depth + 1,), ("managedFields",))
    return lambda raw: sieve.loads(raw, lambda d, key: named(d, key) or managed(d, key))


RECORD_VERSION = keys.RECORD_API_VERSION.split("/", 1)[1]
