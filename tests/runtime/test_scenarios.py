"""Runtime scenarios on the fake cluster (and on a real one with FLATJOB_REAL_CLUSTER=1).

Each job runs busybox pods whose shell commands choose their exit code, often from
FLATJOB_RESTART_COUNT (set by the runtime at release), so "fail once, then succeed" is the
same job on both backends.
"""

from __future__ import annotations

import base64

import pytest

from flatjob.compiler import keys
from flatjob.runtime.sim.kubelet import until_deleted

from .harness import REAL, Scenario

pytestmark = pytest.mark.usefixtures("runtime_mode")  # each test in both runtime modes

fake_only = pytest.mark.skipif(REAL, reason="needs the kubelet stand-in (images without sshd/torchrun run on kind)")

JOB = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: sim
spec:
  runPolicy:
    backoffLimit: {limit}
    cleanUpPolicy: {cleanup}
  replicaSpecs:
    - type: master
      replicas: 1
      restartPolicy: {policy}
      template:
        spec:
          containers:
            - name: pytorch
              image: busybox:1.36
              command: [sh, -c, '{master}']
    - type: worker
      replicas: 2
      restartPolicy: {policy}
      template:
        spec:
          containers:
            - name: pytorch
              image: busybox:1.36
              command: [sh, -c, '{worker}']
"""


def pytorch(master: str = "sleep 5; exit 0", worker: str = "sleep 4; exit 0", policy: str = "OnFailure", limit: int = 3, cleanup: str = "None") -> str:
    return JOB.format(master=master, worker=worker, policy=policy, limit=limit, cleanup=cleanup)


FAIL_ONCE = 'sleep 5; [ "$FLATJOB_RESTART_COUNT" -ge 1 ] || exit 137; exit 0'


def test_success() -> None:
    s = Scenario(pytorch())
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert st["backoffCount"] == 0
    cond = {c["type"]: c for c in st["conditions"]}
    assert cond["Completed"]["status"] == "True" and cond["Completed"]["message"] == "The job has finished successfully."
    assert cond["Failed"]["status"] == "False"
    assert cond["Ready"]["status"] == "True" and cond["Stalled"]["status"] == "False"
    assert st["aggregate"]["succeeded"] == 3


def test_restart_then_success_restarts_the_failed_replica_alone() -> None:
    s = Scenario(pytorch(master=FAIL_ONCE, policy="ExitCode"))
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert st["backoffCount"] == 1
    assert st["runtime"]["attempt"] == 1  # T9k restarts replicas, not the job
    assert {t["type"]: t["restartCount"] for t in st["tasks"]} == {"master": 1, "worker": 0}
    assert {n: c for (n, _, _), c in s.starts.items() if n != "sim-master-0"} == {"sim-worker-0": 1, "sim-worker-1": 1}
    assert max(s.starts.values()) == 1  # no pod ran twice in one attempt


def test_exit_code_policy_fails_on_code_1() -> None:
    s = Scenario(pytorch(master="sleep 2; exit 1", policy="ExitCode"))
    st = s.finished()
    assert st["phase"] == "Failed"
    assert st["backoffCount"] == 0
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert failed["message"] == "PyTorchTrainingJob sim has failed: sim-master-0 failed with exit code 1"


def events(s: Scenario) -> list[tuple[str, str]]:
    """(reason, message) of the Events the runtime wrote about the record."""
    return [(o["reason"], o["message"]) for (r, _, _), o in s.cluster.objects.items() if r == "events" and o["involvedObject"]["name"] == s.name]


def test_backoff_limit_reached() -> None:
    s = Scenario(pytorch(master="sleep 2; exit 137", policy="ExitCode", limit=2))
    st = s.finished(limit=3000)
    assert st["phase"] == "Failed"
    assert st["backoffCount"] == 2
    conditions = {c["type"]: c for c in st["conditions"]}
    t9k = "PyTorchTrainingJob sim has failed: sim-master-0 failed with exit code 137"
    assert {(conditions[t]["reason"], conditions[t]["message"]) for t in ("Failed", "Running", "Completed")} == {("Failed", t9k)}  # T9k's
    assert (conditions["Stalled"]["reason"], conditions["Stalled"]["message"]) == ("BackoffLimitExceeded", t9k)
    assert ("BackoffLimitExceeded", f"{t9k}; restart limit 2 reached") in events(s)


@pytest.mark.parametrize("gitops", ["argo", "flux"])
def test_gitops_restart_then_success_is_stable(gitops: str) -> None:
    s = Scenario(pytorch(master=FAIL_ONCE, policy="ExitCode", cleanup="All"), gitops=gitops)
    st = s.finished()
    assert st["phase"] == "Succeeded" and st["backoffCount"] == 1
    assert max(s.starts.values()) == 1
    s.settle(120)  # clean-up deletes the pods; git holds no pod, so the tool recreates none
    assert s.settle(600) == {}, "nothing may change once the job has finished and settled"
    assert s.pods() == {}


GENERIC = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: gen
spec:
  successRules:
    - {"worker": [0]}
  failureRules:
    - {"worker": [1]}
  replicaSpecs:
    - type: worker
      replicas: 2
      restartPolicy:
        policy: Never
      template:
        spec:
          containers:
            - name: main
              image: busybox:1.36
              command: [sh, -c, 'if [ $(rank) = 1 ]; then sleep 2; exit 3; fi; sleep 300']
"""


def test_failure_by_rule() -> None:
    s = Scenario(GENERIC)
    st = s.finished()
    assert st["phase"] == "Failed"
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["message"] == 'The job is failed with rule: {"worker":["1"]}'
    # cleanUpPolicy None (T9k's default for GenericJob): the still-running worker-0 is kept.
    s.settle(10)
    assert s.pods()["gen-worker-0"]["status"]["phase"] == "Running"


def test_deadline() -> None:
    s = Scenario(pytorch(master="sleep 300; exit 0", worker="sleep 300; exit 0").replace("runPolicy:", "runPolicy:\n    activeDeadlineSeconds: 30"))
    st = s.finished()
    assert st["phase"] == "Failed"
    conditions = {c["type"]: c for c in st["conditions"]}
    t9k = "PyTorchTrainingJob sim has failed: it was active longer than activeDeadlineSeconds (30s)"
    assert (conditions["Failed"]["reason"], conditions["Failed"]["message"]) == ("Failed", t9k)
    assert conditions["Stalled"]["reason"] == "DeadlineExceeded" and ("DeadlineExceeded", t9k) in events(s)
    assert 30 <= s.clock.now - st["runtime"]["startTime"] <= 33
    s.settle(45)  # their shells ignore SIGTERM as PID 1: SIGKILL once the 30 s grace is over
    # cleanUpPolicy None keeps the replicas for their logs (T9k): the deadline stops them, a
    # past activeDeadlineSeconds the kubelet acts on, and the pods stay, Failed.
    pods = s.pods()
    assert sorted(pods) == ["sim-master-0", "sim-worker-0", "sim-worker-1"]
    assert {(p["status"]["phase"], p["status"].get("reason")) for p in pods.values()} == {("Failed", "DeadlineExceeded")}
    assert s.settle(60) == {}  # nothing more happens to them


def test_backoff_limit_under_cleanup_none_keeps_every_replica_running() -> None:
    """cleanUpPolicy None "不删除副本" (UM pytorchtrainingjob: "在训练结束后, 可能有些副本仍处于运行状态"),
    with no exception: a job failed by backoffLimit (its master, which decides the job, failing
    past the limit) keeps the failed master and leaves its workers running to their own end, as
    when it fails another way (issue 20 review: they were stopped, Failed, DeadlineExceeded)."""
    s = Scenario(pytorch(master="sleep 3; exit 3", worker="sleep 300; exit 0", limit=1))
    st = s.finished()
    assert st["phase"] == "Failed" and next(c for c in st["conditions"] if c["type"] == "Stalled")["reason"] == "BackoffLimitExceeded"
    s.settle(45)
    phases = {n: (p["status"]["phase"], p["status"].get("reason")) for n, p in s.pods().items()}
    assert phases == {"sim-master-0": ("Failed", None), "sim-worker-0": ("Running", None), "sim-worker-1": ("Running", None)}
    assert all(keys.STOPPED not in (p["metadata"].get("annotations") or {}) for p in s.pods().values())
    s.settle(300)
    phases = {n: p["status"]["phase"] for n, p in s.pods().items()}
    assert phases == {"sim-master-0": "Failed", "sim-worker-0": "Succeeded", "sim-worker-1": "Succeeded"}  # every log stays
    assert s.status()["phase"] == "Failed"  # a success after the outcome changes nothing


def test_time_paused_is_not_active_time_for_the_deadline() -> None:
    """Paused past activeDeadlineSeconds (pause: "the replicas are deleted, training stops"), then resumed: the deadline
    counts from the resumed pods' release, as a Kubernetes Job's startTime is reset when it is
    unsuspended (review 20, round 10: the job failed the second it resumed)."""
    job = pytorch(master="sleep 600; exit 0", worker="sleep 600; exit 0").replace("runPolicy:", "runPolicy:\n    activeDeadlineSeconds: 120")
    s = Scenario(job)
    s.run_until(lambda st: st.get("phase") == "Running")
    s.settle(20)
    pause = "spec:\n  runMode:\n    pause:\n      enabled: {}\n  runPolicy:"
    s.update_spec(job.replace("spec:\n  runPolicy:", pause.format("true")))
    s.run_until(lambda st: st.get("phase") == "Paused" and not s.pods())
    s.settle(200)  # the deadline passes while nothing runs
    assert s.status()["phase"] == "Paused"
    s.update_spec(job.replace("spec:\n  runPolicy:", pause.format("false")))
    st = s.run_until(lambda st: st.get("phase") == "Running" and st["aggregate"]["running"] == 3)
    resumed = st["runtime"]["startTime"]
    assert next(c for c in st["conditions"] if c["type"] == "Initialized")["status"] == "True"
    st = s.finished()
    assert st["phase"] == "Failed" and 120 <= s.clock.now - resumed <= 123  # 120 s of the resumed run


def test_cleanup_all_deletes_every_pod_once() -> None:
    s = Scenario(pytorch(cleanup="All"))
    s.finished()
    s.settle(30)
    assert s.pods() == {}
    assert s.status()["aggregate"]["deleted"] == 3


ELASTIC = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: el
spec:
  torchrunConfig:
    enabled: true
    procPerNode: "1"
  elastic:
    enabled: true
    minReplicas: 1
    maxReplicas: 4
    expectedReplicas: 2
  replicaSpecs:
    - type: node
      replicas: 4
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: python
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [python]
              args: [train.py]
"""


def _running(s: Scenario) -> list[str]:
    return sorted(n for n, p in s.pods().items() if p.get("status", {}).get("phase") == "Running")


@fake_only
@pytest.mark.parametrize("gitops", [None, "argo", "flux"])
def test_elastic_scale_up_and_down(gitops: str | None) -> None:
    s = Scenario(ELASTIC, gitops=gitops)
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 2)
    assert _running(s) == ["el-node-0", "el-node-1"]
    s.scale(4)
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 4)
    s.scale(1)
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 1)
    s.settle(60)
    assert _running(s) == ["el-node-0"]
    assert s.status()["backoffCount"] == 0  # scaling is not a restart
    # git still says expectedReplicas 2; the tool must not have reverted the scale.
    assert s.cluster.record(s.namespace, "pytorchtrainingjobs", "el")["spec"]["elastic"]["expectedReplicas"] == 1
    assert s.settle(300) == {}
    s.scale(3)
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3)
    assert max(s.starts.values()) <= 2  # a seat stopped and started again runs in a new incarnation


@fake_only
@pytest.mark.parametrize("policy", ["OnFailure", "Never"])
def test_a_node_left_by_a_scale_down_that_fails_is_replaced_uncounted(policy: str) -> None:
    """torchrun spends one of --max_restarts when a member leaves (none left by default: the
    agent exits 1): the remaining node's failure is the scale-down's doing, so it is replaced
    and joins the group at its new size (review 20, round 10: it ended or counted the job)."""
    s = Scenario(ELASTIC.replace("restartPolicy: OnFailure", f"restartPolicy: {policy}"))
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 2)
    old = s.pods()["el-node-0"]["metadata"]["uid"]
    s.scale(1)
    s.run_until(lambda st: "el-node-1" not in s.pods())
    s.tick(2)
    s.kubelet.kill("el-node-0", 1)  # its collective broke: torchrun's agent has no restart left
    st = s.run_until(lambda st: st.get("phase") in ("Failed", "Succeeded") or (s.pods().get("el-node-0", {}).get("metadata", {}).get("uid") not in (None, old) and st.get("aggregate", {}).get("running") == 1), limit=120)
    assert (st["phase"], st["backoffCount"], st["tasks"][0]["restartCount"]) == ("Running", 0, 0)
    assert _running(s) == ["el-node-0"]


@pytest.mark.parametrize("gitops", [None, "argo", "flux"])
def test_pause_and_resume(gitops: str | None) -> None:
    job = pytorch(master="sleep 600; exit 0", worker="sleep 600; exit 0")
    s = Scenario(job, gitops=gitops)
    s.run_until(lambda st: st.get("phase") == "Running")
    paused = job.replace("spec:\n  runPolicy:", "spec:\n  runMode:\n    pause:\n      enabled: true\n  runPolicy:")
    s.update_spec(paused)
    st = s.run_until(lambda st: st.get("phase") == "Paused" and not s.pods())
    assert next(c for c in st["conditions"] if c["type"] == "Paused")["status"] == "True"
    assert s.settle(120).get("ADDED pods", 0) == 0  # nothing comes back while paused
    s.update_spec(job.replace("spec:\n  runPolicy:", "spec:\n  runMode:\n    pause:\n      enabled: false\n  runPolicy:"))
    st = s.run_until(lambda st: st.get("phase") == "Running" and st["aggregate"]["running"] == 3)
    assert st["backoffCount"] == 0
    assert all(p["metadata"]["annotations"].get("flatjob.dev/resuming") == "true" for p in s.pods().values())


DEEPSPEED = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata:
  name: ds
spec:
  config:
    slotsPerWorker: 1
    run:
      python: [train.py]
  runPolicy:
    backoffLimit: 2
  worker:
    replicas: 3
    restartPolicy: OnFailure
    template:
      spec:
        containers:
          - name: worker
            image: deepspeed/deepspeed:v072_torch112_cu117
"""


def _launcher_fails_once(pod: dict, env: dict) -> tuple[float, int | None]:
    """worker-0 runs deepspeed: it fails (1) on the first attempt and succeeds after a restart."""
    return (8.0, 1) if env.get("FLATJOB_RESTART_COUNT") == "0" else (8.0, 0)


@fake_only
@pytest.mark.parametrize("gitops", [None, "argo", "flux"])
def test_ssh_launched_group_restart(gitops: str | None) -> None:
    s = Scenario(DEEPSPEED, gitops=gitops)
    s.kubelet.behaviors["ds-worker-0"] = _launcher_fails_once
    for name in ("ds-worker-1", "ds-worker-2"):
        s.kubelet.behaviors[name] = until_deleted  # sshd runs until deleted
    # The runtime creates the key pair Secret itself; no key material is in git.
    s.run_until(lambda st: st.get("phase") == "Running")
    secret = s.cluster.objects[("secrets", "default", "ds-ssh")]
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert "BEGIN OPENSSH PRIVATE KEY" in base64.b64decode(secret["data"]["ssh-privatekey"]).decode()  # stringData is stored as data
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert st["backoffCount"] == 1 and st["runtime"]["attempt"] == 2
    assert max(s.starts.values()) == 1


@fake_only
def test_launcher_released_after_workers_are_ready() -> None:
    s = Scenario(DEEPSPEED)
    for name in ("ds-worker-0", "ds-worker-1", "ds-worker-2"):
        s.kubelet.behaviors[name] = until_deleted
    order: list[str] = []
    for _ in range(30):
        s.tick()
        for name, pod in sorted(s.pods().items()):
            if not pod["spec"].get("schedulingGates") and name not in order:
                order.append(name)
    assert order[-1] == "ds-worker-0" and set(order) == {"ds-worker-0", "ds-worker-1", "ds-worker-2"}


COLOSSAL = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: ColossalAIJob
metadata:
  name: cai
spec:
  torchConfig:
    procPerWorker: 1
    script: [train.py]
  replicaSpecs:
    - type: worker
      replicas: 2
      template:
        spec:
          containers:
            - name: worker
              image: hpcaitech/colossalai:0.3.0
"""


@fake_only
def test_colossalai_worker_failure_is_not_restarted() -> None:
    s = Scenario(COLOSSAL)
    s.kubelet.behaviors["cai-launcher"] = until_deleted
    s.kubelet.behaviors["cai-worker-0"] = until_deleted
    s.kubelet.behaviors["cai-worker-1"] = lambda pod, env: (5.0, 137)
    st = s.finished()
    assert st["phase"] == "Failed" and st["backoffCount"] == 0
    assert "cai-worker-1 failed with exit code 137" in next(c for c in st["conditions"] if c["type"] == "Failed")["message"]


RESUMABLE = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: rs
spec:
  runMode:
    pause:
      enabled: {paused}
      resumeSpecs:
        - type: main
          command: [sh, -c, 'sleep 3; exit 0']
  replicaSpecs:
    - type: main
      replicas: 1
      template:
        spec:
          containers:
            - name: main
              image: busybox:1.36
              command: [sh, -c, 'sleep 600']
"""


@pytest.mark.parametrize("gitops", [None, "flux"])
def test_resume_runs_the_resume_command(gitops: str | None) -> None:
    s = Scenario(RESUMABLE.format(paused="false"), gitops=gitops)
    s.run_until(lambda st: st.get("phase") == "Running")
    s.update_spec(RESUMABLE.format(paused="true"))
    s.run_until(lambda st: st.get("phase") == "Paused" and not s.pods())
    s.update_spec(RESUMABLE.format(paused="false"))
    st = s.finished()  # before the pause the pod slept 600 s; the resume command exits after 3 s
    assert st["phase"] == "Succeeded"
    assert st["backoffCount"] == 0 and st["runtime"]["attempt"] == 2


@fake_only
def test_elastic_deepspeed_starts_and_rescales_as_a_new_attempt() -> None:
    job = DEEPSPEED.replace("spec:\n  config:", "spec:\n  elastic:\n    enabled: true\n    minReplicas: 1\n    maxReplicas: 4\n    expectedReplicas: 3\n  config:")
    s = Scenario(job)
    for i in range(4):
        s.kubelet.behaviors[f"ds-worker-{i}"] = until_deleted
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=120)
    assert st["runtime"]["attempt"] == 1 and st["runtime"]["size"] == 3
    s.scale(2)
    st = s.run_until(lambda st: st["runtime"]["attempt"] == 2 and st.get("aggregate", {}).get("running") == 2, limit=300)
    assert st["backoffCount"] == 0 and st["runtime"]["size"] == 2
    assert sorted(n for n, p in s.pods().items() if p.get("status", {}).get("phase") == "Running") == ["ds-worker-0", "ds-worker-1"]


@fake_only
def test_a_cycle_judges_a_pod_again_only_when_its_object_changed() -> None:
    """The worker keeps each pod's decision view with the cached object it was made from (the
    informer replaces an object whole on every change): a cycle over unchanged pods reuses the
    views, a changed pod is judged from its new object (a 1000-pod job's cycles spent most of
    their CPU remaking every view while the write budget's tokens ran on)."""
    s = Scenario(pytorch(master="sleep 300; exit 0", worker="sleep 300; exit 0"))
    s.run_until(lambda st: (st.get("aggregate") or {}).get("running") == 3)
    worker = next(iter(s.controller.workers.values()))
    before = {n: kept[3] for n, kept in worker._states.items()}
    assert sorted(before) == ["sim-master-0", "sim-worker-0", "sim-worker-1"]
    worker.reconcile()
    assert all(worker._states[n][3] is before[n] for n in before)  # nothing changed: the same views
    s.kubelet.kill("sim-worker-1", 1)
    s.sync()
    worker.reconcile()
    assert worker._states["sim-worker-1"][3].phase == "Failed" and worker._states["sim-worker-1"][3].exit_code == 1
    assert worker._states["sim-master-0"][3] is before["sim-master-0"]
    st = s.run_until(lambda st: (st.get("aggregate") or {}).get("running") == 3 and st.get("backoffCount") == 1)
    assert st["phase"] == "Running"
