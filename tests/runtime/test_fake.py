"""The fake API server (runtime.sim.cluster.FakeCluster) behaves like kube-apiserver where the runtime
depends on it:

- resourceVersion on every write; 409 on a stale status update and on a delete whose UID
  precondition fails; AlreadyExists; NotFound;
- JSON patches: a failed `test` or a missing path is 422, as kube-apiserver answers;
- watches from a resourceVersion return exactly the later events; 410 after compaction and
  after the history overflows;
- status writes keep generation, spec writes bump it; the scale subresource;
- pods: scheduling gates can be removed but never added, any other spec change is 422;
  graceful deletion of running pods.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from propertykit import examples

from flatjob.compiler import keys
from flatjob.runtime.api import AlreadyExists, ApiError, Conflict, Expired, Invalid, NotFound
from flatjob.runtime.sim.cluster import Crash, FakeCluster

NS = "default"
PLURAL = "pytorchtrainingjobs"
GATE = keys.RELEASE_GATE
SELECTOR = {keys.JOB_NAME: "j"}


def pod_body(name: str = "j-worker-0", gates: tuple[str, ...] = (GATE,), job: str = "j") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {keys.JOB_NAME: job}, "annotations": {"a": "1"}},
        "spec": {"schedulingGates": [{"name": g} for g in gates], "containers": [{"name": "c", "image": "busybox"}]},
    }


def record_body(expected: int | None = 2) -> dict[str, Any]:
    worker = {"type": "worker", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    spec: dict[str, Any] = {"replicaSpecs": [worker]}
    if expected is not None:
        spec["elastic"] = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": expected}
    return {"apiVersion": "flatjob.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": "j", "namespace": NS}, "spec": spec}


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


def ungate(uid: str) -> list[dict[str, Any]]:
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/spec/schedulingGates/0/name", "value": GATE},
        {"op": "remove", "path": "/spec/schedulingGates/0"},
    ]


# --- resourceVersion, conflicts, existence ----------------------------------------------------

def test_resource_version_increases_on_every_write(cluster: FakeCluster) -> None:
    seen = [rv(cluster.create_pod(NS, pod_body()))]
    uid = cluster.pods()["j-worker-0"]["metadata"]["uid"]
    seen.append(rv(cluster.patch_pod(NS, "j-worker-0", ungate(uid))))
    cluster.set_pod_status(NS, "j-worker-0", {"phase": "Running"})
    seen.append(rv(cluster.pods()["j-worker-0"]))
    seen.append(rv(cluster.apply_record(NS, PLURAL, record_body())))
    record = cluster.record(NS, PLURAL, "j")
    seen.append(rv(cluster.replace_record_status(NS, PLURAL, {**record, "status": {"phase": "Running"}})))
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    _, list_rv = cluster.list_pods(NS, SELECTOR)
    assert int(list_rv) == cluster.rv == seen[-1]


def test_a_stale_status_update_is_409_and_changes_nothing(cluster: FakeCluster) -> None:
    cluster.apply_record(NS, PLURAL, record_body())
    old = cluster.record(NS, PLURAL, "j")
    cluster.replace_record_status(NS, PLURAL, {**old, "status": {"phase": "Running"}})
    with pytest.raises(Conflict) as err:
        cluster.replace_record_status(NS, PLURAL, {**old, "status": {"phase": "Failed"}})
    assert err.value.status == 409
    assert cluster.record(NS, PLURAL, "j")["status"] == {"phase": "Running"}


def test_a_status_write_keeps_spec_and_generation(cluster: FakeCluster) -> None:
    cluster.apply_record(NS, PLURAL, record_body())
    record = cluster.record(NS, PLURAL, "j")
    body = copy.deepcopy(record)
    body["spec"] = {"tampered": True}
    body["status"] = {"phase": "Running"}
    after = cluster.replace_record_status(NS, PLURAL, body)
    assert after["spec"] == record["spec"]
    assert after["metadata"]["generation"] == record["metadata"]["generation"] == 1


def test_a_spec_change_bumps_generation_and_keeps_status(cluster: FakeCluster) -> None:
    cluster.apply_record(NS, PLURAL, record_body())
    record = cluster.record(NS, PLURAL, "j")
    cluster.replace_record_status(NS, PLURAL, {**record, "status": {"phase": "Running"}})
    same = cluster.apply_record(NS, PLURAL, record_body())
    assert same["metadata"]["generation"] == 1  # nothing changed: no new generation
    edited = record_body()
    edited["spec"]["replicaSpecs"][0]["replicas"] = 2
    after = cluster.apply_record(NS, PLURAL, edited)
    assert after["metadata"]["generation"] == 2
    assert after["status"] == {"phase": "Running"}


def test_create_twice_is_already_exists(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body())
    with pytest.raises(AlreadyExists) as err:
        cluster.create_pod(NS, pod_body())
    assert (err.value.status, err.value.reason) == (409, "AlreadyExists")
    cluster.create_secret(NS, {"metadata": {"name": "s"}})
    with pytest.raises(AlreadyExists):
        cluster.create_secret(NS, {"metadata": {"name": "s"}})


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.get_secret(NS, "nope"),
        lambda c: c.get_podgroup(NS, "nope"),
        lambda c: c.get_lease(NS, "nope"),
        lambda c: c.delete_pod(NS, "nope", None),
        lambda c: c.patch_pod(NS, "nope", []),
        lambda c: c.replace_record_status(NS, PLURAL, record_body()),
    ],
    ids=["secret", "podgroup", "lease", "delete-pod", "patch-pod", "record-status"],
)
def test_missing_objects_are_404(cluster: FakeCluster, call: Any) -> None:
    with pytest.raises(NotFound) as err:
        call(cluster)
    assert err.value.status == 404


# --- UID preconditions and JSON patches -----------------------------------------------------------

def test_delete_with_a_stale_uid_is_409(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body())
    with pytest.raises(Conflict):
        cluster.delete_pod(NS, "j-worker-0", "uid-of-an-older-incarnation")
    assert "j-worker-0" in cluster.pods()
    cluster.delete_pod(NS, "j-worker-0", cluster.pods()["j-worker-0"]["metadata"]["uid"])
    assert "j-worker-0" not in cluster.pods()


def test_delete_without_precondition(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body())
    cluster.delete_pod(NS, "j-worker-0", None)
    assert cluster.pods() == {}


def test_patch_test_on_a_stale_uid_is_422_and_changes_nothing(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body())
    before = copy.deepcopy(cluster.pods()["j-worker-0"])
    with pytest.raises(Invalid) as err:
        cluster.patch_pod(NS, "j-worker-0", ungate("uid-of-an-older-incarnation"))
    assert err.value.status == 422
    assert cluster.pods()["j-worker-0"] == before


def test_patch_test_passes_then_applies(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body())
    uid = cluster.pods()["j-worker-0"]["metadata"]["uid"]
    ops = [*ungate(uid), {"op": "add", "path": "/metadata/annotations/flatjob.dev~1attempt", "value": "2"}]
    after = cluster.patch_pod(NS, "j-worker-0", ops)
    assert after["spec"]["schedulingGates"] == []
    assert after["metadata"]["annotations"] == {"a": "1", "flatjob.dev/attempt": "2"}


@pytest.mark.parametrize(
    "op",
    [
        {"op": "test", "path": "/metadata/nothing", "value": "x"},
        {"op": "remove", "path": "/metadata/labels/absent"},
        {"op": "add", "path": "/metadata/missing/key", "value": "x"},
        {"op": "remove", "path": "/spec/schedulingGates/5"},
        {"op": "replace", "path": "/metadata/labels/absent", "value": "x"},
        {"op": "add", "path": "/spec/schedulingGates/x", "value": {"name": "g"}},
        {"op": "frobnicate", "path": "/metadata/name"},
        {"op": "move", "path": "/metadata/labels/x", "from": "/metadata/labels/absent"},
    ],
    ids=["test-missing", "remove-missing", "add-under-missing-parent", "remove-beyond-list", "replace-missing", "bad-index", "unsupported-op", "move-missing"],
)
def test_a_patch_that_cannot_apply_is_422(cluster: FakeCluster, op: dict[str, Any]) -> None:
    cluster.create_pod(NS, pod_body())
    before = copy.deepcopy(cluster.pods()["j-worker-0"])
    with pytest.raises(Invalid):
        cluster.patch_pod(NS, "j-worker-0", [op])
    assert cluster.pods()["j-worker-0"] == before


# --- pod immutability ------------------------------------------------------------------------------

def test_scheduling_gates_can_be_removed_one_by_one(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body(gates=("kueue.x-k8s.io/admission", GATE)))
    after = cluster.patch_pod(NS, "j-worker-0", [{"op": "remove", "path": "/spec/schedulingGates/1"}])
    assert after["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]


@pytest.mark.parametrize(
    ("gates", "ops"),
    [
        pytest.param((), [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}], id="to-an-ungated-pod"),
        pytest.param((GATE,), [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "other"}}], id="next-to-another-gate"),
        pytest.param((GATE,), [{"op": "replace", "path": "/spec/schedulingGates/0/name", "value": "other"}], id="by-renaming-one"),
    ],
)
def test_scheduling_gates_can_never_be_added(cluster: FakeCluster, gates: tuple[str, ...], ops: list[dict[str, Any]]) -> None:
    cluster.create_pod(NS, pod_body(gates=gates))
    with pytest.raises(Invalid) as err:
        cluster.patch_pod(NS, "j-worker-0", ops)
    assert err.value.status == 422


@pytest.mark.parametrize(
    "op",
    [
        {"op": "add", "path": "/spec/nodeName", "value": "n1"},
        {"op": "replace", "path": "/spec/containers/0/name", "value": "d"},
        {"op": "add", "path": "/spec/containers/0/args", "value": ["x"]},
    ],
    ids=["node-name", "container-name", "args"],
)
def test_other_pod_spec_changes_are_422(cluster: FakeCluster, op: dict[str, Any]) -> None:
    cluster.create_pod(NS, pod_body())
    with pytest.raises(Invalid):
        cluster.patch_pod(NS, "j-worker-0", [op])


def test_metadata_of_a_pod_may_change(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body())
    after = cluster.patch_pod(NS, "j-worker-0", [{"op": "add", "path": "/metadata/labels/x", "value": "y"}])
    assert after["metadata"]["labels"]["x"] == "y"


def test_a_created_pod_gets_uid_and_pending_status(cluster: FakeCluster) -> None:
    first = cluster.create_pod(NS, pod_body())
    cluster.delete_pod(NS, "j-worker-0", None)
    second = cluster.create_pod(NS, pod_body())
    assert (first["status"]["phase"], first["status"]["qosClass"]) == ("Pending", "BestEffort")
    assert first["metadata"]["uid"] != second["metadata"]["uid"]


# --- graceful deletion -------------------------------------------------------------------------------

def test_a_running_pod_is_deleted_gracefully(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body(gates=()))
    cluster.bind_pod(NS, "j-worker-0", "node-1")
    cluster.set_pod_status(NS, "j-worker-0", {"phase": "Running"})
    watch = cluster.watch_pods(NS, SELECTOR, str(cluster.rv))
    cluster.delete_pod(NS, "j-worker-0", None)
    pod = cluster.pods()["j-worker-0"]
    assert pod["metadata"]["deletionTimestamp"] is not None
    cluster.delete_pod(NS, "j-worker-0", None)  # again: nothing more happens
    assert [e for e, _ in watch.next_events()] == ["MODIFIED"]
    cluster.set_pod_status(NS, "j-worker-0", {}, remove=True)  # the kubelet confirms (grace 0): marked, then removed
    events = watch.next_events()
    assert [e for e, _ in events] == ["MODIFIED", "DELETED"]
    assert events[1][1]["metadata"]["deletionGracePeriodSeconds"] == 0 and events[1][1]["metadata"]["deletionTimestamp"]


@pytest.mark.parametrize("phase", ["Pending", "Succeeded", "Failed"])
def test_a_pod_that_does_not_run_is_deleted_at_once(cluster: FakeCluster, phase: str) -> None:
    cluster.create_pod(NS, pod_body())
    cluster.set_pod_status(NS, "j-worker-0", {"phase": phase})
    watch = cluster.watch_pods(NS, SELECTOR, str(cluster.rv))
    cluster.delete_pod(NS, "j-worker-0", None)
    assert cluster.pods() == {}
    # registry/store.go Delete, "two phases": deletionTimestamp and grace 0 are written, then the
    # object goes, so the DELETED event dates the deletion (a pod that ended before it is told apart)
    (modified, marked), (deleted, last) = watch.next_events()
    assert (modified, deleted) == ("MODIFIED", "DELETED") and last["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]


# --- watches -------------------------------------------------------------------------------------------

def test_a_watch_returns_exactly_the_later_events(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body("j-worker-0"))
    _, since = cluster.list_pods(NS, SELECTOR)
    watch = cluster.watch_pods(NS, SELECTOR, since)
    assert watch.next_events() == []
    cluster.create_pod(NS, pod_body("j-worker-1"))
    cluster.create_pod(NS, pod_body("other-worker-0", job="other"))  # another job: filtered out
    cluster.set_pod_status(NS, "j-worker-0", {"phase": "Running"})
    cluster.delete_pod(NS, "j-worker-1", None)
    events = [(e, o["metadata"]["name"]) for e, o in watch.next_events()]
    assert events == [("ADDED", "j-worker-1"), ("MODIFIED", "j-worker-0"), ("MODIFIED", "j-worker-1"), ("DELETED", "j-worker-1")]  # a pod deleted at once: marked, then gone
    assert watch.next_events() == []


def test_watch_events_are_copies(cluster: FakeCluster) -> None:
    watch = cluster.watch_pods(NS, SELECTOR, "0")
    cluster.create_pod(NS, pod_body())
    (_, obj), = watch.next_events()
    obj["metadata"]["labels"]["mutated"] = "yes"
    assert "mutated" not in cluster.pods()["j-worker-0"]["metadata"]["labels"]


def test_record_watches_see_only_their_record(cluster: FakeCluster) -> None:
    watch = cluster.watch_records(NS, PLURAL, "j", "0")
    cluster.apply_record(NS, PLURAL, record_body())
    other = record_body()
    other["metadata"]["name"] = "k"
    cluster.apply_record(NS, PLURAL, other)
    assert [o["metadata"]["name"] for _, o in watch.next_events()] == ["j"]


def test_410_after_compaction(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body("j-worker-0"))
    watch = cluster.watch_pods(NS, SELECTOR, "0")
    cluster.create_pod(NS, pod_body("j-worker-1"))
    cluster.compact()
    with pytest.raises(Expired) as err:
        watch.next_events()
    assert err.value.status == 410
    items, since = cluster.list_pods(NS, SELECTOR)  # relist, then watch from there
    assert sorted(o["metadata"]["name"] for o in items) == ["j-worker-0", "j-worker-1"]
    fresh = cluster.watch_pods(NS, SELECTOR, since)
    cluster.create_pod(NS, pod_body("j-worker-2"))
    assert [o["metadata"]["name"] for _, o in fresh.next_events()] == ["j-worker-2"]


def test_410_after_history_overflow() -> None:
    cluster = FakeCluster(history=5)
    cluster.create_pod(NS, pod_body())
    slow = cluster.watch_pods(NS, SELECTOR, str(cluster.rv))
    keeping_up = cluster.watch_pods(NS, SELECTOR, str(cluster.rv))
    for i in range(12):
        cluster.set_pod_status(NS, "j-worker-0", {"phase": "Running", "message": str(i)})
        if i % 4 == 0:
            assert len(keeping_up.next_events()) >= 1
    with pytest.raises(Expired):
        slow.next_events()
    assert len(cluster.log) == 5
    assert [o["status"]["message"] for _, o in keeping_up.next_events()] == ["9", "10", "11"]


# --- scale subresource ------------------------------------------------------------------------------

def test_scale_sets_expected_replicas_and_bumps_generation(cluster: FakeCluster) -> None:
    cluster.apply_record(NS, PLURAL, record_body(expected=2))
    watch = cluster.watch_records(NS, PLURAL, "j", str(cluster.rv))
    after = cluster.scale_record(NS, PLURAL, "j", 3)
    assert after["spec"]["elastic"]["expectedReplicas"] == 3
    assert after["metadata"]["generation"] == 2
    assert [e for e, _ in watch.next_events()] == ["MODIFIED"]


def test_scale_to_the_same_size_changes_nothing(cluster: FakeCluster) -> None:
    cluster.apply_record(NS, PLURAL, record_body(expected=2))
    before = cluster.rv
    after = cluster.scale_record(NS, PLURAL, "j", 2)
    assert (after["metadata"]["generation"], cluster.rv) == (1, before)


def test_scale_of_a_job_that_is_not_elastic_writes_the_path(cluster: FakeCluster) -> None:
    """ScaleREST reads a missing specReplicasPath as 0 and a write creates it (as kube-apiserver)."""
    cluster.apply_record(NS, PLURAL, record_body(expected=None))
    after = cluster.scale_record(NS, PLURAL, "j", 3)
    assert after["spec"]["elastic"] == {"expectedReplicas": 3}


# --- accounting and crash injection ------------------------------------------------------------------

def test_calls_are_counted(cluster: FakeCluster) -> None:
    cluster.create_pod(NS, pod_body())
    cluster.list_pods(NS, SELECTOR)
    with pytest.raises(NotFound):
        cluster.get_secret(NS, "s")
    assert (cluster.calls["create_pod"], cluster.calls["list_pods"], cluster.calls["get_secret"]) == (1, 1, 1)


def test_crash_after_kills_the_nth_next_mutating_call(cluster: FakeCluster) -> None:
    cluster.crash_after = 1
    cluster.create_pod(NS, pod_body("j-worker-0"))
    cluster.list_pods(NS, SELECTOR)  # reads do not count
    with pytest.raises(Crash):
        cluster.create_pod(NS, pod_body("j-worker-1"))
    assert list(cluster.pods()) == ["j-worker-0"]
    assert not isinstance(Crash("x"), Exception)  # never swallowed by `except Exception`
    cluster.create_pod(NS, pod_body("j-worker-1"))  # one crash only


def test_api_errors_carry_status_and_reason() -> None:
    assert [(e.status, e.reason) for e in (NotFound(), Conflict(), AlreadyExists(), Expired(), Invalid(), ApiError())] == [
        (404, "NotFound"), (409, "Conflict"), (409, "AlreadyExists"), (410, "Expired"), (422, "Invalid"), (500, "InternalError"),
    ]


# --- properties of the store, whatever the sequence of calls ----------------------------------------

_NAMES = ("a", "b", "c")


def _op(cluster: FakeCluster, op: tuple[str, str, int]) -> None:
    """One call of a small alphabet of the calls tests, the kubelet and GitOps tools make."""
    kind, name, n = op
    pods = cluster.pods()
    uid = pods[name]["metadata"]["uid"] if name in pods else "gone"
    calls = {
        "create": lambda: cluster.create_pod(NS, pod_body(name, gates=(GATE,) * (n % 2))),
        "ungate": lambda: cluster.patch_pod(NS, name, ungate(uid)),
        "label": lambda: cluster.patch_pod(NS, name, {"metadata": {"labels": {"n": str(n)}}}),
        "bind": lambda: cluster.bind_pod(NS, name, "node"),
        "run": lambda: cluster.set_pod_status(NS, name, {"phase": ("Running", "Succeeded", "Failed")[n % 3]}),
        "delete": lambda: cluster.delete_pod(NS, name, uid if n % 2 else None),
        "kill": lambda: cluster.set_pod_status(NS, name, {}, remove=True),
        "record": lambda: cluster.apply_record(NS, PLURAL, record_body(expected=1 + n % 3)),
        "scale": lambda: cluster.scale_record(NS, PLURAL, "j", n % 3),
        "status": lambda: cluster.replace_record_status(NS, PLURAL, {**cluster.record(NS, PLURAL, "j"), "status": {"phase": str(n)}}),
        "unrecord": lambda: cluster.delete_record(NS, PLURAL, "j"),
        "secret": lambda: cluster.create_secret(NS, {"metadata": {"name": name, "ownerReferences": [{"apiVersion": "flatjob.dev/v1beta1", "kind": "PyTorchTrainingJob", "name": "j", "uid": cluster.objects.get(("records/pytorchtrainingjobs", NS, "j"), {"metadata": {"uid": "x"}})["metadata"]["uid"]}]}}),
    }
    calls[kind]()


_OPS = st.tuples(st.sampled_from(["create", "ungate", "label", "bind", "run", "delete", "kill", "record", "scale", "status", "unrecord", "secret"]), st.sampled_from(_NAMES), st.integers(0, 5))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_OPS, max_size=25))
def test_the_store_keeps_its_invariants(ops: list[tuple[str, str, int]]) -> None:
    """A refused call changes nothing; stored objects are never changed in place (the log and
    list snapshots share them); resourceVersions grow; the indexes match the objects; replaying
    a watch from the start rebuilds exactly the current pods."""
    cluster = FakeCluster(lambda: 1_700_000_000.0)
    logged: list[tuple[Any, dict[str, Any]]] = []
    cluster.store.listeners.append(lambda change: logged.append((change, copy.deepcopy(change.obj))))
    replay = cluster.watch_pods(NS, {}, "0")
    for op in ops:
        before, rv = copy.deepcopy(cluster.objects), cluster.rv
        try:
            _op(cluster, op)
        except ApiError:
            assert cluster.objects == before and cluster.rv == rv, op
    assert all(change.obj == snapshot for change, snapshot in logged)
    assert [c.rv for c, _ in logged] == sorted({c.rv for c, _ in logged})
    for resource in {k[0] for k in cluster.objects} | set(cluster.store.keys_of):
        assert cluster.store.keys_of.get(resource, set()) == {k for k in cluster.objects if k[0] == resource}
    state: dict[str, Any] = {}
    for etype, obj in replay.next_events():
        if etype == "DELETED":
            state.pop(obj["metadata"]["name"])
        else:
            state[obj["metadata"]["name"]] = obj
    assert state == cluster.pods()
