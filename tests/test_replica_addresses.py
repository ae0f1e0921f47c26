"""GenericJob replica addresses: T9k's `[job-name]-[type]-[rank]` resolves from any pod in the namespace.

T9k's manual (genericjob.md, 暴露副本的服务) names every replica `<job>-<type>-<rank>` when
spec.service is set, and `$(service.<type>[<rank>].host)` gives that name.  This checks the
rendered objects against Kubernetes' DNS rules (kubernetes/dns docs/specification.md): a pod
with the default ClusterFirst policy searches `<ns>.svc.<zone>` first, so a bare name N
resolves to the Service N of the pod's own namespace; a headless Service's A records are its
endpoints' pod IPs, not-ready ones included when publishNotReadyAddresses is set.  So every
substituted host must be a headless, publishNotReadyAddresses Service of the job's namespace
whose selector picks exactly the pod of that replica.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import corpus_files, corpus_params
from manifestkit import compiled_objects, objects_of, pods_of

from flatjob.compiler.loader import Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents

# The manual's TF_CONFIG example (genericjob.md, 变量替换) with the manual's spec.service
# (暴露副本的服务): the variables are "available only when the replicas' service is exposed".
MANUAL = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: generic-example
spec:
  service:
    ports:
      - name: http
        port: 2222
  replicaSpecs:
    - type: worker
      replicas: 4
      template:
        spec:
          containers:
            - command:
                - python
                - /mnt/training.py
              image: tensorflow/tensorflow:2.11.0
              name: tensorflow
              env:
                - name: TF_CONFIG
                  value: '{"task":{"type":"$(type)","index":$(rank)},"cluster":{"worker":["$(service.worker[0].host):$(service.port[http])","$(service.worker[1].host):$(service.port[http])","$(service.worker[2].host):$(service.port[http])","$(service.worker[3].host):$(service.port[http])"]}}'
"""


def resolve(name: str, namespace: str | None, objects: list[dict[str, Any]]) -> list[str]:
    """What a bare name resolves to from a pod in `namespace`: the pods behind the Service
    `name` in that namespace (headless), or [] when there is no such Service."""
    services = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace]
    if not services:
        return []
    spec = services[0]["spec"]
    assert spec.get("clusterIP") == "None" and spec.get("publishNotReadyAddresses") is True, "headless, and resolvable before Ready"
    select = spec["selector"].items()
    return [p["metadata"]["name"] for p in objects if p["kind"] == "Pod" and p["metadata"].get("namespace") == namespace and select <= p["metadata"]["labels"].items()]


HOST = re.compile(r"^(?P<host>[a-z0-9-]+):(?P<port>\d+)$")


@pytest.mark.parametrize("namespace", [None, "demo"], ids=["namespace-from-gitops-tool", "namespace-at-compile"])
def test_manual_tf_config_hosts_resolve_to_their_replica(namespace: str | None) -> None:
    objects = compiled_objects(MANUAL, CompileOptions(namespace=namespace))
    objects += pods_of(objects)  # the pods the runtime creates from the PodTemplates
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 4
    for pod in pods:
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        cluster = json.loads(env["TF_CONFIG"])["cluster"]["worker"]
        assert cluster == [f"generic-example-worker-{r}:2222" for r in range(4)]  # T9k's names
        for rank, address in enumerate(cluster):
            host = HOST.match(address)["host"]  # type: ignore[index]
            assert resolve(host, namespace, objects) == [f"generic-example-worker-{rank}"]


def test_no_service_no_services_and_no_subdomain() -> None:
    """GenericJob `service`: "Optional: Defaults to empty and no service will be created" (T9k's
    API reference): no Service at all, and no pod names a subdomain nothing governs (review of
    issue 20, round 15: the job's own headless Service was rendered anyway)."""
    text = MANUAL.replace("  service:\n    ports:\n      - name: http\n        port: 2222\n", "").replace("$(service.worker[0].host):$(service.port[http])", "x")
    text = re.sub(r',"\$\(service[^"]*"', "", text)
    objects = compiled_objects(text)
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Service"] == []
    pods = pods_of(objects)
    assert pods and all("subdomain" not in p["spec"] and p["spec"]["hostname"] == p["metadata"]["name"] for p in pods)
    assert all("dnsConfig" not in p["spec"] for p in pods)


@pytest.mark.parametrize("path", corpus_params([p for p in corpus_files() if "genericjob" in p.name]), ids=lambda p: p.stem)
def test_corpus_generic_jobs_with_service_expose_every_replica(path: Any) -> None:
    docs, problems = parse(path.read_text(encoding="utf-8"), str(path))
    if problems or not docs or not (docs[0].data.get("spec") or {}).get("service"):
        pytest.skip("no spec.service")
    result = compile_documents(Loaded(jobs=docs), CompileOptions(namespace="demo"))
    if result.failed:
        pytest.skip("the file has an error lint reports")
    objects = [o for job in result.jobs for o in objects_of(job.files)]
    objects += pods_of(objects)
    for pod in (o for o in objects if o["kind"] == "Pod"):
        assert resolve(pod["metadata"]["name"], "demo", objects) == [pod["metadata"]["name"]]
