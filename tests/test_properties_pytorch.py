"""Properties of compiled PyTorchTrainingJobs, over random valid jobs (tests/strategies.py).

Covers, for every drawn job compiled through the real pipeline (YAML text -> parse ->
compile_documents -> emitted files, read back):
- pods = sum of replicas, or maxReplicas split by the D'Hondt seat order when elastic;
- plain mode: RANK is exactly 0..N-1 in replicaSpec order, WORLD_SIZE = N, MASTER_ADDR = rank 0's
  address;
- torchrun mode: nnodes (N, or min:max when elastic) and nproc_per_node agree with the spec,
  one rdzv endpoint for all pods, exactly one c10d store host;
- every object name is a DNS label of at most 63 characters, every label key and value is valid;
- every object passes the strict Kubernetes validator, and the record passes its own CRD schema;
- output bytes are identical twice in-process and across PYTHONHASHSEED values in subprocesses;
- the elastic seat order is house-monotone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from manifestkit import CORE_GROUPS, name_problems, objects_of, pods_of, record_problems
from propertykit import examples
from strategies import GPU, job_yaml, pod_weights, pytorch_jobs

from flatjob.compiler import kube
from flatjob.compiler.loader import Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents
from flatjob.compiler.plan.elastic import allocation, seat_order

PROPS = settings(
    max_examples=examples(60), derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# --- compiling and reading back ----------------------------------------------------------


@dataclass
class Compiled:
    """One job's emitted files, read back as objects."""

    files: dict[str, str]
    objects: list[dict[str, Any]]

    def of_kind(self, kind: str, api: str | None = None) -> list[dict[str, Any]]:
        return [
            o for o in self.objects if o["kind"] == kind and (api is None or o["apiVersion"] == api)
        ]

    @property
    def pods(self) -> list[dict[str, Any]]:
        return pods_of(self.objects)


def compile_text(text: str) -> dict[str, str]:
    """Every output file for the jobs in `text`, through the real pipeline."""
    docs, problems = parse(text, "jobs.yaml")
    assert not problems, problems
    result = compile_documents(
        Loaded(jobs=docs, files=[(Path("jobs.yaml"), text)]), CompileOptions()
    )
    assert not result.failed, "\n".join(
        f"{d.line}:{d.col} {d.message} [{d.code}]" for d in result.diagnostics
    )
    return result.tree()


def compile_job(job: dict[str, Any]) -> Compiled:
    files = compile_text(job_yaml(job))
    return Compiled(files, objects_of(files))


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    """Literal env of the pod's training container (the one with MASTER_ADDR)."""
    for c in pod["spec"]["containers"]:
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        if "MASTER_ADDR" in env:
            return env
    raise AssertionError(f"no container of {pod['metadata']['name']} has MASTER_ADDR")


def training_container(pod: dict[str, Any]) -> dict[str, Any]:
    return next(
        c
        for c in pod["spec"]["containers"]
        if any(e["name"] == "MASTER_ADDR" for e in c.get("env", []))
    )


def address(pod: dict[str, Any]) -> str:
    return f"{pod['spec']['hostname']}.{pod['spec']['subdomain']}"


def expected_counts(job: dict[str, Any]) -> dict[str, int]:
    """Pods per type the spec asks for (elastic: maxReplicas by the seat order)."""
    elastic = job["spec"].get("elastic")
    if elastic:
        return allocation(pod_weights(job), elastic["maxReplicas"])
    return {r["type"]: r["replicas"] for r in job["spec"]["replicaSpecs"]}


def flags(command: list[str]) -> dict[str, str]:
    """torchrun's --name=value flags (first spelling wins, as flatjob writes each once)."""
    out: dict[str, str] = {}
    for arg in command[1:]:
        name, _, value = arg.partition("=")
        out.setdefault(name, value)
    return out


# --- pods and ranks ----------------------------------------------------------------------


@PROPS
@given(pytorch_jobs())
def test_pod_count_is_replicas_or_max_replicas(job: dict[str, Any]) -> None:
    out = compile_job(job)
    counts = expected_counts(job)
    by_type: dict[str, int] = {}
    for pod in out.pods:
        t = pod["metadata"]["labels"]["flatjob.dev/replica-type"]
        by_type[t] = by_type.get(t, 0) + 1
    assert {t: n for t, n in counts.items() if n} == by_type
    elastic = job["spec"].get("elastic")
    if elastic:
        assert len(out.pods) == elastic["maxReplicas"]
    names = [p["metadata"]["name"] for p in out.pods]
    assert len(set(names)) == len(names)


@PROPS
@given(pytorch_jobs(torchrun=False))
def test_plain_mode_ranks_world_size_and_master(job: dict[str, Any]) -> None:
    pods = compile_job(job).pods
    n = len(pods)
    envs = [env_of(p) for p in pods]
    assert [int(e["RANK"]) for e in envs] == list(range(n)), "ranks in replicaSpec order"
    assert {e["WORLD_SIZE"] for e in envs} == {str(n)}
    rank0 = pods[[int(e["RANK"]) for e in envs].index(0)]
    assert rank0["metadata"]["name"] == f"{job['metadata']['name']}-{first_type_with_pods(job)}-0"
    assert {e["MASTER_ADDR"] for e in envs} == {address(rank0)}
    assert len({e["MASTER_PORT"] for e in envs}) == 1


def first_type_with_pods(job: dict[str, Any]) -> str:
    return next(r["type"] for r in job["spec"]["replicaSpecs"] if r["replicas"])


@PROPS
@given(pytorch_jobs(torchrun=True))
def test_torchrun_nodes_procs_and_rendezvous(job: dict[str, Any]) -> None:
    pods = compile_job(job).pods
    spec = job["spec"]
    tr, elastic = spec["torchrunConfig"], spec.get("elastic")
    gpus = {r["type"]: r["template"]["spec"]["containers"] for r in spec["replicaSpecs"]}
    endpoints, hosts, procs = set(), [], []
    for pod in pods:
        c = training_container(pod)
        assert c["command"][0] == "torchrun"
        f = flags(c["command"])
        nnodes = f["--nnodes"]
        assert nnodes == (
            f"{elastic['minReplicas']}:{elastic['maxReplicas']}" if elastic else str(len(pods))
        )
        nproc = f["--nproc_per_node"]
        want = tr["procPerNode"]
        if want == "gpu":
            rtype = pod["metadata"]["labels"]["flatjob.dev/replica-type"]
            limit = next(
                (
                    c2.get("resources", {}).get("limits", {}).get(GPU)
                    for c2 in gpus[rtype]
                    if c2["name"] == c["name"]
                ),
                None,
            )
            want = str(limit) if limit else "gpu"
        assert nproc == want
        procs.append(nproc)
        assert f["--rdzv_backend"] == tr["rdzvBackend"]
        assert f["--rdzv_id"] == job["metadata"]["name"]
        endpoints.add(f["--rdzv_endpoint"])
        hosts.append(f.get("--rdzv_conf"))
    if not elastic and len(set(procs)) == 1 and procs[0].isdigit():  # world size = nodes x procs
        assert int(nnodes) * int(procs[0]) == sum(int(p) for p in procs)
    assert len(endpoints) == 1
    host, _, port = endpoints.pop().rpartition(":")
    assert host == address(pods[0]) and port.isdigit()
    if tr["rdzvBackend"] == "c10d":
        assert hosts.count("is_host=true") == 1 and hosts[0] == "is_host=true"
        assert hosts.count("is_host=false") == len(pods) - 1
    else:
        assert hosts == [None] * len(pods)


@PROPS
@given(pytorch_jobs(torchrun=True))
def test_torchrun_keeps_the_script_and_its_args(job: dict[str, Any]) -> None:
    for pod in compile_job(job).pods:
        rtype = pod["metadata"]["labels"]["flatjob.dev/replica-type"]
        spec = next(r for r in job["spec"]["replicaSpecs"] if r["type"] == rtype)
        source = next(
            c for c in spec["template"]["spec"]["containers"] if c["name"] in ("python", "pytorch")
        )
        assert training_container(pod)["args"] == source["args"]


# --- names, labels, schemas --------------------------------------------------------------


@PROPS
@given(pytorch_jobs())
def test_names_and_labels_are_valid(job: dict[str, Any]) -> None:
    out = compile_job(job)
    problems = [p for o in out.objects for p in name_problems(o)]
    assert not problems


@PROPS
@given(pytorch_jobs())
def test_every_object_passes_strict_kubernetes_validation(job: dict[str, Any]) -> None:
    out = compile_job(job)
    checked = 0
    for obj in out.objects:
        violations = kube.validate_manifest(obj)
        assert not violations, f"{obj['kind']} {obj['metadata']['name']}: {violations}"
        checked += obj["apiVersion"] in CORE_GROUPS
    assert checked >= 5  # Service, ServiceAccount, Role, RoleBinding, Deployment at least


@PROPS
@given(pytorch_jobs())
def test_record_passes_its_own_crd_schema(job: dict[str, Any]) -> None:
    (record,) = compile_job(job).of_kind("PyTorchTrainingJob", "flatjob.dev/v1beta1")
    assert record_problems(record) == []


def test_strict_schema_rejects_a_pruned_field() -> None:
    (record,) = compile_job(
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "PyTorchTrainingJob",
            "metadata": {"name": "x"},
            "spec": {
                "replicaSpecs": [
                    {
                        "type": "worker",
                        "template": {"spec": {"containers": [{"name": "a", "image": "b"}]}},
                    }
                ]
            },
        }
    ).of_kind("PyTorchTrainingJob", "flatjob.dev/v1beta1")
    assert record_problems(record) == []
    record["spec"]["runPolicy"]["backofLimit"] = 1
    assert record_problems(record) != []


def test_pod_templates_are_validated_once_per_replica_type(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = kube.validate

    def counting(obj: Any, definition: str) -> Any:
        calls.append(definition)
        return real(obj, definition)

    monkeypatch.setattr(kube, "validate", counting)
    template = {"spec": {"containers": [{"name": "python", "image": "x", "command": ["python"]}]}}
    specs = [{"type": t, "replicas": 50, "template": template} for t in ("master", "worker")]
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": "big"},
        "spec": {"replicaSpecs": specs},
    }
    assert len(compile_job(job).pods) == 100
    assert calls.count("io.k8s.api.core.v1.PodTemplateSpec") == 2


# --- determinism -------------------------------------------------------------------------


@PROPS
@given(pytorch_jobs())
def test_compiling_twice_gives_the_same_bytes(job: dict[str, Any]) -> None:
    text = job_yaml(job)
    assert compile_text(text) == compile_text(text)


COMPILE = "from flatjob.compiler.cli import main; main()"


def compile_in_subprocess(src: Path, out: Path, seed: str) -> dict[str, bytes]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    run = subprocess.run(
        [sys.executable, "-c", COMPILE, "compile", str(src), "-o", str(out)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    return {
        p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
    }


@settings(
    max_examples=examples(2), derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.lists(
        pytorch_jobs(),
        min_size=4,
        max_size=8,
        unique_by=lambda j: (j["metadata"].get("namespace"), j["metadata"]["name"]),
    )
)
def test_bytes_do_not_depend_on_the_hash_seed(
    tmp_path_factory: pytest.TempPathFactory, jobs: list[dict[str, Any]]
) -> None:
    root = tmp_path_factory.mktemp("seed")
    (root / "jobs.yaml").write_text(job_yaml(*jobs), encoding="utf-8")
    first = compile_in_subprocess(root / "jobs.yaml", root / "out-a", "0")
    second = compile_in_subprocess(root / "jobs.yaml", root / "out-b", "12345")
    assert first == second
    assert sum(rel.endswith("podtemplates.yaml") for rel in first) >= 1


# --- the elastic seat order --------------------------------------------------------------

weights = st.lists(st.integers(0, 6), min_size=1, max_size=4).map(
    lambda ws: [(f"t{i}", w) for i, w in enumerate(ws)]
)


@settings(max_examples=examples(200), derandomize=True, deadline=None)
@given(weights, st.integers(0, 20))
def test_seat_order_is_house_monotone(ws: list[tuple[str, int]], n: int) -> None:
    now, then = allocation(ws, n), allocation(ws, n + 1)
    assert all(now[t] <= then[t] for t, _ in ws)
    assert seat_order(ws, n) == seat_order(ws, n + 1)[:n]
    if any(w for _, w in ws):
        assert sum(then.values()) == n + 1


@settings(max_examples=examples(200), derandomize=True, deadline=None)
@given(weights, st.integers(0, 20))
def test_seat_order_is_dhondt(ws: list[tuple[str, int]], n: int) -> None:
    """An independent D'Hondt: each seat to the highest weight/(seats+1), ties to the earlier."""
    seats = {t: 0 for t, _ in ws}
    live = [(i, t, w) for i, (t, w) in enumerate(ws) if w > 0]
    for _ in range(n if live else 0):
        _, t, _ = max(live, key=lambda x: (Fraction(x[2], seats[x[1]] + 1), -x[0]))
        seats[t] += 1
    assert allocation(ws, n) == seats
