"""Two jobs of one name and different kinds in one namespace, compiled from two folders (so
compile's FJ315 never sees both): a PyTorchTrainingJob `x` runs, then a DeepSpeedJob `x` is
applied beside it.  Their pods (`x-worker-0`, `x-worker-1`), PodTemplates and Service share
names (docs/runtime.md, "Two jobs of one name"; runtime/namesakes.py).

- the first job's pods are never touched (no create, delete or patch of a pod after the second
  arrives) and run on; its status names the PodTemplates the second job's apply took over;
- the second job creates and releases no pod while the first job's pods hold its names, says
  why (Stalled, reason NameTaken, naming the other job) in one Warning Event and a status
  written a bounded number of times (no flapping: before, it tried to create `x-worker-0` again
  after each back-off, with a status write and an Event each time, and blamed "someone" who
  took the pod's labels off);
- once the first job's record is deleted (its pods with it), the second runs, its pods its own.
- two jobs each holding a pod name of the other's (started together, in different modes) do
  not both wait for good: each gives its unreleased gang's names back, and the one whose
  PodTemplates are in place runs;
Both runtime modes: one namespace runtime serves both jobs, or one runtime per job.
"""

from __future__ import annotations

from typing import Any

import pytest

from flatjob.compiler import keys
from flatjob.compiler.options import CompileOptions
from flatjob.runtime.api import ApiError
from flatjob.runtime.controller import Controller
from flatjob.runtime.lookups import SECRET_TTL
from flatjob.runtime.namesakes import NameTaken, podgroup_taken, pods_taken
from flatjob.runtime.sshkeys import foreign_secret

from .gitops import _Tool
from .harness import MODE, NAMESPACE, REAL, Scenario, compile_text
from .test_scenarios import DEEPSPEED, pytorch

pytestmark = pytest.mark.skipif(REAL, reason="two runtimes on one virtual clock")

FIRST = pytorch(master="sleep 3000", worker="sleep 3000").replace("name: sim", "name: x")
SECOND = DEEPSPEED.replace("name: ds", "name: x")
SECOND_PODS = ("x-worker-0", "x-worker-1", "x-worker-2")
GRACE = 30  # seconds the first job's pods take to go (`sleep` as PID 1 ignores SIGTERM)


def _condition(st: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c["type"] == ctype), {})


def _events(s: Scenario, kind: str, reason: str) -> list[dict[str, Any]]:
    return [o for (r, _, _), o in s.cluster.objects.items() if r == "events" and o.get("reason") == reason and (o.get("involvedObject") or o.get("regarding") or {}).get("kind") == kind]


def test_a_namesake_of_another_kind_from_another_folder_never_touches_the_first_jobs_pods_and_says_why(runtime_mode: str) -> None:
    s = Scenario(FIRST)
    s.run_until(lambda st: (st.get("aggregate") or {}).get("running") == 3, limit=60)
    first = {n: p["metadata"]["uid"] for n, p in s.pods().items()}
    for name in SECOND_PODS:  # the second job's workers, once they start, run till the test ends
        s.kubelet.behaviors[name] = lambda pod, env: (float("inf"), None)
    second_folder = compile_text(SECOND, CompileOptions(namespace=NAMESPACE, runtime=runtime_mode))  # type: ignore[arg-type]
    _Tool(s.cluster, second_folder).reconcile()  # `kubectl apply -k` of the other folder: its PodTemplates overwrite the first's of the same names
    second_runtime = None
    if runtime_mode == "job":  # the second job's own runtime, beside the first's (same process name: the harness's chaos hook lets it through)
        second_runtime = Controller(s.kube(f"runtime-{s.generation}"), NAMESPACE, "DeepSpeedJob", "x", identity=f"runtime-{s.generation}", clock=s.clock, use_lease=False)
        second_runtime.start()
    start = len(s.server.log)
    try:
        for _ in range(90):
            s.tick()
            if second_runtime is not None:
                s.step_other(second_runtime)
        writes = [r for r in s.server.log[start:] if r.verb in ("create", "update", "patch", "delete")]
        assert not [(r.verb, r.name) for r in writes if r.resource == "pods"], "a pod was created, patched or deleted"
        assert {n: p["metadata"]["uid"] for n, p in s.pods().items()} == first
        assert all(p["status"]["phase"] == "Running" for p in s.pods().values())

        second = s.cluster.record_status(NAMESPACE, "deepspeedjobs", "x")
        stalled = _condition(second, "Stalled")
        assert (stalled.get("status"), stalled.get("reason")) == ("True", "NameTaken"), second.get("conditions")
        assert "pods x-worker-0, x-worker-1 belong to PyTorchTrainingJob x" in stalled["message"] and "never touches them" in stalled["message"], stalled["message"]
        said = _events(s, "DeepSpeedJob", "NameTaken")
        assert len(said) == 1 and said[0].get("count", 1) == 1 and said[0]["type"] == "Warning", said
        status_writes = [r for r in writes if r.resource == "deepspeedjobs.flatjob.dev/status"]
        assert len(status_writes) <= 3, len(status_writes)  # said once, not re-said every back-off
        assert not _events(s, "DeepSpeedJob", "GangRefused")

        ready = _condition(s.status(), "Ready")
        assert ready["status"] == "False" and "x-worker-0, x-worker-1" in ready["message"] and "another kind named x" in ready["message"], ready
        # Its workers run on, its own by ownerReference: counted and listed though their
        # PodTemplates are the namesake's now (it said running: 1 and listed no worker).
        st = s.status()
        assert st["aggregate"]["running"] == 3, st["aggregate"]
        assert [(r["name"], r["uid"]) for t in st["tasks"] for r in t["replicas"]] == [(n, first[n]) for n in ("x-master-0", "x-worker-0", "x-worker-1")], st["tasks"]

        # The first job goes (its pods with it, by their ownerReference, after their 30 s of
        # grace): the names are free, and the second job sees so as the pods go.
        s.cluster.delete_record(NAMESPACE, "pytorchtrainingjobs", "x")
        freed = made = None
        for tick in range(GRACE + 30):
            s.tick()
            if second_runtime is not None:
                s.step_other(second_runtime)
            pods = s.pods()
            uids = {p["metadata"]["uid"] for p in pods.values()}  # by uid: the second job's pods take the freed names, at once now that it steps behind the barrier
            freed = tick if freed is None and not set(first.values()) & uids else freed
            made = tick if made is None and uids - set(first.values()) and freed is not None else made
            if sorted(pods) == list(SECOND_PODS) and all(p["status"].get("phase") == "Running" for p in pods.values()):
                break
        assert freed is not None and made is not None and made - freed <= 2, (freed, made)  # woken by the pods' going, not by a timer
        pods = s.pods()
        assert sorted(pods) == list(SECOND_PODS), (sorted(pods), s.cluster.record_status(NAMESPACE, "deepspeedjobs", "x"))
        record = s.cluster.record(NAMESPACE, "deepspeedjobs", "x")
        assert all(ref["uid"] == record["metadata"]["uid"] for p in pods.values() for ref in p["metadata"]["ownerReferences"])
        assert all(p["metadata"]["labels"][keys.JOB_KIND] == "DeepSpeedJob" for p in pods.values())
        assert _condition(s.cluster.record_status(NAMESPACE, "deepspeedjobs", "x"), "Stalled").get("status") == "False"
    finally:
        if second_runtime is not None:
            second_runtime.close()


def test_a_namesake_in_the_other_runtime_mode_is_found_by_the_create_it_refuses_and_said_once() -> None:
    """The first job has a runtime of its own, the second is served by the namespace runtime,
    which caches no pod of a record of the other mode: its first create meets the first job's
    pod (409), and from then on it says NameTaken, reads that name again every SECRET_TTL, and
    creates nothing more (before: a create, a status write and a GangRefused Event after each
    back-off, 6 creates and 19 status writes in 400 s)."""
    token = MODE.set("job")
    try:
        s = Scenario(FIRST)
    finally:
        MODE.reset(token)
    s.run_until(lambda st: (st.get("aggregate") or {}).get("running") == 3, limit=60)
    first = {n: p["metadata"]["uid"] for n, p in s.pods().items()}
    for name in SECOND_PODS:
        s.kubelet.behaviors[name] = lambda pod, env: (float("inf"), None)
    _Tool(s.cluster, compile_text(SECOND, CompileOptions(namespace=NAMESPACE, runtime="namespace"))).reconcile()
    namespace_runtime = Controller(s.kube(f"runtime-{s.generation}"), NAMESPACE, identity=f"runtime-{s.generation}", clock=s.clock, use_lease=False)
    namespace_runtime.start()
    start = len(s.server.log)
    try:
        for _ in range(400):
            s.tick()
            s.step_other(namespace_runtime)
        writes = [r for r in s.server.log[start:] if r.verb in ("create", "update", "patch", "delete")]
        assert [(r.verb, r.resource) for r in writes if r.resource == "pods"] == [("create", "pods")]  # the one that found the name taken
        assert {n: p["metadata"]["uid"] for n, p in s.pods().items()} == first
        stalled = _condition(s.cluster.record_status(NAMESPACE, "deepspeedjobs", "x"), "Stalled")
        assert (stalled.get("status"), stalled.get("reason")) == ("True", "NameTaken") and "pod x-worker-0 belongs to PyTorchTrainingJob x" in stalled["message"], stalled
        assert len([r for r in writes if r.resource == "deepspeedjobs.flatjob.dev/status"]) <= 4
        assert [e.get("count", 1) for e in _events(s, "DeepSpeedJob", "NameTaken")] == [1]
        assert not _events(s, "DeepSpeedJob", "GangRefused")

        s.cluster.delete_record(NAMESPACE, "pytorchtrainingjobs", "x")
        # The names free GRACE after the delete; the other mode's runtime reads a taken name
        # again every SECRET_TTL, whose phase against the delete varies, then its gang starts
        # (Secret, PodGroup, sshd Ready before the launcher): 38 ticks mostly, 128 seen once
        # on a loaded machine, so the bound is two re-reads and a minute beyond the grace.
        for _ in range(GRACE + 2 * int(SECRET_TTL) + 60):
            s.tick()
            s.step_other(namespace_runtime)
            if sorted(s.pods()) == list(SECOND_PODS) and all(p["status"].get("phase") == "Running" for p in s.pods().values()):
                break
        assert sorted(s.pods()) == list(SECOND_PODS) and all(p["status"].get("phase") == "Running" for p in s.pods().values())
    finally:
        namespace_runtime.close()


GENERIC_X = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: x
spec:
  successRules:
    - {"worker": [0]}
  replicaSpecs:
    - type: worker
      replicas: 1
      restartPolicy:
        policy: Never
      template:
        spec:
          containers:
            - name: main
              image: busybox:1.36
              command: [sh, -c, 'sleep 3000']
    - type: master
      replicas: 1
      restartPolicy:
        policy: Never
      template:
        spec:
          containers:
            - name: main
              image: busybox:1.36
              command: [sh, -c, 'sleep 3000']
"""


@pytest.mark.parametrize("templates", ["second", "first"])
def test_two_namesakes_each_holding_a_name_of_the_others_do_not_both_wait_forever(templates: str) -> None:
    """A GenericJob x (workers, then master) with a runtime of its own, and a PyTorchTrainingJob
    x (master first) served by the namespace runtime: neither caches the other's pods.  The
    GenericJob's create of x-master-0 fails (a 500) after x-worker-0; the PyTorchTrainingJob
    then creates x-master-0 and meets x-worker-0.  Each holds a gated pod of a name the other
    needs: both were NameTaken for good, neither ever ran.  Now each gives way (deletes its
    gated pods, namesakes.py), and the job whose PodTemplates are in place runs (`templates`:
    whose folder was applied last, as Flux's two Kustomizations take turns), never touched by
    the other."""
    token = MODE.set("job")
    try:
        s = Scenario(GENERIC_X)
    finally:
        MODE.reset(token)
    hook, creates = s.server.on_request, []

    def fail_the_second_create(verb: str, resource: str, namespace: str | None, name: str | None, agent: str) -> None:
        hook(verb, resource, namespace, name, agent)  # type: ignore[misc]
        if verb == "create" and resource == "pods" and agent.endswith("(runtime-1)"):
            creates.append(agent)
            if len(creates) == 2:
                raise ApiError("etcdserver: request timed out", status=500)

    s.server.on_request = fail_the_second_create
    s.tick()
    assert sorted(s.pods()) == ["x-worker-0"]
    _Tool(s.cluster, compile_text(FIRST, CompileOptions(namespace=NAMESPACE, runtime="namespace"))).reconcile()
    namespace_runtime = Controller(s.kube(f"runtime-{s.generation}"), NAMESPACE, identity=f"runtime-{s.generation}", clock=s.clock, use_lease=False)
    namespace_runtime.start()
    runs, waits = ("GenericJob", "PyTorchTrainingJob") if templates == "first" else ("PyTorchTrainingJob", "GenericJob")
    try:
        crossed = False
        for tick in range(int(SECRET_TTL) * 3):
            s.step_other(namespace_runtime)
            crossed |= {n: p["metadata"]["labels"][keys.JOB_KIND] for n, p in s.pods().items()} == {"x-worker-0": "GenericJob", "x-master-0": "PyTorchTrainingJob"}
            if tick == 0 and templates == "first":  # the GenericJob's folder is applied again: its PodTemplates are its own again
                _Tool(s.cluster, s.manifests).reconcile()
            s.tick()
        assert crossed  # each held a name of the other's
        pods = s.pods()
        assert pods and {p["metadata"]["labels"][keys.JOB_KIND] for p in pods.values()} == {runs}, {n: p["metadata"]["labels"][keys.JOB_KIND] for n, p in pods.items()}
        assert all(p["status"].get("phase") == "Running" for p in pods.values())
        record = s.cluster.record(NAMESPACE, f"{runs.lower()}s", "x")
        assert all(ref["uid"] == record["metadata"]["uid"] for p in pods.values() for ref in p["metadata"]["ownerReferences"])
        stalled = _condition(s.cluster.record_status(NAMESPACE, f"{waits.lower()}s", "x"), "Stalled")
        assert (stalled.get("status"), stalled.get("reason")) == ("True", "NameTaken"), stalled
        assert "(the pods of a gang it has not started are deleted, freeing their names)" in stalled["message"], stalled
    finally:
        namespace_runtime.close()


def test_a_pod_labelled_for_no_kind_of_record_is_no_namesake() -> None:
    """A pod in the way whose job-kind label names no record kind is no job's: the create it
    refuses is said as before (someone made it), not as a namesake 'Foo x'."""
    s = Scenario(SECOND)
    s.cluster.create_pod(NAMESPACE, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x-worker-0", "labels": {keys.JOB_KIND: "Foo", keys.JOB_NAME: "x"}},
                                     "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
    st = s.run_until(lambda st: "x-worker-0" in str(st.get("conditions")), limit=30)
    said = str(st.get("conditions"))
    assert "already exists without this job's labels" in said and "Foo" not in said and "NameTaken" not in said, said


# --- the rule's pure parts ----------------------------------------------------------------------


def _pod(kind: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"labels": {keys.JOB_KIND: kind, keys.JOB_NAME: "x"}, "ownerReferences": [{"kind": kind, "name": "x", "uid": uid, "controller": True}]}}


def test_pods_of_a_namesake_hold_the_names_but_a_pod_the_record_owns_never_does() -> None:
    taken = pods_taken("DeepSpeedJob", "x", "team", "uid-ds", {"x-worker-0", "x-worker-1"}, {"PyTorchTrainingJob": {"x-worker-0": _pod("PyTorchTrainingJob", "uid-pt"), "x-master-0": _pod("PyTorchTrainingJob", "uid-pt")}})
    assert isinstance(taken, NameTaken) and taken.reason == "NameTaken"
    assert str(taken).startswith("pod x-worker-0 belongs to PyTorchTrainingJob x (owned by its record, uid uid-pt), another job named x in namespace team")
    assert pods_taken("DeepSpeedJob", "x", "team", "uid-ds", {"x-worker-0"}, {"PyTorchTrainingJob": {"x-master-0": _pod("PyTorchTrainingJob", "uid-pt")}}) is None
    assert pods_taken("DeepSpeedJob", "x", "team", "uid-ds", {"x-worker-0"}, {"PyTorchTrainingJob": {"x-worker-0": _pod("PyTorchTrainingJob", "uid-ds")}}) is None


def test_a_pod_with_a_namesakes_labels_and_no_owner_is_said_to_be_owned_by_no_record() -> None:
    """Anyone who may create pods can label one for a namesake (as anyone could always take a
    pod's name): the job waits as for a namesake's, and says that no record owns the pod."""
    forged = {"metadata": {"labels": {keys.JOB_KIND: "PyTorchTrainingJob", keys.JOB_NAME: "x"}}}
    taken = pods_taken("DeepSpeedJob", "x", "team", "uid-ds", {"x-worker-0"}, {"PyTorchTrainingJob": {"x-worker-0": forged}})
    assert taken is not None and str(taken).startswith("pod x-worker-0 belongs to PyTorchTrainingJob x (by its labels alone: no record owns it, so no runtime made it)")


def test_a_podgroup_labelled_for_another_kind_is_a_namesakes_gang() -> None:
    group = {"metadata": {"name": "x", "labels": {keys.APP_NAME: "deepspeedjob"}}}
    taken = podgroup_taken("PyTorchTrainingJob", "x", group)
    assert taken is not None and str(taken).startswith("PodGroup x is labelled for DeepSpeedJob x")
    assert podgroup_taken("DeepSpeedJob", "x", group) is None
    assert podgroup_taken("DeepSpeedJob", "x", {"metadata": {"name": "x"}}) is None  # unlabelled: as before
    assert podgroup_taken("DeepSpeedJob", "x", None) is None


def test_a_secret_owned_by_a_namesake_is_refused_and_named_not_offered_for_deletion() -> None:
    record = {"kind": "ColossalAIJob", "metadata": {"name": "x", "uid": "uid-ca"}}
    secret = {"metadata": {"name": "x-ssh", "uid": "s1", "ownerReferences": [{"kind": "DeepSpeedJob", "name": "x", "uid": "uid-ds", "controller": True}]}}
    refused = foreign_secret("x-ssh", secret, record, None, vouch=True)
    assert refused is not None and "owned by DeepSpeedJob x, another job named x" in str(refused) and "delete the Secret" not in str(refused)
