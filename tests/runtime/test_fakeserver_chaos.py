"""The test controls: outages (connections refused), dropped and half-open watches, the request
log and hook, kubeconfig, and a close that leaves no thread behind."""

from __future__ import annotations

import threading
import time

import pytest
import urllib3
from kubernetes import client, config

from flatjob.runtime.sim.cluster import FakeCluster
from flatjob.runtime.sim.server import ConnectionAbort, FakeApiServer

from .fakeserverkit import Clock, call, core, pod, raw
from .test_fakeserver_watch import SAFETY, Lines


@pytest.fixture
def server():
    s = FakeApiServer(FakeCluster(Clock()))
    yield s
    s.close()


@pytest.fixture
def api(server):
    c = server.api_client()
    yield c
    c.close()


def _watch(api, **kw):
    return Lines(core(api).list_namespaced_pod("default", watch=True, _preload_content=False, timeout_seconds=30, **kw))


def test_an_outage_refuses_connections_and_keeps_the_state(server, api) -> None:
    call(core(api).create_namespaced_pod, "default", pod("p"))
    stream = _watch(api, resource_version="1")
    port = server.port
    server.stop_serving()
    assert stream.done.wait(SAFETY) and stream.events[-1]["type"] == "BROKEN"  # open connections are dropped
    with pytest.raises(urllib3.exceptions.NewConnectionError):
        raw(server, "GET", "/api/v1/namespaces/default/pods")
    server.resume_serving()
    assert server.port == port
    assert [p["metadata"]["name"] for p in call(core(api).list_namespaced_pod, "default")["items"]] == ["p"]


def test_outage_is_a_context_manager(server) -> None:
    with server.outage():
        assert not server.serving
        with pytest.raises(urllib3.exceptions.NewConnectionError):
            raw(server, "GET", "/version")
    assert raw(server, "GET", "/version")[0] == 200


def test_dropped_watches_break_mid_stream(server, api) -> None:
    stream = _watch(api)  # open on the server once its headers are in (no sleep: the server counts it first)
    assert server.drop_watches() == 1
    assert stream.done.wait(SAFETY) and stream.events[-1]["type"] == "BROKEN"
    assert "ProtocolError" in stream.events[-1]["object"] or "IncompleteRead" in stream.events[-1]["object"]
    assert raw(server, "GET", "/version")[0] == 200  # only the watches go


def test_half_open_watches_stay_connected_and_silent(server, api) -> None:
    stream = _watch(api, allow_watch_bookmarks=True)
    assert server.half_open_watches() == 1
    call(core(api).create_namespaced_pod, "default", pod("p"))
    started = time.monotonic()
    server.bookmark_all(wait=30.0)  # a frozen watch is not waited for: waiting on it would take the whole 30 s
    assert time.monotonic() - started < 30.0
    time.sleep(0.3)
    assert stream.events == [] and not stream.done.is_set() and server.open_watches == 1
    fresh = _watch(api)  # new watches are not affected
    assert fresh.wait(1) == [("ADDED", "p")]
    stream.close()
    fresh.close()


def test_new_watches_can_start_half_open(server, api) -> None:
    server.half_open_new = True
    call(core(api).create_namespaced_pod, "default", pod("p"))
    stream = _watch(api)
    time.sleep(0.3)
    assert stream.events == [] and not stream.done.is_set()
    stream.close()


def test_the_request_log_counts_verbs_by_resource(server, api) -> None:
    call(core(api).create_namespaced_pod, "default", pod("p"))
    call(core(api).list_namespaced_pod, "default")
    call(client.CustomObjectsApi(api).list_namespaced_custom_object, "flatjob.dev", "v1beta1", "default", "genericjobs")
    with pytest.raises(client.ApiException):
        core(api).read_namespaced_pod_status("nope", "default")
    assert server.requests == {("create", "pods"): 1, ("list", "pods"): 1, ("list", "genericjobs.flatjob.dev"): 1, ("get", "pods/status"): 1}
    assert [(r.method, r.code) for r in server.log] == [("POST", 201), ("GET", 200), ("GET", 200), ("GET", 404)]


def test_a_hook_can_drop_a_request_unanswered(server, api) -> None:
    def hook(verb, resource, namespace, name, agent):
        if verb == "create":
            raise ConnectionAbort

    server.on_request = hook
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core(api).create_namespaced_pod("default", pod("p"), _preload_content=False, _request_timeout=SAFETY)
    server.on_request = None
    assert call(core(api).list_namespaced_pod, "default")["items"] == []


def test_a_kubeconfig_for_the_real_client(server, tmp_path) -> None:
    path = server.kubeconfig(tmp_path / "config")
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    with client.ApiClient(cfg) as c:
        assert call(client.VersionApi(c).get_code)["gitVersion"].startswith("v1.32")


def test_an_error_answered_before_the_body_keeps_the_connection_usable(server) -> None:
    """Keep-alive: a request the server refuses at once (an unknown resource, a dropped one)
    must not leave its body in the connection for the next request to be parsed from."""
    import http.client
    import json as _json

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=SAFETY)
    try:
        body = _json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "filler": "y" * 5000}).encode()
        conn.request("POST", "/api/v1/namespaces/default/nosuchthings", body=body, headers={"Content-Type": "application/json"})
        first = conn.getresponse()
        assert first.status == 404
        first.read()
        conn.request("GET", "/api/v1/namespaces/default/pods")
        second = conn.getresponse()
        assert second.status == 200 and _json.loads(second.read())["kind"] == "PodList"
    finally:
        conn.close()


def test_close_leaves_no_thread_behind(api) -> None:
    before = {t.ident for t in threading.enumerate()}
    s = FakeApiServer(FakeCluster(Clock()))
    with s.api_client() as c:
        call(core(c).list_namespaced_pod, "default")
        Lines(core(c).list_namespaced_pod("default", watch=True, _preload_content=False, timeout_seconds=30))
        time.sleep(0.1)
        s.close()
    time.sleep(0.05)
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.name.startswith("fakeapi")]
    assert left == []
