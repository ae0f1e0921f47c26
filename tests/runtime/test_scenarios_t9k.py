"""T9k fidelity, end to end on the fake cluster: each scenario is one row of issue 15.

The jobs are T9k jobs as a user moving over would have them; the assertions are what T9k's
manuals say the job does (docs/t9k-compatibility.md names the source of each).
"""

from __future__ import annotations

import copy

import pytest

from flatjob.compiler import keys
from flatjob.runtime.model import Ledger
from flatjob.runtime.sim.apiserver import kinds
from flatjob.runtime.sim.kubelet import until_deleted

from .harness import NAMESPACE, REAL, Scenario
from .test_scenarios import events, pytorch

pytestmark = pytest.mark.usefixtures("runtime_mode")  # each test in both runtime modes

fake_only = pytest.mark.skipif(REAL, reason="needs the kubelet stand-in")

PLAIN = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: ddp
spec:
  runPolicy: {{backoffLimit: 3, cleanUpPolicy: None}}
  replicaSpecs:
    - type: master
      replicas: 1
      restartPolicy: {master_policy}
      template:
        spec:
          containers:
            - {{name: pytorch, image: "busybox:1.36", command: [sh, -c, '{master}']}}
    - type: worker
      replicas: 2
      restartPolicy: {worker_policy}
      template:
        spec:
          containers:
            - {{name: pytorch, image: "busybox:1.36", command: [sh, -c, '{worker}']}}
"""


def runs(s: Scenario, name: str) -> int:
    """How many times the pod `name` started, over all attempts and restarts."""
    return sum(n for (pod, _, _), n in s.starts.items() if pod == name)


def test_plain_pytorch_restarts_the_failed_worker_alone_by_its_own_policy() -> None:
    """Row 1: a worker with OnFailure fails; the master (Never) keeps running, is never re-run."""
    worker = 'sleep 2; [ "$FLATJOB_RESTART_COUNT" -ge 1 ] || exit 1; sleep 2; exit 0'
    s = Scenario(PLAIN.format(master_policy="Never", worker_policy="OnFailure", master="sleep 40; exit 0", worker=worker))
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert runs(s, "ddp-master-0") == 1
    # Both workers failed within seconds of each other: one incident, one restart of the job
    # (backoffCount, backoffLimit), two restarts of the workers (restartCount).
    assert st["runtime"]["attempt"] == 1 and st["backoffCount"] == 1
    assert {t["type"]: t["restartCount"] for t in st["tasks"]} == {"master": 0, "worker": 2}


def test_plain_pytorch_always_reruns_finished_workers_not_the_job() -> None:
    """Row 1: with Always, workers that finish before the master run again alone; the
    training (the master) runs once and decides the job."""
    s = Scenario(PLAIN.format(master_policy="Always", worker_policy="Always", master="sleep 30; exit 0", worker="sleep 2; exit 0"))
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert runs(s, "ddp-master-0") == 1
    assert st["runtime"]["attempt"] == 1
    assert {t["type"]: t["restartCount"] for t in st["tasks"]}["master"] == 0


GENERIC = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: gen
spec:
{rules}
  replicaSpecs:
    - type: worker
      replicas: 2
      restartPolicy: {{policy: OnFailure, limit: 1}}
      template:
        spec:
          containers:
            - name: main
              image: busybox:1.36
              command: [sh, -c, '{script}']
"""


def test_generic_limit_is_per_replica() -> None:
    """Row 5: limit 1 lets each of 2 workers restart once ("当前副本的最大重启次数")."""
    script = 'sleep 2; [ "$FLATJOB_RESTART_COUNT" -ge 1 ] || exit 1; exit 0'
    s = Scenario(GENERIC.format(rules="", script=script))
    st = s.finished()
    assert st["phase"] == "Succeeded", st["conditions"]
    assert runs(s, "gen-worker-0") == 2 and runs(s, "gen-worker-1") == 2
    assert {t["type"]: t["restartCount"] for t in st["tasks"]} == {"worker": 2}
    assert Ledger.from_dict(st["runtime"]).replica_restarts == {"gen-worker-0": 1, "gen-worker-1": 1}


def test_generic_default_cleanup_keeps_a_replica_running_after_success() -> None:
    """Row 2: cleanUpPolicy defaults to None (API reference); worker-1 keeps running, with its logs."""
    script = 'if [ $(rank) = 0 ]; then sleep 2; exit 0; fi; sleep 300'
    s = Scenario(GENERIC.format(rules='  successRules: [{"worker": [0]}]', script=script))
    st = s.finished()
    assert st["phase"] == "Succeeded"
    s.settle(20)
    pod = s.pods()["gen-worker-1"]
    assert pod["status"]["phase"] == "Running" and not pod["metadata"].get("deletionTimestamp")


def test_replica_failure_condition_is_t9ks() -> None:
    """Row 8: ReplicaFailure reason ErrorInPod, `Pod[<pod>] exited with error code N`."""
    s = Scenario(GENERIC.format(rules="", script="sleep 2; exit 3").replace("limit: 1", "limit: 0"))
    st = s.finished()
    assert st["phase"] == "Failed"
    cond = next(c for c in st["conditions"] if c["type"] == "ReplicaFailure")
    assert (cond["status"], cond["reason"]) == ("True", "ErrorInPod")
    assert cond["message"] in ("Pod[gen-worker-0] exited with error code 3", "Pod[gen-worker-1] exited with error code 3")


COLOSSAL = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: ColossalAIJob
metadata:
  name: cai
spec:
  torchConfig: {procPerWorker: 1, script: [train.py]}
  replicaSpecs:
    - type: worker
      replicas: 3
      template:
        spec:
          containers:
            - {name: worker, image: "hpcaitech/colossalai:0.3.0"}
"""


@fake_only
def test_colossalai_worker_failure_stops_the_other_workers_keeps_the_launcher() -> None:
    """Row 4: one worker fails; the job is Failed and the other workers stop at once. T9k's
    cleanUpWorkers false keeps the workers for their logs: they are stopped (a past
    activeDeadlineSeconds: the kubelet ends them, Failed, DeadlineExceeded), not deleted."""
    s = Scenario(COLOSSAL)
    for name in ("cai-launcher", "cai-worker-0", "cai-worker-2"):
        s.kubelet.behaviors[name] = until_deleted  # sshd / colossalai run
    s.kubelet.behaviors["cai-worker-1"] = lambda pod, env: (5.0, 137)
    st = s.finished()
    assert st["phase"] == "Failed" and st["backoffCount"] == 0
    s.settle(30)
    pods = s.pods()
    for name in ("cai-worker-0", "cai-worker-2"):  # stopped: they held GPUs; kept: their logs
        stopped = pods[name]
        assert (stopped["status"]["phase"], stopped["status"]["reason"]) == ("Failed", "DeadlineExceeded")
        assert stopped["spec"]["activeDeadlineSeconds"] == 1 and stopped["metadata"]["annotations"]["flatjob.dev/stopped"] == "true"
    assert pods["cai-launcher"]["status"]["phase"] == "Running"  # kept, for its log
    assert pods["cai-worker-1"]["status"]["phase"] == "Failed"  # finished pods keep their logs


DEEPSPEED = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata:
  name: ds
spec:
  config: {slotsPerWorker: 1, run: {python: [train.py]}}
  worker:
    replicas: 3
    restartPolicy: OnFailure
    template:
      spec:
        containers:
          - {name: worker, image: "deepspeed:latest"}
"""


@fake_only
def test_group_restart_counts_every_replica_it_restarts() -> None:
    """Row 8: tasks[].restartCount is the sum of the type's replicas' restarts."""
    s = Scenario(DEEPSPEED)
    s.kubelet.behaviors["ds-worker-0"] = lambda pod, env: (8.0, 1) if env.get("FLATJOB_RESTART_COUNT") == "0" else (8.0, 0)
    for name in ("ds-worker-1", "ds-worker-2"):
        s.kubelet.behaviors[name] = until_deleted
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert st["backoffCount"] == 1 and st["tasks"] == [{**st["tasks"][0], "type": "worker", "restartCount": 3}]


@fake_only
def test_a_failed_deepspeed_job_says_what_t9ks_says_and_the_event_how_it_was_read() -> None:
    """UC deepspeedjob.md's failed job: every T9k condition (ReplicaFailure too) has reason
    Failed and `DeepSpeedJob X has failed: X-worker-0 failed with exit code N`, N the pod's own
    code, bare; that deepspeed's 255 (pdsh's lost connection) reads as a kill (137) for the restart policy is in
    the Event (review of issue 20, round 15: the message ended "(effective 137)")."""
    s = Scenario(DEEPSPEED.replace("restartPolicy: OnFailure", "restartPolicy: Never"))
    s.kubelet.behaviors["ds-worker-0"] = lambda pod, env: (8.0, 255)
    for name in ("ds-worker-1", "ds-worker-2"):
        s.kubelet.behaviors[name] = until_deleted
    st = s.finished()
    t9k = "DeepSpeedJob ds has failed: ds-worker-0 failed with exit code 255"
    got = {c["type"]: (c["status"], c["reason"], c["message"]) for c in st["conditions"]}
    assert got["Failed"] == got["ReplicaFailure"] == ("True", "Failed", t9k)
    assert got["Running"] == ("False", "Failed", t9k) and got["Completed"] == ("False", "Failed", t9k)
    assert ("Failed", f"{t9k}; ds-worker-0 failed with exit code 255 (effective 137)") in events(s)



@fake_only
def test_a_deepspeed_job_failed_by_its_restart_limit_under_cleanup_none_keeps_its_workers() -> None:
    """Issue 20, item 2: cleanUpPolicy None "不删除副本 … 如果需要从副本中读取训练日志" (UM
    deepspeedjob), with no exception: a DeepSpeedJob failed by backoffLimit keeps worker-0,
    failed, and leaves the attempt's other workers running, as a PyTorchTrainingJob does
    (test_scenarios.py::test_backoff_limit_under_cleanup_none_keeps_every_replica_running)."""
    s = Scenario(DEEPSPEED.replace("spec:\n  config:", "spec:\n  runPolicy: {backoffLimit: 1, cleanUpPolicy: None}\n  config:"))
    s.kubelet.behaviors["ds-worker-0"] = lambda pod, env: (8.0, 1)
    for name in ("ds-worker-1", "ds-worker-2"):
        s.kubelet.behaviors[name] = until_deleted
    st = s.finished()
    stalled = next(c for c in st["conditions"] if c["type"] == "Stalled")
    assert st["phase"] == "Failed" and st["backoffCount"] == 1 and stalled["reason"] == "BackoffLimitExceeded"
    s.settle(60)
    pods = s.pods()
    assert {n: p["status"]["phase"] for n, p in pods.items()} == {"ds-worker-0": "Failed", "ds-worker-1": "Running", "ds-worker-2": "Running"}
    assert all(keys.STOPPED not in (p["metadata"].get("annotations") or {}) for p in pods.values())  # not stopped either

TENSORBOARD = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: tb
spec:
  tensorboardSpec:
    image: tensorflow/tensorflow:2.14.0
    logDir: {pvc: [{name: logs, subPath: [run1]}]}
  replicaSpecs:
    - type: worker
      replicas: 1
      template:
        spec:
          containers:
            - {name: pytorch, image: "busybox:1.36", command: [sh, -c, 'sleep 3; exit 0']}
"""


def test_status_names_the_tensorboard_and_follows_its_readiness() -> None:
    """Row 7: status.tensorboard is T9k's DependentStatus, naming the Deployment git holds;
    the runtime watches that Deployment and reports whether it runs what it wants."""
    s = Scenario(TENSORBOARD.replace("sleep 3; exit 0", "sleep 60; exit 0"))
    st = s.run_until(lambda st: (st.get("tensorboard") or {}).get("reason") == "DependentNotReady", limit=30)
    tb = st["tensorboard"]
    assert tb["dependent"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "tb-tensorboard", "namespace": tb["dependent"]["namespace"]}
    assert tb["action"] == "NOP" and tb["note"] == "TensorBoard [tb-tensorboard] is not ready" and tb["ready"] is False
    res = kinds.by_key("deployments")
    deployment = copy.deepcopy(s.cluster.store.get(res, NAMESPACE, "tb-tensorboard"))  # the store's own object: never change it in place
    deployment["status"] = {"observedGeneration": deployment["metadata"]["generation"], "replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    s.cluster.store.update(res, NAMESPACE, "tb-tensorboard", deployment, subresource="status", manager="deployment-controller")
    st = s.run_until(lambda st: (st.get("tensorboard") or {}).get("ready") is True, limit=30)
    assert st["tensorboard"]["reason"] == "DependentReady" and st["tensorboard"]["note"] == "TensorBoard [tb-tensorboard] is ready"

# --- Pending is "just created" (UM src/modules/jobs/pytorchtrainingjob.md, genericjob.md:
# "刚刚创建, 等待副本启动", just created, waiting for its replicas to start): a job that ran is Running while a failure settles or a
# restart waits out its back-off (review of round 12; the ledger's `started`).

PENDING_ONCE = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: one
spec:
  runPolicy: {{backoffLimit: 3}}
  replicaSpecs:
    - type: master
      replicas: 1
      restartPolicy: {policy}
      template:
        spec:
          containers:
            - {{name: pytorch, image: "busybox:1.36", command: [sh, -c, '{script}']}}
"""


def _phases(s: Scenario, seconds: int) -> list[str]:
    seen: list[str] = []
    for _ in range(seconds):
        s.tick()
        phase = s.status().get("phase")
        if phase and (not seen or seen[-1] != phase):
            seen.append(phase)
        if phase in ("Succeeded", "Failed"):
            break
    return seen


def test_a_job_whose_failure_is_settling_is_not_pending_again() -> None:
    """The master fails (Never): while the runtime waits 60 s (SETTLE) before deciding, the
    record reads phase Pending, Running=False reason Pending, Ready=False reason Pending."""
    s = Scenario(PENDING_ONCE.format(policy="Never", script="sleep 5; exit 1"))
    seen = _phases(s, 120)
    assert seen[-1] == "Failed", seen
    assert "Pending" not in seen[seen.index("Running"):], seen


def test_a_master_success_behind_a_settling_worker_failure_is_not_pending() -> None:
    """Workers used up backoffLimit (master decides, UM 成功和失败); the master then succeeds:
    the job reads Pending for ~55 s before Succeeded."""
    s = Scenario(PLAIN.format(master_policy="Never", worker_policy="OnFailure", master="sleep 100; exit 0", worker="sleep 2; exit 1"))
    seen = _phases(s, 300)
    assert seen[-1] == "Succeeded", seen
    assert "Pending" not in seen[seen.index("Running"):], seen


def test_a_restarting_single_replica_job_is_not_pending() -> None:
    """OnFailure: during the restart back-off (10 s, then 20 s) the only replica is gone and the
    job reads Pending, as if just created."""
    s = Scenario(PENDING_ONCE.format(policy="OnFailure", script='sleep 5; [ "$FLATJOB_RESTART_COUNT" -ge 2 ] || exit 1; exit 0'))
    seen = _phases(s, 300)
    assert seen[-1] == "Succeeded", seen
    assert "Pending" not in seen[seen.index("Running"):], seen


@pytest.mark.skipif(REAL, reason="drives the simulated kubelet")
def test_a_job_none_of_whose_pods_ever_ran_is_still_pending() -> None:
    """docs/t9k-compatibility.md: "Pending only until a pod of the job has run" (T9k: "just
    created, waiting for the replicas to start").  Every pod waits on an image pull (training
    images take minutes); the node shuts down or evicts the pulling master (kubelet: Failed,
    Evicted, its container ContainerStatusUnknown, no program ever ran).  Its replacement waits on
    the same image: no pod of the job has run, yet `_seen_started` ("Failed and not rejected")
    makes the job Running for good."""
    image = "registry.example/typo:1"
    s = Scenario(pytorch(master="sleep 600; exit 0", worker="sleep 600; exit 0").replace("image: busybox:1.36", f"image: {image}"))
    s.kubelet.unpullable.add(image)
    st = s.run_until(lambda st: any(c.get("reason") == "ImagePullBackOff" for c in st.get("conditions", [])), limit=60)
    assert st["phase"] == "Pending"
    old = s.pods()["sim-master-0"]["metadata"]["uid"]
    s.kubelet.evict("sim-master-0")  # or s.kubelet.shutdown(node): the same for every pod on it
    st = s.run_until(lambda st: (p := s.pods().get("sim-master-0")) is not None and p["metadata"]["uid"] != old
                     and p["status"].get("containerStatuses") is not None, limit=200)
    assert all("running" not in (c.get("state") or {}) for p in s.pods().values() for c in p["status"].get("containerStatuses", []))
    assert (st["phase"], st["runtime"].get("started")) == ("Pending", None), "no pod of the job ever ran"
