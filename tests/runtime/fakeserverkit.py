"""Shared pieces of the fake API server's tests: a server per module, the real client, raw HTTP.

Tests import the fixtures they use (`from .fakeserverkit import server, api, ns`).  Calls go
through the real `kubernetes` client with `_preload_content=False`, as runtime/kube.py makes
them, so the JSON the server sent is what the test reads, for every client version.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3

pytest.importorskip("kubernetes")

from kubernetes import client
from kubernetes.client.rest import ApiException

from flatjob.runtime.sim.cluster import FakeCluster
from flatjob.runtime.sim.server import FakeApiServer

GROUP, VERSION, PLURAL = "flatjob.dev", "v1beta1", "pytorchtrainingjobs"
GATE = "flatjob.dev/release"
_HTTP = urllib3.PoolManager()


class Clock:
    """Settable wall time for the server (graceful deletion deadlines, quota)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def server() -> Iterator[FakeApiServer]:
    s = FakeApiServer(FakeCluster(Clock()))
    yield s
    s.close()


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[client.ApiClient]:
    c = server.api_client()
    yield c
    c.close()


@pytest.fixture
def ns(request: pytest.FixtureRequest) -> str:
    """A namespace of the test's own (every namespace exists on the fake)."""
    name = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:54].strip("-")
    return f"{name}-{hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]}"


def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def call(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Call the client with _preload_content=False and decode the JSON answer."""
    resp = fn(*args, _preload_content=False, **kw)
    return json.loads(resp.data) if resp.data else None


def failure(fn: Callable[..., Any], *args: Any, **kw: Any) -> tuple[int, dict[str, Any]]:
    """The status code and Status body of a call that must fail."""
    with pytest.raises(ApiException) as err:
        fn(*args, _preload_content=False, **kw)
    return err.value.status, json.loads(err.value.body)


def raw(server: FakeApiServer, method: str, path: str, body: Any = None, content_type: str = "application/json", timeout: float = 10) -> tuple[int, Any, Any]:
    """Plain HTTP for bodies the typed client will not send (integer quantities, huge bodies)."""
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
    resp = _HTTP.request(method, server.url + path, body=data, headers={"Content-Type": content_type}, timeout=timeout, retries=False)
    return resp.status, (json.loads(resp.data) if resp.data else None), resp.headers


def pod(name: str, gates: tuple[str, ...] = (GATE,), labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"flatjob.dev/job-name": "j"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec},
    }
    if gates:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return body


def record(name: str = "j", expected: int | None = 2, **spec: Any) -> dict[str, Any]:
    worker = {"type": "worker", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    body: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PyTorchTrainingJob", "metadata": {"name": name}, "spec": {"replicaSpecs": [worker], **spec}}
    if expected is not None:
        body["spec"]["elastic"] = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": expected}
    return body


def wait_for(check: Callable[[], Any], seconds: float = 5.0) -> Any:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


__all__ = ["ApiException", "Clock", "api", "call", "client", "core", "custom", "failure", "ns", "pod", "raw", "record", "server", "wait_for"]
