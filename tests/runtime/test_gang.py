"""The SSH kinds under a gang scheduler (`pytest -k gang`; `pytest -m "" -k gang` adds the per-job runtime mode).

The simulated scheduler (runtime/sim/scheduler.py) binds a PodGroup's pods only when
minMember of them are ungated and fit, as scheduler-plugins' coscheduling (Permit) and
Volcano's gang plugin (allocate) do; a Kueue pod group is treated the same way.  The runtime
used to hold DeepSpeed's worker-0 and the ColossalAI launcher gated until the workers' sshd was
Ready, while the gang scheduler bound no worker until the launcher was ungated: a deadlock.
Under a gang the runtime releases every wave at once; the launch scripts wait for their peers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from flatjob.compiler import keys
from flatjob.runtime.decisions import release
from flatjob.runtime.sim.containers import Program, until_deleted

from .harness import REAL, Scenario

pytestmark = [pytest.mark.skipif(REAL, reason="drives the simulated gang scheduler"), pytest.mark.usefixtures("runtime_mode")]  # each test in both runtime modes

T9K = "  scheduler:\n    t9kScheduler:\n      queue: default\n"
KUEUE = "  annotations:\n    flatjob.dev/scheduler: kueue\n    flatjob.dev/kueue-queue: team-a\n"

DEEPSPEED = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata:
  name: ds
{meta}spec:
{scheduler}  config: {{slotsPerWorker: 1, run: {{python: [train.py]}}}}
  worker:
    replicas: 3
    template:
      spec:
        containers:
          - {{name: worker, image: "deepspeed:latest"}}
"""

COLOSSAL_NEW = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: ColossalAIJob
metadata:
  name: cai
spec:
{scheduler}  torchConfig: {{procPerWorker: 1, script: [train.py]}}
  replicaSpecs:
    - type: worker
      replicas: 2
      template:
        spec:
          containers:
            - {{name: worker, image: "hpcaitech/colossalai:0.3.0"}}
"""

COLOSSAL_OLD = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: ColossalAIJob
metadata:
  name: cai
spec:
{scheduler}  launcher:
    image: hpcaitech/colossalai:0.3.0
  worker:
    replicas: 2
    procPerWorker: 1
    command: [train.py]
    template:
      spec:
        containers:
          - {{name: worker, image: "hpcaitech/colossalai:0.3.0"}}
"""

# A gang the template sets itself (review 20/22, round 5): coscheduling's label, Volcano's annotation.
COSCHEDULING = DEEPSPEED.replace("    template:\n      spec:", "    template:\n      metadata:\n        labels: {{scheduling.x-k8s.io/pod-group: ds}}\n      spec:\n        schedulerName: scheduler-plugins-scheduler")
VOLCANO = DEEPSPEED.replace("    template:\n      spec:", "    template:\n      metadata:\n        annotations: {{scheduling.k8s.io/group-name: ds}}\n      spec:\n        schedulerName: volcano")

JOBS = {
    "deepspeed-t9k": (DEEPSPEED.format(meta="", scheduler=T9K), "ds-worker-0"),
    "deepspeed-coscheduling": (COSCHEDULING.format(meta="", scheduler=""), "ds-worker-0"),
    "deepspeed-volcano": (VOLCANO.format(meta="", scheduler=""), "ds-worker-0"),
    "deepspeed-kueue": (DEEPSPEED.format(meta=KUEUE, scheduler=T9K), "ds-worker-0"),
    "colossalai-replicaspecs-t9k": (COLOSSAL_NEW.format(scheduler=T9K), "cai-launcher"),
    "colossalai-launcher-worker-t9k": (COLOSSAL_OLD.format(scheduler=T9K), "cai-launcher"),
}


def _scenario(name: str) -> Scenario:
    text, launcher = JOBS[name]
    s = Scenario(text)
    s.kubelet.scheduler.groups["ds"] = 3  # the user's own PodGroup: every worker
    for pod in s.pods() or [m["metadata"]["name"] for m in s.manifests if m["kind"] == "PodTemplate"]:
        s.kubelet.behaviors[pod] = until_deleted  # sshd
    s.kubelet.behaviors[launcher] = lambda pod, env: Program(30, 0)  # the launcher trains, then succeeds
    return s


@pytest.mark.parametrize("name", list(JOBS))
def test_gang_the_ssh_kinds_reach_succeeded_under_a_gang_scheduler(name: str) -> None:
    s = _scenario(name)
    meta = next(m for m in s.manifests if m["kind"] == "PodTemplate")["template"]["metadata"]
    assert set(keys.GANG_LABELS) & set(meta["labels"]) or set(keys.GANG_ANNOTATIONS) & set(meta.get("annotations") or {})
    st = s.finished(limit=300)
    assert st["phase"] == "Succeeded" and st["backoffCount"] == 0


@pytest.mark.parametrize("name", [n for n in JOBS if "kueue" not in n])  # every job above a gang scheduler binds
def test_gang_holding_the_launcher_deadlocks_the_gang(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the runtime did before: the launcher waits for its workers' Ready, the gang
    scheduler waits for the launcher to be ungated; nothing binds, and the scheduler says why.
    Kueue is no gang at bind time: it admits a pod group once all its pods exist (the runtime
    creates them all, gated), and kube-scheduler binds each alone, so the old release ran there
    (test_gang_under_kueue_a_group_waits_for_admission_and_room_then_runs)."""
    by_wave = release._by_wave

    def old(job: Any, *args: Any) -> Any:
        return by_wave(replace(job, gang=False), *args)

    monkeypatch.setattr(release, "_by_wave", old)
    s = _scenario(name)
    for _ in range(300):
        s.tick()
    assert s.status().get("phase") == "Pending"
    pods = s.pods()
    assert not any(p["spec"].get("nodeName") for p in pods.values())
    scheduled = [c for p in pods.values() for c in p["status"].get("conditions") or [] if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"]
    assert scheduled and "of its pods are still scheduling-gated" in scheduled[0]["message"]


def test_gang_under_kueue_a_group_waits_for_admission_and_room_then_runs() -> None:
    """Kueue gates every pod it manages and admits the group only when all of its pods exist and
    its ClusterQueue has room (runtime/sim/kueue.py): until then the record names Kueue's gate;
    once room is made, every pod is ungated and the job runs to the end."""
    s = _scenario("deepspeed-kueue")
    s.kubelet.kueue.pods_quota = 2  # the group counts 3
    def ready(st: dict[str, Any]) -> dict[str, Any]:
        return next((c for c in st.get("conditions") or [] if c["type"] == "Ready"), {})

    st = s.run_until(lambda st: ready(st).get("reason") == "SchedulingGated", limit=60)
    assert ready(st)["message"].startswith("pod ds-worker-0 waits for its scheduling gate(s) kueue.x-k8s.io/admission to be removed")
    pods = s.pods()
    assert len(pods) == 3 and all(any(g["name"] == keys.KUEUE_ADMISSION_GATE for g in p["spec"]["schedulingGates"]) for p in pods.values())
    assert not any(p["spec"].get("nodeName") for p in pods.values()) and st.get("phase") != "Running"
    s.kubelet.kueue.pods_quota = 3
    st = s.finished(limit=300)
    assert st["phase"] == "Succeeded" and st["backoffCount"] == 0


ELASTIC_KUEUE = f"""
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: el
{KUEUE}spec:
  torchrunConfig: {{enabled: true, maxRestarts: 3, procPerNode: "1", rdzvBackend: c10d}}
  elastic: {{enabled: true, minReplicas: 1, maxReplicas: 4, expectedReplicas: 2}}
  replicaSpecs:
    - type: node
      replicas: 4
      template:
        spec:
          containers:
            - {{name: pytorch, image: "torch:1", args: [train.py]}}
"""


def test_gang_under_kueue_an_elastic_job_running_fewer_pods_than_its_maximum_is_admitted_pod_by_pod() -> None:
    """Kueue admits a pod group only once pod-group-total-count of its pods exist; an elastic job
    runs expectedReplicas of its maxReplicas, so as one group it was never admitted (every pod
    gated for ever): its pods carry the queue label alone, each a Workload of its own."""
    s = Scenario(ELASTIC_KUEUE)
    templates = [m for m in s.manifests if m["kind"] == "PodTemplate"]
    assert all(keys.KUEUE_POD_GROUP_NAME not in m["template"]["metadata"]["labels"] and keys.KUEUE_QUEUE_NAME in m["template"]["metadata"]["labels"] for m in templates)
    for name in [m["metadata"]["name"] for m in templates]:
        s.kubelet.behaviors[name] = until_deleted
    st = s.run_until(lambda st: st.get("aggregate", {}).get("running") == 2, limit=120)
    assert st["phase"] == "Running" and sorted(s.pods()) == ["el-node-0", "el-node-1"]
