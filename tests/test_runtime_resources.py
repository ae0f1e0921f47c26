"""The runtime Deployment's memory is sized from the job's pod count, as bench/runtime.py measured.

Pins the convention in docs/architecture.md §5: request = 48 MiB + 1 MiB per 50 pods (the
elastic maximum counts) + what the pods' specs hold beyond 8 KiB each (x3 a pod, x4 a type), limit = twice the
request, never under 128 MiB; a namespace runtime adds 1 MiB per 10 jobs it serves beyond the
first, rounded up to a multiple of 16 MiB (500 jobs of 4 pods: 137 MiB, 144 MiB requested;
bench/runtime.py --jobs 500 --pods-per-job 4 measured 87-90 MiB resident, README "Performance").
"""

from __future__ import annotations

import itertools

import pytest
from manifestkit import compiled_objects

from flatjob.compiler.render.runtime import runtime_resources

ELASTIC = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata: {{name: big}}
spec:
  torchrunConfig:
    enabled: true
    maxRestarts: 3
    procPerNode: "1"
    rdzvBackend: c10d
  elastic: {{enabled: true, minReplicas: 1, maxReplicas: {max}, expectedReplicas: 2}}
  replicaSpecs:
    - type: node
      replicas: {max}
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - {{name: pytorch, image: torch:1, args: [train.py]}}
"""


@pytest.mark.parametrize(
    ("pods", "request_mib", "limit_mib"),
    [(1, 48, 128), (49, 48, 128), (50, 64, 128), (1000, 80, 160), (5000, 160, 320), (20000, 448, 896)],
)
def test_memory_grows_with_the_pod_count(pods: int, request_mib: int, limit_mib: int) -> None:
    assert runtime_resources(pods) == {
        "requests": {"cpu": "10m", "memory": f"{request_mib}Mi"},
        "limits": {"memory": f"{limit_mib}Mi"},
    }


def test_an_elastic_job_is_sized_for_its_maximum() -> None:
    objects = compiled_objects(ELASTIC.format(max=60))  # past the first step (50 pods); 800 took 9 s
    templates = [o for o in objects if o["kind"] == "PodTemplate"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == runtime_resources(len(templates)) != runtime_resources(1)
    assert len(templates) == 60


def test_pods_with_big_specs_get_the_memory_their_templates_take() -> None:
    """The runtime keeps every PodTemplate's spec until it creates the pod: 40 pods of ~600 KiB."""
    job = ELASTIC.format(max=40).replace("args: [train.py]", "args: [train.py], env: [{{name: DATA, value: " + "x" * 600 * 1024 + "}}]")
    objects = compiled_objects(job.replace("{{", "{").replace("}}", "}"))
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    request = int(container["resources"]["requests"]["memory"].removesuffix("Mi"))
    assert request >= 48 + 40 * 600 // 1024


@pytest.mark.parametrize(("pods", "jobs", "request_mib"), [(4, 1, 48), (40, 10, 48), (44, 11, 64), (2000, 500, 144)])
def test_a_namespace_runtime_grows_with_its_jobs(pods: int, jobs: int, request_mib: int) -> None:
    assert runtime_resources(pods, jobs=jobs)["requests"]["memory"] == f"{request_mib}Mi"


def test_adding_jobs_one_commit_at_a_time_rarely_changes_the_runtimes_pod() -> None:
    """The request is in the runtime's pod template, and a change there restarts (Recreate) the
    runtime of every job of the namespace: a sweep adding 2-pod jobs one commit at a time
    changed it at jobs 11, 21, 25, 31...; in 16 MiB steps, twice in 200 jobs."""
    sizes = [runtime_resources(2 * jobs, jobs=jobs)["requests"]["memory"] for jobs in range(1, 201)]
    assert sum(1 for a, b in itertools.pairwise(sizes) if a != b) <= 2


def test_the_namespace_runtime_is_sized_for_all_its_jobs() -> None:
    text = "---\n".join(ELASTIC.format(max=3).replace("name: big", f"name: big{i}") for i in range(12))
    objects = compiled_objects(text)
    templates = [o for o in objects if o["kind"] == "PodTemplate"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert deployment["metadata"]["name"] == "flatjob"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == runtime_resources(len(templates), jobs=12) and len(templates) == 36
