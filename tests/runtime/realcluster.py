"""The scenario harness on a real API server (FLATJOB_REAL_CLUSTER=1 and a KUBECONFIG).

The runtime runs in a thread against runtime.kube.KubeCluster, on real time; the real
kubelet runs the busybox pods; the GitOps simulators act through the same calls they use
on the fake.  Each scenario gets its own namespace, deleted afterwards.  The record CRDs
must be installed (kubectl apply -k schemas/crds), as the kind workflow does.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from flatjob.compiler import keys
from flatjob.runtime.api import POD_TEMPLATES, PODS, AlreadyExists, NotFound, record_resource
from flatjob.runtime.cli import run_loop
from flatjob.runtime.controller import Controller
from flatjob.runtime.kube import path
from flatjob.runtime.server import Health


class RealCluster:
    """KubeCluster plus the helper calls the harness and the GitOps simulators make."""

    def __init__(self) -> None:
        from flatjob.runtime.kube import KubeCluster

        self.kube = KubeCluster(identity="scenario")
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)

    def create_namespace(self, name: str) -> None:
        self.kube.http.call("POST", "/api/v1/namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def delete_namespace(self, name: str) -> None:
        with contextlib.suppress(NotFound):
            self.kube.http.call("DELETE", f"/api/v1/namespaces/{name}")

    def pods(self, namespace: str) -> dict[str, dict[str, Any]]:
        items, _ = self.kube.list(PODS, namespace, labels=None)
        return {p["metadata"]["name"]: p for p in items if keys.JOB_NAME in (p["metadata"].get("labels") or {})}

    def record(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        return self.kube.get(record_resource(plural), namespace, name)

    def record_status(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        return self.record(namespace, plural, name).get("status") or {}

    def apply_record(self, namespace: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(body)
        body.pop("status", None)
        name = body["metadata"]["name"]
        try:
            live = self.record(namespace, plural, name)
        except NotFound:
            return self.kube.create(record_resource(plural), namespace, body)
        live["spec"] = body["spec"]
        live["metadata"]["labels"] = body["metadata"].get("labels", {})
        live["metadata"]["annotations"] = body["metadata"].get("annotations", {})
        return self.kube.replace(record_resource(plural), namespace, live)

    def scale_record(self, namespace: str, plural: str, name: str, replicas: int) -> None:
        self.kube.http.call("PATCH", path(record_resource(plural), namespace, name, "scale"), None, {"spec": {"replicas": replicas}}, "application/merge-patch+json")

    def apply(self, obj: dict[str, Any]) -> None:
        ns = obj["metadata"]["namespace"]
        if obj["apiVersion"] == keys.RECORD_API_VERSION:
            self.apply_record(ns, obj["kind"].lower() + "s", obj)
        elif obj["kind"] == "PodTemplate":
            with contextlib.suppress(AlreadyExists):
                self.kube.create(POD_TEMPLATES, ns, obj)


class RealRunner:
    """The runtime in a thread, on real time, until stopped."""

    def __init__(self, cluster: RealCluster, namespace: str, kind: str, name: str):
        self.controller = Controller(cluster.kube, namespace, kind, name, identity=f"test-{uuid.uuid4().hex[:6]}")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=run_loop, args=(self.controller, self.stop, cluster.kube.notify, Health()), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.controller.cluster.notify.set()  # type: ignore[attr-defined]
        self.thread.join(timeout=10)


def wait_until(check: Callable[[], Any], limit: float, every: float = 1.0) -> Any:
    """Poll (test side only) until check() is truthy; the runtime itself never polls."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not done after {limit}s")
