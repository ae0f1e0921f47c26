"""PodTemplates, Secrets, Events (both APIs), Leases and discovery through the real client."""

from __future__ import annotations

import base64
import copy

from kubernetes import client

from .fakeserverkit import api, call, core, failure, ns, raw, server  # noqa: F401


def _template(name: str, labels: dict[str, str] | None = None, cpu: object = "1.0") -> dict:
    return {
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name, "labels": labels or {"flatjob.dev/job-name": "j"}},
        "template": {"metadata": {"labels": {"x": "y"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"cpu": cpu}}}]}},
    }


def test_pod_templates_get_pod_defaults_but_no_admission(api, ns) -> None:  # noqa: F811
    got = call(core(api).create_namespaced_pod_template, ns, _template("t"))
    spec = got["template"]["spec"]
    assert got["metadata"]["generation"] == 1
    assert spec["containers"][0]["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}
    assert (spec["dnsPolicy"], spec["schedulerName"], spec["terminationGracePeriodSeconds"]) == ("ClusterFirst", "default-scheduler", 30)
    assert "volumes" not in spec and "tolerations" not in spec and "serviceAccountName" not in spec


def test_pod_templates_list_watch_replace_patch_delete(api, ns) -> None:  # noqa: F811
    for i in range(3):
        call(core(api).create_namespaced_pod_template, ns, _template(f"t{i}", {"job": "a" if i < 2 else "b"}))
    page = call(core(api).list_namespaced_pod_template, ns, label_selector="job=a", limit=1)
    assert [t["metadata"]["name"] for t in page["items"]] == ["t0"] and "remainingItemCount" not in page["metadata"]
    rest = call(core(api).list_namespaced_pod_template, ns, label_selector="job=a", _continue=page["metadata"]["continue"])
    assert [t["metadata"]["name"] for t in rest["items"]] == ["t1"]
    current = call(core(api).read_namespaced_pod_template, "t0", ns)
    changed = copy.deepcopy(current)
    changed["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    after = call(core(api).replace_namespaced_pod_template, "t0", ns, changed)
    assert after["metadata"]["generation"] == 2
    after = call(core(api).patch_namespaced_pod_template, "t0", ns, {"metadata": {"annotations": {"a": "b"}}})
    assert after["metadata"]["generation"] == 2 and after["metadata"]["annotations"] == {"a": "b"}
    code, status = failure(core(api).replace_namespaced_pod_template, "t0", ns, changed)
    assert (code, status["reason"]) == (409, "Conflict")
    assert call(core(api).delete_namespaced_pod_template, "t0", ns)["kind"] == "PodTemplate"
    assert failure(core(api).read_namespaced_pod_template, "t0", ns)[0] == 404


def test_pod_template_validation(api, ns) -> None:  # noqa: F811
    body = _template("t")
    body["template"]["spec"]["containers"][0]["image"] = ""
    code, status = failure(core(api).create_namespaced_pod_template, ns, body)
    assert (code, status["message"]) == (422, 'PodTemplate "t" is invalid: template.spec.containers[0].image: Required value')


def test_secrets_store_string_data_as_base64_data(api, ns) -> None:  # noqa: F811
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "kubernetes.io/ssh-auth", "stringData": {"ssh-privatekey": "KEY"}}
    got = call(core(api).create_namespaced_secret, ns, body)
    assert "stringData" not in got and base64.b64decode(got["data"]["ssh-privatekey"]) == b"KEY"
    assert call(core(api).read_namespaced_secret, "s", ns)["type"] == "kubernetes.io/ssh-auth"
    code, status = failure(core(api).create_namespaced_secret, ns, {"metadata": {"name": "t"}, "type": "kubernetes.io/ssh-auth", "stringData": {"other": "x"}})
    assert (code, status["message"]) == (422, 'Secret "t" is invalid: data[ssh-privatekey]: Required value')
    assert call(core(api).create_namespaced_secret, ns, {"metadata": {"name": "u"}})["type"] == "Opaque"
    deleted = call(core(api).delete_namespaced_secret, "s", ns)
    assert (deleted["kind"], deleted["status"]) == ("Status", "Success")


def test_core_and_events_k8s_io_events_share_one_storage(api, ns) -> None:  # noqa: F811
    legacy = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns}, "reason": "Started", "message": "m", "type": "Normal"}
    call(core(api).create_namespaced_event, ns, legacy)
    modern = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"}, "eventTime": "2024-01-01T00:00:00.000000Z",
        "reportingController": "flatjob.dev/runtime", "reportingInstance": "r-1", "action": "Release", "reason": "Released",
        "type": "Normal", "note": "released", "regarding": {"kind": "Pod", "name": "p", "namespace": ns},
    }
    call(client.EventsV1Api(api).create_namespaced_event, ns, modern)
    names = {e["metadata"]["name"]: e for e in call(core(api).list_namespaced_event, ns)["items"]}
    assert set(names) == {"e1", "e2"} and names["e2"]["message"] == "released" and names["e2"]["reportingComponent"] == "flatjob.dev/runtime"
    back = call(client.EventsV1Api(api).read_namespaced_event, "e1", ns)
    assert back["note"] == "m" and back["regarding"]["name"] == "p"


def test_events_k8s_io_validation(api, ns) -> None:  # noqa: F811
    code, status = failure(client.EventsV1Api(api).create_namespaced_event, ns, {"metadata": {"name": "e"}, "eventTime": "2024-01-01T00:00:00.000000Z", "regarding": {"namespace": ns}, "type": "Normal"})
    assert code == 422
    assert status["message"] == 'Event.events.k8s.io "e" is invalid: [reportingController: Required value, reportingInstance: Required value, action: Required value, reason: Required value]'


def test_leases_get_create_replace_conflict_delete(api, ns) -> None:  # noqa: F811
    leases = client.CoordinationV1Api(api)
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 30, "renewTime": "2024-01-01T00:00:00.000000Z"}}
    created = call(leases.create_namespaced_lease, ns, body)
    renewed = copy.deepcopy(created)
    renewed["spec"]["renewTime"] = "2024-01-01T00:00:10.000000Z"
    after = call(leases.replace_namespaced_lease, "l", ns, renewed)
    assert int(after["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    code, status = failure(leases.replace_namespaced_lease, "l", ns, renewed)  # the stale resourceVersion
    assert (code, status["message"]) == (409, 'Operation cannot be fulfilled on leases.coordination.k8s.io "l": the object has been modified; please apply your changes to the latest version and try again')
    unconditional = copy.deepcopy(after)
    del unconditional["metadata"]["resourceVersion"]
    unconditional["spec"]["holderIdentity"] = "b"
    assert call(leases.replace_namespaced_lease, "l", ns, unconditional)["spec"]["holderIdentity"] == "b"  # Leases allow it
    code, status = failure(leases.create_namespaced_lease, ns, {**body, "spec": {"leaseDurationSeconds": 0}})
    assert code == 422  # validation comes before storage's AlreadyExists
    code, status = failure(leases.create_namespaced_lease, ns, {**body, "metadata": {"name": "m"}, "spec": {"leaseDurationSeconds": 0}})
    assert (code, status["message"]) == (422, 'Lease.coordination.k8s.io "m" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0')
    call(leases.delete_namespaced_lease, "l", ns)
    assert failure(leases.read_namespaced_lease, "l", ns)[0] == 404


def test_discovery_and_version(api, server) -> None:  # noqa: F811
    assert call(client.VersionApi(api).get_code)["gitVersion"].startswith("v1.32")
    groups = {g["name"] for g in call(client.ApisApi(api).get_api_versions)["groups"]}
    assert {"flatjob.dev", "coordination.k8s.io", "events.k8s.io", "scheduler.tensorstack.dev"} <= groups
    resources = {r["name"] for r in raw(server, "GET", "/apis/flatjob.dev/v1beta1")[1]["resources"]}
    assert {"pytorchtrainingjobs", "pytorchtrainingjobs/status", "pytorchtrainingjobs/scale", "genericjobs"} <= resources
    code, status, _ = raw(server, "GET", "/api/v1/namespaces/x/widgets")
    assert (code, status["reason"]) == (404, "NotFound")
