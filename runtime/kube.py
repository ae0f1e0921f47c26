"""The real API server behind runtime.api.Cluster: the only module that imports `kubernetes`.

Responses are read as raw JSON (`_preload_content=False`) so the rest of the runtime sees the
same plain dicts the fake cluster produces, and watches are streamed line by line on a
thread into a queue, so the controller can wait on them with a timeout.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from flatjob.compiler import keys

from .api import AlreadyExists, ApiError, Conflict, Expired, Invalid, NotFound, Obj

RECORD_VERSION = keys.RECORD_API_VERSION.split("/", 1)[1]
WATCH_SECONDS = 300  # the server ends a watch after this; the informer resumes from its resourceVersion
_ERRORS: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 410: Expired, 422: Invalid}


def _error(exc: ApiException) -> ApiError:
    reason = ""
    with contextlib.suppress(ValueError):
        reason = json.loads(exc.body or "{}").get("reason", "")
    if exc.status == 409 and reason == "AlreadyExists":
        return AlreadyExists(str(exc.reason))
    cls = _ERRORS.get(exc.status or 0, ApiError)
    return cls(f"{exc.status} {exc.reason}: {(exc.body or '')[:300]}", exc.status, reason or None)


def _call(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Call the API and return decoded JSON; API errors become runtime.api errors."""
    try:
        resp = fn(*args, _preload_content=False, **kw)
    except ApiException as exc:
        raise _error(exc) from exc
    data = resp.data
    return json.loads(data) if data else None


def _selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


class HttpWatch:
    """A streamed watch; a thread turns response lines into events on a queue.

    Every arrival also sets `notify`, shared by all watches of a cluster, so the controller
    can sleep on one event until any of its watches has news.
    """

    def __init__(self, start: Callable[[], Any], notify: threading.Event):
        self._notify = notify
        self._queue: queue.Queue[Any] = queue.Queue()
        self._resp = None
        try:
            self._resp = start()
        except ApiException as exc:
            raise _error(exc) from exc
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        buffer = b""
        try:
            for chunk in self._resp.stream(amt=65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        self._queue.put(json.loads(line))
                        self._notify.set()
        except Exception as exc:
            self._queue.put(exc)
        self._queue.put(StopIteration())
        self._notify.set()

    def next_events(self, timeout: float | None) -> list[tuple[str, Obj]]:
        events: list[tuple[str, Obj]] = []
        try:
            item = self._queue.get(timeout=timeout) if timeout else self._queue.get_nowait()
        except queue.Empty:
            return events
        while True:
            if isinstance(item, StopIteration):
                if events:
                    self._queue.put(item)
                    return events
                raise ApiError("watch stream closed", 0, "StreamClosed")
            if isinstance(item, Exception):
                raise ApiError(f"watch stream failed: {item}", 0, "StreamError")
            if item.get("type") == "ERROR":
                status = item.get("object") or {}
                if status.get("code") == 410:
                    raise Expired(status.get("message", "expired"))
                raise ApiError(status.get("message", "watch error"), status.get("code") or 500)
            events.append((item["type"], item["object"]))
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return events

    def close(self) -> None:
        if self._resp is not None:
            self._resp.close()


class KubeCluster:
    """runtime.api.Cluster over the Kubernetes Python client."""

    def __init__(self, api_client: client.ApiClient | None = None):
        if api_client is None:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
            api_client = client.ApiClient()
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.notify = threading.Event()

    # pods
    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> tuple[list[Obj], str]:
        data = _call(self.core.list_namespaced_pod, namespace, label_selector=_selector(selector))
        return data["items"], data["metadata"]["resourceVersion"]

    def watch_pods(self, namespace: str, selector: Mapping[str, str], resource_version: str) -> HttpWatch:
        return HttpWatch(lambda: self.core.list_namespaced_pod(
            namespace, label_selector=_selector(selector), watch=True, resource_version=resource_version,
            allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS, _preload_content=False), self.notify)

    def create_pod(self, namespace: str, body: Obj) -> Obj:
        return _call(self.core.create_namespaced_pod, namespace, body)

    def patch_pod(self, namespace: str, name: str, patch: Any) -> Obj:
        return _call(self.core.patch_namespaced_pod, name, namespace, patch)

    def delete_pod(self, namespace: str, name: str, uid: str | None) -> None:
        body = {"preconditions": {"uid": uid}} if uid else None
        _call(self.core.delete_namespaced_pod, name, namespace, body=body)

    # records
    def list_records(self, namespace: str, plural: str, name: str) -> tuple[list[Obj], str]:
        data = _call(self.custom.list_namespaced_custom_object, keys.RECORD_GROUP, RECORD_VERSION, namespace, plural, field_selector=f"metadata.name={name}")
        return data["items"], data["metadata"]["resourceVersion"]

    def watch_records(self, namespace: str, plural: str, name: str, resource_version: str) -> HttpWatch:
        return HttpWatch(lambda: self.custom.list_namespaced_custom_object(
            keys.RECORD_GROUP, RECORD_VERSION, namespace, plural, field_selector=f"metadata.name={name}", watch=True,
            resource_version=resource_version, allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS, _preload_content=False), self.notify)

    def replace_record_status(self, namespace: str, plural: str, body: Obj) -> Obj:
        name = body["metadata"]["name"]
        return _call(self.custom.replace_namespaced_custom_object_status, keys.RECORD_GROUP, RECORD_VERSION, namespace, plural, name, body)

    # the rest
    def get_secret(self, namespace: str, name: str) -> Obj:
        return _call(self.core.read_namespaced_secret, name, namespace)

    def create_secret(self, namespace: str, body: Obj) -> Obj:
        return _call(self.core.create_namespaced_secret, namespace, body)

    def get_podgroup(self, namespace: str, name: str) -> Obj:
        group, version = keys.PODGROUP_API_VERSION.split("/")
        return _call(self.custom.get_namespaced_custom_object, group, version, namespace, "podgroups", name)

    def create_event(self, namespace: str, body: Obj) -> None:
        _call(self.core.create_namespaced_event, namespace, body)

    def get_lease(self, namespace: str, name: str) -> Obj:
        return _call(self.coordination.read_namespaced_lease, name, namespace)

    def create_lease(self, namespace: str, body: Obj) -> Obj:
        return _call(self.coordination.create_namespaced_lease, namespace, body)

    def replace_lease(self, namespace: str, body: Obj) -> Obj:
        return _call(self.coordination.replace_namespaced_lease, body["metadata"]["name"], namespace, body)
