"""Pods through the real `kubernetes` client over HTTP: what kube-apiserver stores, allows,
refuses (codes, reasons and messages as it words them) and how it deletes them."""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any

from .fakeserverkit import GATE, api, call, core, failure, ns, pod, raw, server  # noqa: F401

RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def test_a_created_pod_looks_like_kube_apiservers(api, ns, server) -> None:  # noqa: F811
    got = call(core(api).create_namespaced_pod, ns, pod("p", labels={"app": "x"}))
    meta, spec, status = got["metadata"], got["spec"], got["status"]
    assert str(uuid.UUID(meta["uid"])) == meta["uid"] and RFC3339.fullmatch(meta["creationTimestamp"])
    assert meta["generation"] == 1 and meta["namespace"] == ns and int(meta["resourceVersion"]) > 0
    entry = meta["managedFields"][0]
    assert (entry["manager"], entry["operation"], entry["fieldsType"]) == ("OpenAPI-Generator", "Update", "FieldsV1")
    assert entry["fieldsV1"]["f:metadata"]["f:labels"] == {".": {}, "f:app": {}}
    assert 'k:{"name":"c"}' in entry["fieldsV1"]["f:spec"]["f:containers"]
    c = spec["containers"][0]
    assert (c["terminationMessagePath"], c["terminationMessagePolicy"], c["imagePullPolicy"], c["resources"]) == ("/dev/termination-log", "File", "IfNotPresent", {})
    assert c["volumeMounts"][0]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert spec["volumes"][0]["name"].startswith("kube-api-access-") and spec["volumes"][0]["projected"]["defaultMode"] == 420
    assert (spec["dnsPolicy"], spec["restartPolicy"], spec["schedulerName"], spec["serviceAccountName"]) == ("ClusterFirst", "Always", "default-scheduler", "default")
    assert (spec["terminationGracePeriodSeconds"], spec["enableServiceLinks"], spec["priority"], spec["preemptionPolicy"]) == (30, True, 0, "PreemptLowerPriority")
    assert [t["key"] for t in spec["tolerations"]] == ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
    assert spec["securityContext"] == {}
    assert (status["phase"], status["qosClass"]) == ("Pending", "BestEffort")
    assert status["conditions"][0] | {"lastTransitionTime": "t"} == {
        "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates", "lastProbeTime": None, "lastTransitionTime": "t",
    }


def test_quantities_are_stored_canonically(server, ns) -> None:  # noqa: F811
    body = pod("p", gates=())
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": 1.0, "memory": "1024Mi", "nvidia.com/gpu": 1}, "limits": {"cpu": "0.5", "nvidia.com/gpu": 1}}
    code, got, _ = raw(server, "POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert code == 201
    assert got["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, "limits": {"cpu": "500m", "nvidia.com/gpu": "1"}}
    assert got["status"]["qosClass"] == "Burstable"


def test_a_bad_quantity_or_an_int_field_given_a_float_is_400(server, ns) -> None:  # noqa: F811
    body = pod("p", gates=())
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "one"}}
    code, got, _ = raw(server, "POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert (code, got["reason"]) == (400, "BadRequest")
    assert "quantities must match the regular expression" in got["message"]
    body = pod("p", gates=(), terminationGracePeriodSeconds=30.0)
    code, got, _ = raw(server, "POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert (code, got["reason"]) == (400, "BadRequest") and "cannot unmarshal number 30.0" in got["message"]


def test_an_integer_past_its_go_types_range_is_400(server, ns) -> None:  # noqa: F811
    """encoding/json refuses 2^31 for an int32 (a Lease's leaseTransitions, a container port)."""
    body = pod("p", gates=())
    body["spec"]["containers"][0]["ports"] = [{"containerPort": 2**31}]
    code, got, _ = raw(server, "POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert (code, got["reason"]) == (400, "BadRequest") and "cannot unmarshal number 2147483648" in got["message"] and "int32" in got["message"]
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"leaseTransitions": 2**31 - 1}}
    assert raw(server, "POST", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", lease)[0] == 201


def test_unknown_fields_are_dropped_with_a_warning_or_refused_when_strict(server, ns) -> None:  # noqa: F811
    body = pod("p", gates=())
    body["spec"]["containers"][0]["colour"] = "blue"
    code, got, headers = raw(server, "POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert code == 201 and "colour" not in got["spec"]["containers"][0]
    assert headers["Warning"] == '299 - "unknown field \\"spec.containers.colour\\""'
    code, got, _ = raw(server, "POST", f"/api/v1/namespaces/{ns}/pods?fieldValidation=Strict", {**body, "metadata": {"name": "q"}})
    assert (code, got["message"]) == (400, 'strict decoding error: unknown field "spec.containers.colour"')


def test_not_found_and_already_exists_bodies(api, ns) -> None:  # noqa: F811
    code, body = failure(core(api).read_namespaced_pod, "nope", ns)
    assert (code, body) == (404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": 'pods "nope" not found', "reason": "NotFound", "details": {"name": "nope", "kind": "pods"}, "code": 404})
    call(core(api).create_namespaced_pod, ns, pod("p"))
    code, body = failure(core(api).create_namespaced_pod, ns, pod("p"))
    assert (code, body["reason"], body["message"], body["details"]) == (409, "AlreadyExists", 'pods "p" already exists', {"name": "p", "kind": "pods"})


def test_list_with_label_selector_and_pages(api, ns) -> None:  # noqa: F811
    for i in range(5):
        call(core(api).create_namespaced_pod, ns, pod(f"p{i}", labels={"job": "a" if i % 2 == 0 else "b"}))
    got = call(core(api).list_namespaced_pod, ns, label_selector="job=a")
    assert [p["metadata"]["name"] for p in got["items"]] == ["p0", "p2", "p4"]
    assert got["kind"] == "PodList" and "kind" not in got["items"][0]  # typed lists' items carry no kind
    assert [p["metadata"]["name"] for p in call(core(api).list_namespaced_pod, ns, label_selector="job in (b),job!=a")["items"]] == ["p1", "p3"]
    first = call(core(api).list_namespaced_pod, ns, limit=2)
    assert [p["metadata"]["name"] for p in first["items"]] == ["p0", "p1"] and first["metadata"]["remainingItemCount"] == 3
    call(core(api).create_namespaced_pod, ns, pod("p10"))  # not in the snapshot the pages come from
    rest = call(core(api).list_namespaced_pod, ns, limit=10, _continue=first["metadata"]["continue"])
    assert [p["metadata"]["name"] for p in rest["items"]] == ["p2", "p3", "p4"]
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"] and "continue" not in rest["metadata"]


def test_field_selectors_pods_support_and_others_refuse(api, ns) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p"))
    assert [p["metadata"]["name"] for p in call(core(api).list_namespaced_pod, ns, field_selector="status.phase=Pending,metadata.name=p")["items"]] == ["p"]
    code, body = failure(core(api).list_namespaced_pod, ns, field_selector="spec.colour=blue")
    assert (code, body["message"]) == (400, "field label not supported: spec.colour")


# --- what an update may change (ValidatePodUpdate) ------------------------------------------------

def _patch(api, ns, ops, name="p"):  # noqa: F811
    return call(core(api).patch_namespaced_pod, name, ns, ops)


def test_gates_are_removed_with_a_json_patch_guarded_by_test(api, ns) -> None:  # noqa: F811
    created = call(core(api).create_namespaced_pod, ns, pod("p", gates=("other", GATE)))
    uid = created["metadata"]["uid"]
    got = _patch(api, ns, [{"op": "test", "path": "/metadata/uid", "value": uid}, {"op": "remove", "path": "/spec/schedulingGates/1"}])
    assert got["spec"]["schedulingGates"] == [{"name": "other"}]
    assert got["metadata"]["generation"] == 2  # a spec change (updatePodGeneration)
    code, body = failure(core(api).patch_namespaced_pod, "p", ns, [{"op": "test", "path": "/metadata/uid", "value": "stale"}, {"op": "remove", "path": "/spec/schedulingGates/0"}])
    assert (code, body) == (422, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "the server rejected our request due to an error in our request", "reason": "Invalid", "details": {}, "code": 422})


def test_a_gate_can_never_be_added(api, ns) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p"))
    code, body = failure(core(api).patch_namespaced_pod, "p", ns, [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "x"}}])
    assert code == 422
    assert body["message"] == "Pod \"p\" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'x'"
    assert body["details"] == {"name": "p", "kind": "Pod", "causes": [{"reason": "FieldValueForbidden", "message": "Forbidden: only deletion is allowed, but found new scheduling gate 'x'", "field": "spec.schedulingGates[1].name"}]}


def test_images_deadline_and_tolerations_may_change(api, ns) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p", activeDeadlineSeconds=100))
    got = _patch(api, ns, [
        {"op": "replace", "path": "/spec/containers/0/image", "value": "busybox:1.37"},
        {"op": "replace", "path": "/spec/activeDeadlineSeconds", "value": 50},
        {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}},
    ])
    assert got["spec"]["containers"][0]["image"] == "busybox:1.37" and got["spec"]["activeDeadlineSeconds"] == 50
    code, body = failure(core(api).patch_namespaced_pod, "p", ns, [{"op": "replace", "path": "/spec/activeDeadlineSeconds", "value": 60}])
    assert (code, body["message"]) == (422, 'Pod "p" is invalid: spec.activeDeadlineSeconds: Invalid value: 60: must be less than or equal to previous value')
    code, body = failure(core(api).patch_namespaced_pod, "p", ns, [{"op": "remove", "path": "/spec/tolerations/0"}])
    assert (code, body["message"]) == (422, 'Pod "p" is invalid: spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds')


def test_any_other_spec_change_is_refused_with_the_api_servers_message(api, ns) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p"))
    code, body = failure(core(api).patch_namespaced_pod, "p", ns, [{"op": "add", "path": "/spec/containers/0/args", "value": ["x"]}])
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["message"].startswith(
        'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,'
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
    )
    code, body = failure(core(api).patch_namespaced_pod, "p", ns, [{"op": "add", "path": "/spec/containers/-", "value": {"name": "d", "image": "x"}}])
    assert body["message"] == 'Pod "p" is invalid: spec.containers: Forbidden: pod updates may not add or remove containers'


def test_metadata_changes_by_merge_and_strategic_patches(api, ns, server) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p"))
    got = _patch(api, ns, {"metadata": {"labels": {"x": "y"}, "annotations": {"a": "1"}}})  # a dict: strategic merge patch
    assert got["metadata"]["labels"] == {"flatjob.dev/job-name": "j", "x": "y"} and got["metadata"]["annotations"] == {"a": "1"}
    code, got, _ = raw(server, "PATCH", f"/api/v1/namespaces/{ns}/pods/p", {"metadata": {"labels": {"x": None}}}, "application/merge-patch+json")
    assert code == 200 and got["metadata"]["labels"] == {"flatjob.dev/job-name": "j"}
    assert got["metadata"]["generation"] == 1  # metadata is not the spec


def test_a_patch_that_changes_nothing_writes_nothing(api, ns) -> None:  # noqa: F811
    created = call(core(api).create_namespaced_pod, ns, pod("p"))
    again = _patch(api, ns, {"metadata": {"labels": created["metadata"]["labels"]}})
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_the_uid_cannot_change(api, ns) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p"))
    code, body = failure(core(api).patch_namespaced_pod, "p", ns, [{"op": "replace", "path": "/metadata/uid", "value": "x"}])
    assert (code, body["message"]) == (422, 'Pod "p" is invalid: metadata.uid: Invalid value: "x": field is immutable')


# --- deletion ------------------------------------------------------------------------------------------

def test_an_unscheduled_pod_is_deleted_at_once(api, ns) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p"))
    got = call(core(api).delete_namespaced_pod, "p", ns)
    assert got["kind"] == "Pod" and got["metadata"]["name"] == "p"  # pods answer with the object
    assert failure(core(api).read_namespaced_pod, "p", ns)[0] == 404


def test_a_scheduled_pod_terminates_gracefully_until_the_kubelet_ends_it(api, ns, server) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p", gates=()))
    assert raw(server, "POST", f"/api/v1/namespaces/{ns}/pods/p/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}})[0] == 201
    got = call(core(api).delete_namespaced_pod, "p", ns)
    assert got["metadata"]["deletionGracePeriodSeconds"] == 30 and RFC3339.fullmatch(got["metadata"]["deletionTimestamp"])
    assert got["metadata"]["generation"] == 2
    again = call(core(api).delete_namespaced_pod, "p", ns)  # pending: nothing changes
    assert again["metadata"]["resourceVersion"] == got["metadata"]["resourceVersion"]
    call(core(api).delete_namespaced_pod, "p", ns, grace_period_seconds=0)  # the kubelet's final delete
    assert failure(core(api).read_namespaced_pod, "p", ns)[0] == 404


def test_a_terminal_pod_is_deleted_at_once(api, ns, server) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p", gates=()))
    server.cluster.bind_pod(ns, "p", "n1")
    server.cluster.set_pod_status(ns, "p", {"phase": "Succeeded"})
    call(core(api).delete_namespaced_pod, "p", ns)
    assert failure(core(api).read_namespaced_pod, "p", ns)[0] == 404


def test_a_uid_precondition_that_fails_is_409(api, ns) -> None:  # noqa: F811
    uid = call(core(api).create_namespaced_pod, ns, pod("p"))["metadata"]["uid"]
    code, body = failure(core(api).delete_namespaced_pod, "p", ns, body={"preconditions": {"uid": "old"}})
    assert (code, body["reason"]) == (409, "Conflict")
    assert body["message"] == f'Operation cannot be fulfilled on Pod "p": the UID in the precondition (old) does not match the UID in record ({uid}). The object might have been deleted and then recreated'
    call(core(api).delete_namespaced_pod, "p", ns, body={"preconditions": {"uid": uid}})


def test_binding_refuses_gated_and_bound_pods(server, ns, api) -> None:  # noqa: F811
    call(core(api).create_namespaced_pod, ns, pod("p"))
    target = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
    assert raw(server, "POST", f"/api/v1/namespaces/{ns}/pods/p/binding", target)[0] == 500
    call(core(api).patch_namespaced_pod, "p", ns, [{"op": "remove", "path": "/spec/schedulingGates"}])
    assert raw(server, "POST", f"/api/v1/namespaces/{ns}/pods/p/binding", target)[0] == 201
    code, body, _ = raw(server, "POST", f"/api/v1/namespaces/{ns}/pods/p/binding", target)
    assert (code, body["reason"]) == (409, "Conflict")


def test_status_writes_keep_the_spec(api, ns, server) -> None:  # noqa: F811
    created = call(core(api).create_namespaced_pod, ns, pod("p"))
    body = copy.deepcopy(created)
    body["spec"]["containers"][0]["image"] = "evil"
    body["status"]["phase"] = "Running"
    got = call(core(api).replace_namespaced_pod_status, "p", ns, body)
    assert got["spec"] == created["spec"] and got["status"]["phase"] == "Running"
    assert got["metadata"]["managedFields"][-1]["subresource"] == "status"


def test_a_terminated_container_stays_terminated_but_a_native_sidecar_may_restart(api, ns, server) -> None:  # noqa: F811
    """ValidateContainerStateTransition and ValidateInitContainerStateTransition (#123323): in a
    pod that does not restart, a terminated container or init container may not run again; a
    native sidecar may, as the kubelet restarts it whatever the pod's restartPolicy."""
    inits = [{"name": "fetch", "image": "busybox:1.36"}, {"name": "shipper", "image": "busybox:1.36", "restartPolicy": "Always"}]
    call(core(api).create_namespaced_pod, ns, pod("p", gates=(), restartPolicy="Never", initContainers=inits))
    server.cluster.bind_pod(ns, "p", "n1")
    done, running = {"terminated": {"exitCode": 1}}, {"running": {}}

    def write(fetch: dict, shipper: dict, c: dict) -> tuple[int, Any, Any]:
        body = call(core(api).read_namespaced_pod_status, "p", ns)
        body["status"] = {"phase": "Running", "initContainerStatuses": [{"name": "fetch", "state": fetch}, {"name": "shipper", "state": shipper}],
                          "containerStatuses": [{"name": "c", "state": c}]}
        return raw(server, "PUT", f"/api/v1/namespaces/{ns}/pods/p/status", body)

    assert write(done, done, done)[0] == 200
    code, body, _ = write(done, running, done)  # the sidecar runs again
    assert code == 200 and body["status"]["initContainerStatuses"][1]["state"] == running
    for fetch, c, field in ((running, done, "initContainerStatuses[0]"), (done, running, "containerStatuses[0]")):
        code, body, _ = write(fetch, running, c)
        assert (code, body["reason"]) == (422, "Invalid")
        assert f"status.{field}.state: Forbidden: may not be transitioned to non-terminated state" in body["message"]
