"""ResourceQuota over HTTP: gated pods are charged from creation, a create over quota is 403 in
kube-apiserver's words, terminal and deleted pods release their charge; quantities parsed."""

from __future__ import annotations

import pytest

from flatjob.runtime.sim.apiserver import quantity, quota
from flatjob.runtime.sim.apiserver.quota import catch_up

from .fakeserverkit import api, call, core, failure, ns, pod, server  # noqa: F401


@pytest.mark.parametrize(("text", "canonical"), [
    ("1", "1"), ("1.0", "1"), (1.0, "1"), (2, "2"), ("0.5", "500m"), ("500m", "500m"), ("1500m", "1500m"), ("1.5", "1500m"),
    ("1000", "1k"), ("2000000", "2M"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1536Mi", "1536Mi"), ("1.5Gi", "1536Mi"),
    ("512Ki", "512Ki"), ("1023Mi", "1023Mi"), ("1e3", "1e3"), ("0.1m", "100u"), ("0", "0"), ("-2", "-2"), ("1n", "1n"),
    ("0.0000000001", "1n"),
])
def test_quantities_print_canonically(text, canonical) -> None:
    assert quantity.canonical_text(text) == canonical


@pytest.mark.parametrize("bad", ["", "one", "1.2.3", "1Xi", True, None, "--1"])
def test_what_is_not_a_quantity(bad) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse(bad)


def _quota(api, ns, hard):  # noqa: F811
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": hard}}
    return call(core(api).create_namespaced_resource_quota, ns, body)


def _gpu_pod(name, gpus="1", cpu="1"):
    body = pod(name)  # gated
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}
    return body


def _used(api, ns):  # noqa: F811
    return call(core(api).read_namespaced_resource_quota, "q", ns)["status"]["used"]


def test_quota_gated_pods_are_charged_and_the_one_over_is_403(api, ns) -> None:  # noqa: F811
    created = _quota(api, ns, {"pods": "2", "count/pods": "3", "requests.cpu": "2.0", "requests.nvidia.com/gpu": "2"})
    assert created["status"] == {"hard": {"pods": "2", "count/pods": "3", "requests.cpu": "2", "requests.nvidia.com/gpu": "2"}, "used": {"pods": "0", "count/pods": "0", "requests.cpu": "0", "requests.nvidia.com/gpu": "0"}}
    call(core(api).create_namespaced_pod, ns, _gpu_pod("p1", cpu="500m"))
    assert _used(api, ns) == {"pods": "1", "count/pods": "1", "requests.cpu": "500m", "requests.nvidia.com/gpu": "1"}
    call(core(api).create_namespaced_pod, ns, _gpu_pod("p2", cpu="1500m"))
    assert _used(api, ns) == {"pods": "2", "count/pods": "2", "requests.cpu": "2", "requests.nvidia.com/gpu": "2"}
    code, status = failure(core(api).create_namespaced_pod, ns, _gpu_pod("p3"))
    assert (code, status["reason"], status["details"]) == (403, "Forbidden", {"name": "p3", "kind": "pods"})
    assert status["message"] == (
        'pods "p3" is forbidden: exceeded quota: q, requested: pods=1,requests.cpu=1,requests.nvidia.com/gpu=1, '
        "used: pods=2,requests.cpu=2,requests.nvidia.com/gpu=2, limited: pods=2,requests.cpu=2,requests.nvidia.com/gpu=2"
    )


def test_quota_terminal_and_deleted_pods_release_their_charge_once_the_controller_sees_it(api, ns, server) -> None:  # noqa: F811
    """Admission adds a new pod's charge at once; only the quota controller takes one off, once
    it has seen the pod end or go (resource_quota_controller.go replenishment): until then a
    pod created in its predecessor's place is refused (review 23, round 15: the stand-in
    released at once, kinder than a cluster)."""
    clock = server.cluster.store.clock
    _quota(api, ns, {"pods": "1", "count/pods": "2", "requests.nvidia.com/gpu": "1"})
    call(core(api).create_namespaced_pod, ns, _gpu_pod("p1", gpus="1"))
    call(core(api).patch_namespaced_pod, "p1", ns, [{"op": "remove", "path": "/spec/schedulingGates"}])
    server.cluster.bind_pod(ns, "p1", "n1")
    server.cluster.set_pod_status(ns, "p1", {"phase": "Failed"})
    assert _used(api, ns) == {"pods": "1", "count/pods": "1", "requests.nvidia.com/gpu": "1"}  # not yet seen
    code, status = failure(core(api).create_namespaced_pod, ns, _gpu_pod("p2", gpus="1"))
    assert code == 403 and "exceeded quota: q, requested: pods=1,requests.nvidia.com/gpu=1, used: pods=1," in status["message"]
    clock.now += quota.RELEASE_AFTER
    call(core(api).create_namespaced_pod, ns, _gpu_pod("p2", gpus="1"))  # the controller caught up: admitted
    assert _used(api, ns) == {"pods": "1", "count/pods": "2", "requests.nvidia.com/gpu": "1"}  # count/pods counts every pod
    code, status = failure(core(api).create_namespaced_pod, ns, _gpu_pod("p3", gpus="0"))
    assert code == 403 and "exceeded quota: q, requested: count/pods=1,pods=1," in status["message"]
    call(core(api).delete_namespaced_pod, "p1", ns)
    call(core(api).delete_namespaced_pod, "p2", ns)
    clock.now += quota.RELEASE_AFTER
    assert catch_up(server.cluster.store)
    assert _used(api, ns) == {"pods": "0", "count/pods": "0", "requests.nvidia.com/gpu": "0"}


def test_quota_on_cpu_or_memory_needs_every_container_to_state_it(api, ns) -> None:  # noqa: F811
    _quota(api, ns, {"requests.memory": "1Gi", "limits.cpu": "4"})
    code, status = failure(core(api).create_namespaced_pod, ns, _gpu_pod("p"))
    assert (code, status["message"]) == (403, 'pods "p" is forbidden: failed quota: q: must specify limits.cpu for: c; requests.memory for: c')


def test_quota_memory_sums_in_the_pods_format(api, ns) -> None:  # noqa: F811
    _quota(api, ns, {"requests.memory": "2Gi"})
    for i in range(2):
        body = pod(f"p{i}")
        body["spec"]["containers"][0]["resources"] = {"requests": {"memory": "768Mi"}}
        call(core(api).create_namespaced_pod, ns, body)
    assert _used(api, ns) == {"requests.memory": "1536Mi"}
    body = pod("p2")
    body["spec"]["containers"][0]["resources"] = {"requests": {"memory": "1Gi"}}
    code, status = failure(core(api).create_namespaced_pod, ns, body)
    assert code == 403
    assert status["message"] == 'pods "p2" is forbidden: exceeded quota: q, requested: requests.memory=1Gi, used: requests.memory=1536Mi, limited: requests.memory=2Gi'


def test_quota_init_containers_take_their_maximum(api, ns) -> None:  # noqa: F811
    _quota(api, ns, {"requests.cpu": "10"})
    body = pod("p")
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    body["spec"]["initContainers"] = [{"name": "i", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]
    call(core(api).create_namespaced_pod, ns, body)
    assert _used(api, ns) == {"requests.cpu": "3"}
