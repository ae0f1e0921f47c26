"""What T9k's manuals type, run by the real kubectl against the fake API server.

Covers:
- `kubectl get pj`, `kubectl get dj`, `gj`, `caij` (T9k's short names, as its `kubectl
  api-resources` prints them in ucman src/api/index.md; the manuals type pj and dj,
  user-manuals lane-detection.md, start-llm-finetuning.md) list flatjob's records;
- with T9k's own CRDs in the same cluster, `pj` is T9k's (kubectl takes the first group in
  discovery order and warns), and `pj.flatjob.dev` is flatjob's (docs/t9k-compatibility.md);
- `kubectl logs $(kubectl get pj X -o jsonpath='{.status.tasks[0].replicas[0].name}')`: in a
  101-worker job whose other workers are restarting, replicas[0] still names worker-0 (the
  master), in the status the runtime wrote over the wire;
- an elastic record's scale subresource carries the label selector of the job's pods (what
  HPA and KEDA need besides the replicas), and `kubectl scale` through it resizes the job.
Skipped without kubectl; on the fake API server only (the T9k CRD is added to its discovery).
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from flatjob.compiler import keys
from flatjob.runtime.sim.apiserver import customresources, kinds
from flatjob.runtime.sim.cluster import FakeCluster
from flatjob.runtime.sim.server import FakeApiServer

from .harness import REAL, Scenario, compile_text
from .test_scenarios import DEEPSPEED, ELASTIC

pytestmark = [
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed"),
    pytest.mark.skipif(REAL, reason="runs kubectl against the fake API server"),
]

CRDS = Path(__file__).resolve().parents[2] / "schemas" / "crds"

PYTORCH = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: pt
spec:
  runPolicy: {backoffLimit: 500, cleanUpPolicy: None}
  replicaSpecs:
%s
"""
REPLICAS = """\
    - type: %s
      replicas: %d
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - {name: python, image: "pytorch:1", command: [python, train.py]}
"""


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cache = kubeconfig.parent / "cache"  # discovery is cached per server: never the user's ~/.kube
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache), *args], capture_output=True, text=True, timeout=60, check=False)


def records(*texts: str) -> list[dict]:
    return [o for text in texts for o in compile_text(text) if o["apiVersion"] == keys.RECORD_API_VERSION]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Path]]:
    srv = FakeApiServer(FakeCluster(time.time))
    for obj in records(DEEPSPEED, PYTORCH % (REPLICAS % ("worker", 2))):
        srv.cluster.apply(copy.deepcopy(obj))
    try:
        yield srv, srv.kubeconfig(tmp_path / "kubeconfig")
    finally:
        srv.close()


def test_the_crds_declare_t9ks_short_names_and_no_others() -> None:
    names = {yaml.safe_load(p.read_text())["spec"]["names"]["kind"]: yaml.safe_load(p.read_text())["spec"]["names"].get("shortNames") for p in CRDS.glob("*.flatjob.dev.yaml")}
    assert names == {"PyTorchTrainingJob": ["pj"], "DeepSpeedJob": ["dj"], "GenericJob": ["gj"], "ColossalAIJob": ["caij"]}


def test_kubectl_get_pj_and_dj_list_the_records(server: tuple[FakeApiServer, Path]) -> None:
    _, kc = server
    pj, dj = kubectl(kc, "get", "pj", "-o", "name"), kubectl(kc, "get", "dj", "-o", "name")
    assert (pj.returncode, pj.stdout, pj.stderr) == (0, "pytorchtrainingjob.flatjob.dev/pt\n", "")
    assert (dj.returncode, dj.stdout, dj.stderr) == (0, "deepspeedjob.flatjob.dev/ds\n", "")


@pytest.fixture
def t9k_crd_too(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """T9k's PyTorchTrainingJob CRD (batch.tensorstack.dev, short name pj) served beside flatjob's."""
    served = kinds.resources()
    t9k = customresources.Crd(keys.T9K_GROUP, "v1beta1", "PyTorchTrainingJob", "pytorchtrainingjobs", "pytorchtrainingjob",
                              {"type": "object", "x-kubernetes-preserve-unknown-fields": True}, True, None, ("pj",))
    monkeypatch.setattr(kinds, "resources", lambda: (*served, kinds._custom(t9k, "t9k/pytorchtrainingjobs")))
    kinds._by_path.cache_clear()
    yield
    kinds._by_path.cache_clear()


def test_with_t9ks_crds_installed_pj_is_t9ks_and_pj_flatjob_dev_is_flatjobs(t9k_crd_too: None, server: tuple[FakeApiServer, Path]) -> None:
    """kube-aggregator orders groups of equal priority (every CRD group: 1000) by name, so
    batch.tensorstack.dev comes before flatjob.dev, and kubectl's shortcut expander
    (client-go restmapper/shortcut.go) takes the first match and warns about the other."""
    _, kc = server
    short = kubectl(kc, "get", "pj", "-o", "name")
    assert (short.returncode, short.stdout) == (0, "")  # T9k's jobs: none here
    assert short.stderr == 'Warning: short name "pj" could also match lower priority resource pytorchtrainingjobs.flatjob.dev\n'
    ours = kubectl(kc, "get", "pj.flatjob.dev", "-o", "name")
    assert (ours.returncode, ours.stdout, ours.stderr) == (0, "pytorchtrainingjob.flatjob.dev/pt\n", "")


WORKERS = 101


@pytest.mark.parametrize(("types", "first"), [
    pytest.param((("worker", WORKERS),), "pt-worker-0", id="worker-only"),
    pytest.param((("master", 1), ("worker", WORKERS)), "pt-master-0", id="master-worker"),
])
def test_replicas_0_is_the_first_replica_while_the_others_restart(tmp_path: Path, types: tuple[tuple[str, int], ...], first: str) -> None:
    """The manuals' `kubectl logs $(kubectl get pj X -o jsonpath=...replicas[0].name)`: a
    101-worker job whose workers 1-100 fail and wait for their restart still names its first
    replica, though the status lists only 100 replicas of a type, the telling ones."""
    s = Scenario(PYTORCH % "".join(REPLICAS % t for t in types))
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == sum(n for _, n in types))
    for i in range(1, WORKERS):
        s.kubelet.kill(f"pt-worker-{i}", 137)
    st = s.run_until(lambda st: st["tasks"][-1]["restartCount"] == WORKERS - 1, limit=5)  # one incident: backoffCount 1
    workers = st["tasks"][-1]["replicas"]
    assert len(workers) == 100 and workers[0] == {**workers[0], "name": "pt-worker-0", "phase": "Running"}
    assert {r["phase"] for r in workers[1:]} <= {"Failed", "Deleted", "Creating", "Pending"}
    kc = s.server.kubeconfig(tmp_path / "kubeconfig")
    got = kubectl(kc, "get", "pj", "pt", "-o", "jsonpath={.status.tasks[0].replicas[0].name}")
    assert (got.returncode, got.stdout, got.stderr) == (0, first, "")
    worker = kubectl(kc, "get", "pj", "pt", "-o", "jsonpath={.status.tasks[-1:].replicas[0].name}")
    assert worker.stdout == "pt-worker-0"


def test_the_scale_subresource_selects_the_jobs_pods_for_an_autoscaler(tmp_path: Path) -> None:
    """What an HPA or KEDA reads (the Scale: replicas and status.selector), and what it writes
    (spec.replicas, here with kubectl scale) on an elastic record."""
    s = Scenario(ELASTIC)
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 2)
    kc = s.server.kubeconfig(tmp_path / "kubeconfig")
    got = kubectl(kc, "get", "pj", "el", "--subresource=scale", "-o", "json")
    scale = yaml.safe_load(got.stdout)
    assert (scale["kind"], scale["spec"], scale["status"]) == ("Scale", {"replicas": 2}, {"replicas": 2, "selector": "flatjob.dev/job-name=el"})
    pods = kubectl(kc, "get", "pods", "-l", scale["status"]["selector"], "-o", "name")
    assert sorted(pods.stdout.split()) == sorted(f"pod/{n}" for n in s.pods())  # the job's pods, nothing else
    scaled = kubectl(kc, "scale", "pj", "el", "--replicas", "3")
    assert (scaled.returncode, scaled.stdout) == (0, "pytorchtrainingjob.flatjob.dev/el scaled\n"), scaled.stderr
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3)
