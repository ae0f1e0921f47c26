"""Scenario harness: a compiled job, a cluster, the runtime and optionally a GitOps tool.

The runtime always talks to its cluster through runtime.kube and the real `kubernetes`
client over HTTP.  By default the cluster is the fake API server (runtime.sim.server) with a
kubelet stand-in; time is virtual and every component is stepped in turn: the runtime
(after a sync barrier: a bookmark on each of its watches, so it has seen every change made
so far; a second runtime beside it steps after the same barrier, `step_other`), the kubelet
stand-in, the GitOps simulator.  How much a step does never depends on the machine's speed
(with `threads`, only the order its cycles' requests interleave in): the runtime's wall-clock
budgets are frozen there (tests/runtime/conftest.py, `_virtual_budgets`), and its time-outs
are safety limits.  With FLATJOB_REAL_CLUSTER=1 and a
KUBECONFIG, the same scenarios run against a real API server with busybox pods; the
runtime then runs in a thread on real time.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import os
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from manifestkit import objects_of

from flatjob.compiler import keys
from flatjob.compiler.loader import Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents, namespace_runtimes
from flatjob.runtime.api import ApiError
from flatjob.runtime.controller import CONCURRENCY, Controller
from flatjob.runtime.kube import KubeCluster, Timeouts
from flatjob.runtime.sim.apiserver.copies import clone
from flatjob.runtime.sim.cluster import FakeCluster
from flatjob.runtime.sim.kubelet import FakeKubelet
from flatjob.runtime.sim.server import ConnectionAbort, FakeApiServer

REAL = os.environ.get("FLATJOB_REAL_CLUSTER") == "1" and bool(os.environ.get("KUBECONFIG") or os.path.exists(os.path.expanduser("~/.kube/config")))
NAMESPACE = "default"
OPEN: list[Scenario] = []  # scenarios to close after each test (tests/runtime/conftest.py)
PLURAL = lambda kind: kind.lower() + "s"  # noqa: E731
# Which runtime serves the scenario's job: the namespace's (the default) or the job's own.
# tests/runtime/conftest.py runs the scenario modules in both modes (`runtime_mode`).
MODES = ("namespace", "job")
MODE: contextvars.ContextVar[str] = contextvars.ContextVar("runtime_mode", default="namespace")


def compile_text(text: str, options: CompileOptions | None = None) -> list[dict[str, Any]]:
    """Compile job specs to their manifests (the first job's record first), as a GitOps tool
    would see them, with their namespace's runtime when compiled in namespace mode."""
    return clone(_compiled(text, options or CompileOptions(namespace=NAMESPACE, runtime=MODE.get())))  # type: ignore[arg-type]


@functools.lru_cache(maxsize=256)
def _compiled(text: str, options: CompileOptions) -> list[dict[str, Any]]:
    """One compile per text and options for the whole run (scenarios compile the same jobs
    again and again); each caller gets its own copy to change."""
    docs, problems = parse(textwrap.dedent(text), "scenario.yaml")
    assert not problems, problems
    result = compile_documents(Loaded(jobs=docs), options)
    assert not result.failed, [d.message for d in result.diagnostics]
    out = [obj for job in result.jobs for obj in objects_of(job.files)]
    for docs_of_namespace in namespace_runtimes(result.jobs).values():
        out += copy.deepcopy(docs_of_namespace)
    for obj in out:
        obj["metadata"].setdefault("namespace", NAMESPACE)
    return out


@dataclass
class Clock:
    """Virtual time for the fake cluster."""

    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass(eq=False)
class Scenario:
    """One job under test: its manifests, the cluster, the runtime and the GitOps tool."""

    text: str
    gitops: str | None = None  # None | "argo" | "flux"
    options: CompileOptions | None = None
    clock: Clock = field(default_factory=Clock)
    starts: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # run_key -> starts
    # A namespace runtime's cycles on its threads, each step waiting for them (as in its pod, but
    # their requests interleave differently from run to run: for tests that check invariants).
    # Without, they run on the loop's thread in queue order, and a seed replays exactly.
    threads: bool = False

    def __post_init__(self) -> None:
        if REAL and self.gitops:
            import pytest

            pytest.skip("the GitOps simulations run against the fake API server")
        self.namespace = f"flatjob-{uuid.uuid4().hex[:8]}" if REAL else NAMESPACE
        self.options = self.options or CompileOptions(namespace=self.namespace, runtime=MODE.get())  # type: ignore[arg-type]
        self.mode = self.options.runtime
        self.manifests = compile_text(self.text, self.options)
        self.record = next(o for o in self.manifests if o["apiVersion"] == keys.RECORD_API_VERSION)
        self.kind, self.name = self.record["kind"], self.record["metadata"]["name"]
        if REAL:
            from .realcluster import RealCluster

            self.cluster = RealCluster()  # type: ignore[assignment]
            self.cluster.create_namespace(self.namespace)  # type: ignore[attr-defined]
            self.kubelet = None  # the real kubelet runs the pods
        else:
            self.cluster = FakeCluster(self.clock)
            self.server = FakeApiServer(self.cluster)
            self.server.on_request = self._on_request
            self.kubelet = FakeKubelet(self.cluster, NAMESPACE, self.clock)
            if any(keys.KUEUE_QUEUE_NAME in (o["template"]["metadata"].get("labels") or {}) for o in self.manifests if o["kind"] == "PodTemplate"):
                from flatjob.runtime.sim.kueue import KueuePods

                self.kubelet.kueue = KueuePods(self.cluster, NAMESPACE)  # a job sent to Kueue runs where Kueue does
        self.tool = make_gitops(self.gitops, self.cluster, self.manifests) if self.gitops else None
        for obj in self.manifests:
            if obj["kind"] in ("PodTemplate", "PodGroup", "Deployment") or obj["apiVersion"] == keys.RECORD_API_VERSION:
                self.cluster.apply(copy.deepcopy(obj))
        self.runner = None
        self.generation = 0  # which runtime process this is (its User-Agent names it)
        self.kill_after: int | None = None  # the runtime dies at its N-th next write (chaos tests)
        self.dead = False
        # Chaos: each restarted runtime process's first list of these resources fails (a 500 from
        # etcd, a 429): it must act on no cache it has not filled (review 24, round 7).
        self.fail_first_lists: tuple[str, ...] = ()
        self._lists_failed: set[tuple[int, str]] = set()
        self.controller: Controller | None = None
        self.controller = self.new_controller()
        OPEN.append(self)

    def kube(self, identity: str) -> KubeCluster:
        """runtime.kube over HTTP to the fake API server, as the runtime image uses it.  The read
        time-out is a safety one that no answer of the in-process server nears (tests that hang
        a request past it raise it): a request timed out by a loaded machine is a failure on a
        virtual clock, whose back-off the scenario's ticks then wait out."""
        config = self.server.api_client().configuration
        return KubeCluster(config, Timeouts(connect=2.0, read=30.0, watch_read=30.0, watch_server=300), identity=identity)

    def new_controller(self) -> Controller:
        """A fresh runtime process (nothing in memory), as after a crash or a rollout."""
        if REAL:
            from .realcluster import RealRunner

            if self.runner is not None:
                self.runner.close()
            self.runner = RealRunner(self.cluster, self.namespace, self.kind, self.name)  # type: ignore[arg-type]
            return self.runner.controller
        if self.controller is not None:
            self.controller.close()
        self.generation += 1
        self.dead = False
        c = self.runtime(f"runtime-{self.generation}", use_lease=False)
        c.start()
        return c

    def runtime(self, identity: str, **kw: Any) -> Controller:
        """A runtime process for this scenario's mode: the namespace's, or the job's own."""
        scope = (self.kind, self.name) if self.mode == "job" else (None, None)
        if self.mode == "namespace" and self.threads:
            kw = {"concurrency": CONCURRENCY, "turn_wait": 60.0, **kw}
        cluster = kw.pop("cluster", None) or self.kube(identity)
        return Controller(cluster, NAMESPACE, *scope, identity=identity, clock=kw.pop("clock", self.clock), **kw)

    def _on_request(self, verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        """Chaos: the runtime process dies at its N-th write; a dead one is never heard again."""
        if "(runtime-" not in agent:
            return  # the kubelet stand-in, a GitOps simulator, the test itself
        if not agent.endswith(f"(runtime-{self.generation})") or self.dead:
            raise ConnectionAbort(resource)  # a killed process: nothing it sends arrives
        if verb == "list" and resource in self.fail_first_lists and self.generation > 1 and (self.generation, resource) not in self._lists_failed:
            self._lists_failed.add((self.generation, resource))
            raise ApiError("etcdserver: request timed out", status=500)
        if self.kill_after is not None and verb in ("create", "update", "patch", "delete"):
            if self.kill_after <= 0:
                self.kill_after = None
                self.dead = True
                raise ConnectionAbort(resource)
            self.kill_after -= 1

    def sync(self, limit: float = 60.0, controller: Controller | None = None) -> None:
        """Barrier: the runtime's watches (or `controller`'s, a second runtime's) have delivered
        every change made so far (a BOOKMARK round trip, skipped when nothing changed since
        they reached the last one: most ticks).  `limit` (wall seconds) is a safety time-out
        that a passing run never nears: a bookmark takes milliseconds, but 10 s was within
        reach of a loaded machine's scheduling hiccups."""
        runtime = controller or self.controller
        if not self._behind(runtime, self.server.cluster.store.rv):
            return
        rv = self.server.bookmark_all()
        end = time.monotonic() + limit
        while True:
            behind = self._behind(runtime, rv)
            if not behind:
                return
            if time.monotonic() > end:
                raise AssertionError(f"the runtime's watches {behind} did not reach resourceVersion {rv}")
            runtime.observe(0.002)  # on the pods; the other watches bookmarks land meanwhile

    def step_other(self, controller: Controller) -> None:
        """One turn of a second runtime beside the scenario's, after the same barrier: stepped
        without it, its watches raced the virtual clock, and a loaded machine let ticks pass
        before it saw what they did (CI saw a namesake's freed names unseen for 29 ticks)."""
        self.sync(controller=controller)
        controller.step()

    @staticmethod
    def _behind(runtime: Controller, rv: int) -> list[str]:
        """The runtime's open watches that have not reached `rv`."""
        return [i.name for i in runtime.informers() if i.retry_at is None and _rv(i.resource_version) < rv]

    def close(self) -> None:
        """Stop the runtime and the fake API server; on a real cluster, delete the namespace."""
        if self.runner is not None:
            self.runner.close()
            self.cluster.delete_namespace(self.namespace)  # type: ignore[attr-defined]
            return
        if self.controller is not None:
            self.controller.close()
        self.server.close()

    def tick(self, dt: float = 1.0) -> None:
        """One round: runtime, kubelet, GitOps tool; then time moves on."""
        if REAL:
            time.sleep(dt)
            self._count_starts()
            if self.tool is not None:
                self.tool.tick()
            return
        self.sync()
        self.controller.step()
        before = {o["metadata"]["uid"]: o.get("status", {}).get("phase") for o in self.cluster.pods(NAMESPACE).values()}
        self.kubelet.tick()
        for name, pod in self.cluster.pods(NAMESPACE).items():
            if pod.get("status", {}).get("phase") == "Running" and before.get(pod["metadata"]["uid"]) != "Running":
                self.starts[run_key(name, pod)] += 1
        if self.tool is not None:
            self.tool.tick()
        self.clock.now += dt

    def _count_starts(self) -> None:
        """Real clusters: count each pod UID seen running once, by its run key."""
        seen = self.__dict__.setdefault("_seen", set())
        for name, pod in self.pods().items():
            uid = pod["metadata"]["uid"]
            if pod.get("status", {}).get("phase") in ("Running", "Succeeded", "Failed") and not pod["spec"].get("schedulingGates") and uid not in seen:
                seen.add(uid)
                self.starts[run_key(name, pod)] += 1

    def now(self) -> float:
        return time.time() if REAL else self.clock.now

    def status(self) -> dict[str, Any]:
        return self.cluster.record_status(self.namespace, PLURAL(self.kind), self.name)

    def run_until(self, done: Callable[[dict[str, Any]], bool], limit: float = 900, dt: float = 1.0) -> dict[str, Any]:
        """Tick until `done(status)` or `limit` seconds (virtual on the fake); returns the status."""
        end = self.now() + limit
        while self.now() < end:
            self.tick(dt)
            st = self.status()
            if done(st):
                return st
        raise AssertionError(f"not done after {limit}s: phase={self.status().get('phase')} runtime={self.status().get('runtime')}")

    def finished(self, limit: float = 900) -> dict[str, Any]:
        return self.run_until(lambda s: s.get("phase") in ("Succeeded", "Failed"), limit)

    def settle(self, seconds: float = 120) -> Counter[str]:
        """Run on after the outcome; return what changed in the cluster meanwhile, by change
        and resource ("ADDED pods", "MODIFIED records/...", "DELETED pods"; Events aside;
        on a real cluster: the objects whose resourceVersion changed)."""
        if REAL:
            return self._settle_real(seconds)
        changes: Counter[str] = Counter()

        def note(change: Any) -> None:
            if change.key != "events":
                changes[f"{change.type} {change.key}"] += 1

        self.cluster.store.listeners.append(note)
        try:
            for _ in range(int(seconds)):
                self.tick()
        finally:
            self.cluster.store.listeners.remove(note)
        return changes

    def _settle_real(self, seconds: float) -> Counter[str]:
        def versions() -> dict[str, str]:
            out = {f"pod/{n}": p["metadata"]["resourceVersion"] for n, p in self.pods().items()}
            out["record"] = self.cluster.record(self.namespace, PLURAL(self.kind), self.name)["metadata"]["resourceVersion"]
            return out

        before = versions()
        for _ in range(int(seconds)):
            self.tick()
        after = versions()
        return Counter({k: 1 for k in set(before) | set(after) if before.get(k) != after.get(k)})

    def pods(self) -> dict[str, dict[str, Any]]:
        return self.cluster.pods(self.namespace)

    def scale(self, replicas: int) -> None:
        """kubectl scale on the record (its scale subresource)."""
        self.cluster.scale_record(self.namespace, PLURAL(self.kind), self.name, replicas)

    def update_spec(self, text: str) -> None:
        """A new commit: recompile and let the GitOps tool (or a plain apply) sync it."""
        self.manifests = compile_text(text, self.options)
        if self.tool is not None:
            self.tool.sync(self.manifests)
        else:  # `kubectl apply -k`: the record and the PodTemplates (no prune)
            from .gitops import _Tool

            _Tool(self.cluster, self.manifests).reconcile()


def _rv(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


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
