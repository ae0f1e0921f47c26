"""Runtime scenarios on the fake cluster (and on a real one with FLATJOB_REAL_CLUSTER=1).

Each job runs busybox pods whose shell commands choose their exit code, often from
FLATJOB_RESTART_COUNT (set by the runtime at release), so "fail once, then succeed" is the
same job on both backends.
"""

from __future__ import annotations

import pytest

from .harness import Scenario

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


def test_restart_then_success_group() -> None:
    s = Scenario(pytorch(master=FAIL_ONCE, policy="ExitCode"))
    st = s.finished()
    assert st["phase"] == "Succeeded"
    assert st["backoffCount"] == 1
    assert st["runtime"]["attempt"] == 2
    assert {t["type"]: t["restartCount"] for t in st["tasks"]} == {"master": 1, "worker": 0}
    assert max(s.starts.values()) == 1  # no pod ran twice in one attempt


def test_exit_code_policy_fails_on_code_1() -> None:
    s = Scenario(pytorch(master="sleep 2; exit 1", policy="ExitCode"))
    st = s.finished()
    assert st["phase"] == "Failed"
    assert st["backoffCount"] == 0
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert failed["message"] == "PyTorchTrainingJob sim has failed: sim-master-0 failed with exit code 1"


def test_backoff_limit_reached() -> None:
    s = Scenario(pytorch(master="sleep 2; exit 137", policy="ExitCode", limit=2))
    st = s.finished(limit=3000)
    assert st["phase"] == "Failed"
    assert st["backoffCount"] == 2
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"


@pytest.mark.parametrize("gitops", ["argo", "flux"])
def test_gitops_restart_then_success_is_stable(gitops: str) -> None:
    s = Scenario(pytorch(master=FAIL_ONCE, policy="ExitCode", cleanup="All"), gitops=gitops)
    st = s.finished()
    assert st["phase"] == "Succeeded" and st["backoffCount"] == 1
    assert max(s.starts.values()) == 1
    s.settle(120)  # clean-up deletes the pods, the tool recreates them (gated)
    assert s.settle(600) == {}, "nothing may change once the job has finished and settled"
    # Pods the tool recreated after clean-up stay gated and never run.
    assert all(p["spec"].get("schedulingGates") for p in s.pods().values() if p.get("status", {}).get("phase") == "Pending")
