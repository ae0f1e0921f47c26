"""Garbage collection of ownerReferences, and the request-size limits, over HTTP."""

from __future__ import annotations

from kubernetes import client

from .fakeserverkit import (  # noqa: F401
    GROUP,
    PLURAL,
    VERSION,
    api,
    call,
    core,
    custom,
    failure,
    ns,
    pod,
    raw,
    record,
    server,
)


def _owned(body, owner, controller=True):
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}
    body["metadata"]["ownerReferences"] = [*body["metadata"].get("ownerReferences", []), ref]
    return body


def _dependents(api, ns, owner):  # noqa: F811
    body_secret = _owned({"metadata": {"name": "s"}, "stringData": {"k": "v"}}, owner)
    call(core(api).create_namespaced_secret, ns, body_secret)
    lease = _owned({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}, owner)
    call(client.CoordinationV1Api(api).create_namespaced_lease, ns, lease)
    call(core(api).create_namespaced_pod, ns, _owned(pod("gated"), owner))
    call(core(api).create_namespaced_pod, ns, _owned(pod("running", gates=()), owner))


def test_deleting_the_record_collects_its_dependents(api, ns, server) -> None:  # noqa: F811
    owner = call(custom(api).create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, record())
    _dependents(api, ns, owner)
    server.cluster.bind_pod(ns, "running", "n1")
    call(custom(api).delete_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j")
    assert failure(core(api).read_namespaced_secret, "s", ns)[0] == 404
    assert failure(client.CoordinationV1Api(api).read_namespaced_lease, "l", ns)[0] == 404
    assert failure(core(api).read_namespaced_pod, "gated", ns)[0] == 404  # not scheduled: at once
    running = call(core(api).read_namespaced_pod, "running", ns)  # scheduled: gracefully
    assert running["metadata"]["deletionGracePeriodSeconds"] == 30


def test_orphan_propagation_keeps_the_dependents_without_the_reference(api, ns) -> None:  # noqa: F811
    owner = call(custom(api).create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, record())
    _dependents(api, ns, owner)
    call(custom(api).delete_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j", propagation_policy="Orphan")
    secret = call(core(api).read_namespaced_secret, "s", ns)
    assert "ownerReferences" not in secret["metadata"]
    assert "f:ownerReferences" not in str(secret["metadata"]["managedFields"])  # removed fields are nobody's


def test_a_dependent_with_another_owner_only_loses_the_reference(api, ns) -> None:  # noqa: F811
    first = call(custom(api).create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, record("a"))
    second = call(custom(api).create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, record("b"))
    call(core(api).create_namespaced_secret, ns, _owned(_owned({"metadata": {"name": "s"}}, first), second, controller=False))
    call(custom(api).delete_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "a")
    refs = call(core(api).read_namespaced_secret, "s", ns)["metadata"]["ownerReferences"]
    assert [r["name"] for r in refs] == ["b"]


def test_an_object_whose_owner_is_gone_is_collected_at_once(api, ns) -> None:  # noqa: F811
    ghost = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PyTorchTrainingJob", "metadata": {"name": "gone", "uid": "00000000-0000-4000-8000-000000000000"}}
    call(core(api).create_namespaced_secret, ns, _owned({"metadata": {"name": "s"}}, ghost))
    assert failure(core(api).read_namespaced_secret, "s", ns)[0] == 404
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "uid": "1"}}
    call(core(api).create_namespaced_secret, ns, _owned({"metadata": {"name": "t"}}, unknown))  # a kind the fake does not serve: kept
    assert call(core(api).read_namespaced_secret, "t", ns)["metadata"]["name"] == "t"


def test_a_stored_object_over_etcds_limit_is_refused_as_kube_apiserver_passes_it_on(api, ns, server) -> None:  # noqa: F811
    created = call(custom(api).create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, record())
    big = dict(created, status={"runtime": {"ledger": "x" * 1_600_000}})
    code, status = failure(custom(api).replace_namespaced_custom_object_status, GROUP, VERSION, ns, PLURAL, "j", big)
    assert (code, status) == (500, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "etcdserver: request is too large", "code": 500})
    assert "runtime" not in call(custom(api).get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j")["status"]  # the CRD's default status only
    fits = dict(created, status={"runtime": {"ledger": "x" * 1_500_000}})
    assert call(custom(api).replace_namespaced_custom_object_status, GROUP, VERSION, ns, PLURAL, "j", fits)["status"]["runtime"]["ledger"]


def test_a_request_body_over_3_mib_is_413(server, ns) -> None:  # noqa: F811
    code, status, _ = raw(server, "POST", f"/api/v1/namespaces/{ns}/secrets", b"{" + b" " * (3 * 1024 * 1024) + b"}")
    assert (code, status["reason"], status["message"]) == (413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")
