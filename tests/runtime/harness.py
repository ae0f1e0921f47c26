"""Scenario harness: a compiled job, a cluster, the runtime and optionally a GitOps tool.

On the fake cluster (default) time is virtual and every component is stepped in turn:
the runtime, the kubelet stand-in, the GitOps simulator.  With FLATJOB_REAL_CLUSTER=1 and a
KUBECONFIG, the same scenarios run against a real API server with busybox pods; the
runtime then runs in a thread on real time.
"""

from __future__ import annotations

import copy
import os
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from flatjob.compiler import keys
from flatjob.compiler.loader import parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents
from flatjob.compiler.loader import Loaded
from flatjob.runtime.controller import Controller
from flatjob.runtime.fake import FakeCluster
from flatjob.runtime.kubelet import FakeKubelet

REAL = os.environ.get("FLATJOB_REAL_CLUSTER") == "1"
NAMESPACE = os.environ.get("FLATJOB_TEST_NAMESPACE", "default")
PLURAL = lambda kind: kind.lower() + "s"  # noqa: E731


def compile_text(text: str, options: CompileOptions | None = None) -> list[dict[str, Any]]:
    """Compile one job spec to its manifests (record first), as a GitOps tool would see them."""
    docs, problems = parse(textwrap.dedent(text), "scenario.yaml")
    assert not problems, problems
    result = compile_documents(Loaded(jobs=docs), options or CompileOptions(namespace=NAMESPACE))
    assert not result.failed, [d.message for d in result.diagnostics]
    out: list[dict[str, Any]] = []
    for rel, body in sorted(result.jobs[0].files.items()):
        if rel != "kustomization.yaml":
            out += [d for d in yaml.safe_load_all(body) if d]
    for obj in out:
        obj["metadata"].setdefault("namespace", NAMESPACE)
    return out


@dataclass
class Clock:
    """Virtual time for the fake cluster."""

    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Scenario:
    """One job under test: its manifests, the cluster, the runtime and the GitOps tool."""

    text: str
    gitops: str | None = None  # None | "argo" | "flux"
    options: CompileOptions | None = None
    clock: Clock = field(default_factory=Clock)
    starts: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # run_key -> starts

    def __post_init__(self) -> None:
        self.manifests = compile_text(self.text, self.options)
        self.record = next(o for o in self.manifests if o["apiVersion"] == keys.RECORD_API_VERSION)
        self.kind, self.name = self.record["kind"], self.record["metadata"]["name"]
        self.cluster = FakeCluster(self.clock)
        self.kubelet = FakeKubelet(self.cluster, NAMESPACE, self.clock)
        self.tool = make_gitops(self.gitops, self.cluster, self.manifests) if self.gitops else None
        for obj in self.manifests:
            if obj["kind"] in ("Pod", "PodGroup") or obj["apiVersion"] == keys.RECORD_API_VERSION:
                self.cluster.apply(copy.deepcopy(obj))
        self.controller = self.new_controller()

    def new_controller(self) -> Controller:
        """A fresh runtime process (nothing in memory), as after a crash or a rollout."""
        c = Controller(self.cluster, NAMESPACE, self.kind, self.name, clock=self.clock, use_lease=False)
        c.start()
        return c

    def tick(self, dt: float = 1.0) -> None:
        """One round: runtime, kubelet, GitOps tool; then time moves on."""
        self.controller.step()
        before = {o["metadata"]["uid"]: o.get("status", {}).get("phase") for o in self.cluster.pods(NAMESPACE).values()}
        self.kubelet.tick()
        for name, pod in self.cluster.pods(NAMESPACE).items():
            if pod.get("status", {}).get("phase") == "Running" and before.get(pod["metadata"]["uid"]) != "Running":
                self.starts[run_key(name, pod)] += 1
        if self.tool is not None:
            self.tool.tick()
        self.clock.now += dt

    def status(self) -> dict[str, Any]:
        return self.cluster.record(NAMESPACE, PLURAL(self.kind), self.name).get("status") or {}

    def run_until(self, done: Callable[[dict[str, Any]], bool], limit: float = 900, dt: float = 1.0) -> dict[str, Any]:
        """Tick until `done(status)` or `limit` virtual seconds; returns the last status."""
        end = self.clock.now + limit
        while self.clock.now < end:
            self.tick(dt)
            st = self.status()
            if done(st):
                return st
        raise AssertionError(f"not done after {limit}s: phase={self.status().get('phase')} runtime={self.status().get('runtime')}")

    def finished(self, limit: float = 900) -> dict[str, Any]:
        return self.run_until(lambda s: s.get("phase") in ("Succeeded", "Failed"), limit)

    def settle(self, seconds: float = 120) -> Counter[str]:
        """Run on after the outcome; return the mutating API calls made meanwhile."""
        before = Counter(self.cluster.calls)
        for _ in range(int(seconds)):
            self.tick()
        after = Counter(self.cluster.calls)
        return Counter({k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)})

    def pods(self) -> dict[str, dict[str, Any]]:
        return self.cluster.pods(NAMESPACE)

    def update_spec(self, text: str) -> None:
        """A new commit: recompile and let the GitOps tool (or a plain apply) sync it."""
        self.manifests = compile_text(text, self.options)
        record = next(o for o in self.manifests if o["apiVersion"] == keys.RECORD_API_VERSION)
        if self.tool is not None:
            self.tool.sync(self.manifests)
        else:
            self.cluster.apply_record(NAMESPACE, PLURAL(self.kind), record)


def run_key(name: str, pod: dict[str, Any]) -> tuple[str, str, str]:
    """What one run of a pod is: its name, the job attempt and the restart it belongs to."""
    notes = pod["metadata"].get("annotations") or {}
    return (name, notes.get(keys.ATTEMPT, "?"), notes.get(keys.RESTART_COUNT, "?"))


def make_gitops(kind: str, cluster: FakeCluster, manifests: list[dict[str, Any]]) -> Any:
    from .gitops import ArgoCD, Flux

    return {"argo": ArgoCD, "flux": Flux}[kind](cluster, manifests)


def busybox_job(kind_yaml: str) -> str:
    """Scenario jobs run busybox pods whose commands pick their exit code."""
    return textwrap.dedent(kind_yaml)


__all__ = ["REAL", "Scenario", "compile_text", "threading", "time"]
