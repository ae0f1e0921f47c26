"""Git holds PodTemplates, the runtime owns the pods: quota and GitOps tools on the fake API server.

ResourceQuota charges a pod from its creation, gated or not (KEP-5465), so pods must exist
only while they should.  The fake API server enforces a quota that holds exactly one
attempt's pods:
- an elastic job whose maxReplicas exceeds expectedReplicas runs (no headroom pods);
- after success with cleanUpPolicy All the quota's usage returns to 0 and stays there for
  ten minutes under the Argo CD self-heal and the Flux prune simulations;
- a gang that does not fit leaves no pod behind, the record says why, and the runtime
  tries again with back-off.
The GitOps tools apply the rendered folder (record and PodTemplates) and never a pod:
- a commit that changes only an image tag starts a new, counted attempt; no running pod is
  ever changed in place;
- a template value `cpu: 1.0` (stored by the API server as "1") causes no drain;
- a restart runs no pod twice for one attempt;
- the tools never create, patch or delete a pod, and no pod carries their tracking metadata.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flatjob.compiler import keys
from flatjob.runtime.sim.apiserver import kinds

from .gitops import TRACKING
from .harness import NAMESPACE, REAL, Scenario
from .test_scenarios import ELASTIC, FAIL_ONCE, pytorch

pytestmark = [pytest.mark.skipif(REAL, reason="the quota and the GitOps simulations are the fake API server's"), pytest.mark.usefixtures("runtime_mode")]  # each test in both runtime modes

GPU = "              resources: {limits: {nvidia.com/gpu: 1, cpu: 1.0}, requests: {cpu: 1.0}}\n"


def with_gpus(job: str) -> str:
    """Every container asks for one GPU and cpu 1.0 (as written: the API server stores "1")."""
    return job.replace("              image: busybox:1.36\n", "              image: busybox:1.36\n" + GPU)


def quota(s: Scenario, **hard: str) -> None:
    s.cluster.store.create(kinds.by_key("resourcequotas"), NAMESPACE, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team"}, "spec": {"hard": hard}}, "admin")


def used(s: Scenario) -> dict[str, str]:
    q = s.cluster.store.get(kinds.by_key("resourcequotas"), NAMESPACE, "team")
    return {k: v for k, v in (q.get("status") or {}).get("used", {}).items() if v not in ("0", 0)}


class PodWrites:
    """Every change to a pod, with the field manager that made it (from managedFields)."""

    def __init__(self, s: Scenario) -> None:
        self.images: dict[str, list[str]] = {}  # uid -> the images it had, in order
        self.managers: set[str] = set()
        s.cluster.store.listeners.append(self)

    def __call__(self, change: Any) -> None:
        if change.key != "pods" or change.obj is None:
            return
        meta = change.obj["metadata"]
        images = [c.get("image") for c in change.obj["spec"]["containers"]]
        seen = self.images.setdefault(meta["uid"], [])
        if not seen or seen[-1] != images:
            seen.append(images)
        self.managers |= {m.get("manager") for m in meta.get("managedFields") or []}


# --- quota -------------------------------------------------------------------------------------------


def test_quota_elastic_job_with_headroom_runs() -> None:
    # Two of four seats wanted: a quota for exactly two pods' GPUs admits the job.
    job = ELASTIC.replace("              args: [train.py]\n", "              args: [train.py]\n              resources: {limits: {nvidia.com/gpu: 1}}\n")
    s = Scenario(job)
    quota(s, **{"requests.nvidia.com/gpu": "2"})
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 2)
    assert sorted(s.pods()) == ["el-node-0", "el-node-1"]
    assert used(s).get("requests.nvidia.com/gpu") == "2"
    s.scale(3)  # a third seat does not fit: refused, and the record says so
    st = s.run_until(lambda st: "exceeded quota" in (st.get("runtime") or {}).get("refused", ""), limit=120)
    assert st["aggregate"]["running"] == 2 and sorted(s.pods()) == ["el-node-0", "el-node-1"]


@pytest.mark.parametrize("gitops", ["argo", "flux"])
def test_quota_returns_to_zero_after_cleanup_and_stays_there(gitops: str) -> None:
    s = Scenario(with_gpus(pytorch(master=FAIL_ONCE, policy="ExitCode", cleanup="All")), gitops=gitops)
    quota(s, pods="3", **{"requests.nvidia.com/gpu": "3"})  # exactly one attempt's pods
    st = s.finished()
    assert st["phase"] == "Succeeded" and st["backoffCount"] == 1
    s.settle(60)
    assert used(s) == {} and s.pods() == {}
    changes = s.settle(600)
    assert used(s) == {} and s.pods() == {}
    assert not [k for k in changes if "pods" in k], changes


def test_quota_gang_that_does_not_fit_leaves_no_pod_and_says_why() -> None:
    s = Scenario(with_gpus(pytorch(master="sleep 60; exit 0", worker="sleep 60; exit 0")))
    quota(s, **{"requests.nvidia.com/gpu": "2"})  # the gang needs 3
    released: set[str] = set()
    for _ in range(300):
        s.tick()
        released |= {n for n, p in s.pods().items() if not p["spec"].get("schedulingGates")}
    st = s.status()
    assert not released, "no pod of an incomplete gang may run"
    assert s.pods() == {} or all(p["spec"].get("schedulingGates") for p in s.pods().values())
    ledger = st["runtime"]
    assert "exceeded quota: team" in ledger["refused"] and ledger["refusals"] >= 3  # retried with back-off
    init = next(c for c in st["conditions"] if c["type"] == "Initialized")
    assert init["status"] == "False" and "exceeded quota: team" in init["message"]
    events = [o for (r, ns, _), o in s.cluster.objects.items() if r == "events" and o.get("reason") == "GangRefused"]
    assert events
    # Back-off: refusals are spread out, not one per second.
    assert ledger["refusals"] <= 6
    # Once the quota is raised, the gang starts.
    q = copy.deepcopy(s.cluster.store.get(kinds.by_key("resourcequotas"), NAMESPACE, "team"))
    q["spec"]["hard"]["requests.nvidia.com/gpu"] = "3"
    s.cluster.store.update(kinds.by_key("resourcequotas"), NAMESPACE, "team", q, manager="admin")
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=600)
    assert "refused" not in st["runtime"]


# --- GitOps ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gitops", ["argo", "flux"])
def test_gitops_image_only_commit_starts_a_new_counted_attempt(gitops: str) -> None:
    job = pytorch(master="sleep 600; exit 0", worker="sleep 600; exit 0")
    s = Scenario(job, gitops=gitops)
    writes = PodWrites(s)
    s.run_until(lambda st: st.get("phase") == "Running" and st["aggregate"]["running"] == 3)
    s.update_spec(job.replace("image: busybox:1.36", "image: busybox:1.37"))
    st = s.run_until(lambda st: st["runtime"]["attempt"] == 2 and st["aggregate"]["running"] == 3)
    assert st["backoffCount"] == 0  # an edit is not a failure
    assert len(s.pods()) == 3
    for pod in s.pods().values():
        assert pod["spec"]["containers"][0]["image"] == "busybox:1.37"
        assert pod["metadata"]["annotations"][keys.ATTEMPT] == "2"
    assert all(len(images) == 1 for images in writes.images.values()), "a pod's image changed in place"
    assert max(s.starts.values()) == 1


@pytest.mark.parametrize("gitops", ["argo", "flux"])
def test_gitops_cpu_1_0_in_a_template_causes_no_drain(gitops: str) -> None:
    s = Scenario(with_gpus(pytorch(master="sleep 900; exit 0", worker="sleep 900; exit 0")), gitops=gitops)
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3)
    template = s.cluster.store.get(kinds.by_key("podtemplates"), NAMESPACE, "sim-master-0")
    assert template["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"  # stored as the API server does
    uids = {n: p["metadata"]["uid"] for n, p in s.pods().items()}
    changes = s.settle(600)
    assert {n: p["metadata"]["uid"] for n, p in s.pods().items()} == uids
    assert s.status()["runtime"]["attempt"] == 1
    assert not changes.get("DELETED pods") and not changes.get("ADDED pods")


@pytest.mark.parametrize("gitops", ["argo", "flux"])
def test_gitops_restart_runs_no_pod_twice_for_one_attempt(gitops: str) -> None:
    s = Scenario(pytorch(master=FAIL_ONCE, worker=FAIL_ONCE, policy="ExitCode"), gitops=gitops)
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert sum(t["restartCount"] for t in st["tasks"]) == 3
    assert max(s.starts.values()) == 1, s.starts


@pytest.mark.parametrize("gitops", ["argo", "flux"])
def test_gitops_tools_never_touch_a_pod(gitops: str) -> None:
    s = Scenario(pytorch(master=FAIL_ONCE, policy="ExitCode", cleanup="None"), gitops=gitops)
    writes = PodWrites(s)
    s.finished()
    s.settle(120)
    assert s.tool is not None and s.tool.applies > 0  # the tool did its work...
    assert s.tool.manager not in writes.managers  # ...on everything but the pods
    for pod in s.pods().values():
        meta = pod["metadata"]
        assert not [k for k in {**meta.get("labels", {}), **meta.get("annotations", {})} if k.startswith(TRACKING)]
        (owner,) = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("PyTorchTrainingJob", "sim", True)
    templates = s.cluster.store.of("podtemplates", NAMESPACE)
    assert templates and all(any(k.startswith(TRACKING) for k in {**t["metadata"].get("labels", {}), **t["metadata"].get("annotations", {})}) for _, t in templates)
