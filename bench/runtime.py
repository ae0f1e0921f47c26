"""Bench the runtime as it runs in a cluster: its own process, over HTTP, against pods shaped
like an API server's.

    python bench/runtime.py [--pods 1000] [--changes 20] [--idle 5] [--json]

What runs:
- one GenericJob with N busybox replicas, compiled by flatjob (as git holds it);
- the fake API server (runtime.sim.server over runtime.sim.cluster) in this process, with the
  kubelet stand-in (runtime.sim.kubelet.FakeKubelet) whose containers run until the bench ends
  them: objects carry an API server's defaults, status and managedFields (~5-8 KB a pod);
- the runtime: `flatjob runtime` in a separate process, with a kubeconfig for the fake,
  the real `kubernetes` client and runtime.kube, on real time, with its Lease.
What it measures:
- rss_peak_mib: the runtime process's peak RSS (VmHWM), sampled to the end;
- status_latency_*: wall time from a pod's phase change (kubelet side) until the record's
  status shows it, over --changes changes made one at a time;
- status_writes_per_cycle_max: the runtime's own gauge (flatjob_cycle_status_writes_max);
- api_calls_per_pod_event_max: the runtime's requests (watches and Lease aside) per change;
- idle_calls: its requests during --idle seconds with nothing changing, the Lease aside;
- idle_lease_requests_per_s: the Lease's own requests meanwhile (a GET and a PUT every 5 s);
- status_bytes_max: the largest status the runtime wrote (compact JSON);
- versions: Python and the libraries the figures were measured with.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

NS = "default"
NAME = "big"
JOB = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {{name: {name}}}
spec:
  replicaSpecs:
    - type: worker
      replicas: {pods}
      restartPolicy: {{policy: OnFailure, limit: 1000}}
      template:
        spec:
          containers:
            - name: main
              image: busybox:1.36
              command: [sh, -c, 'sleep 3600']
              resources: {{requests: {{cpu: 100m, memory: 64Mi}}, limits: {{memory: 64Mi}}}}
"""
RUNTIME_AGENT = "(bench-runtime)"
QUIET = ("watch", )  # request verbs that are not work the runtime chose to do


def compile_job(pods: int) -> list[dict[str, Any]]:
    """The manifests git would hold, in the namespace the bench uses."""
    import yaml

    from flatjob.compiler.loader import Loaded, parse
    from flatjob.compiler.options import CompileOptions
    from flatjob.compiler.pipeline import compile_documents

    docs, problems = parse(JOB.format(name=NAME, pods=pods), "bench.yaml")
    assert not problems, problems
    result = compile_documents(Loaded(jobs=docs), CompileOptions(namespace=NS))
    assert not result.failed, [d.message for d in result.diagnostics]
    out: list[dict[str, Any]] = []
    for rel, body in sorted(result.jobs[0].files.items()):
        if rel != "kustomization.yaml":
            out += [d for d in yaml.safe_load_all(body) if d]
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Forever:
    """The kubelet's runner here: every container runs until the bench ends it."""

    def run(self, pod: Any, container: Any) -> tuple[float, int | None]:
        return float("inf"), None


class Bench:
    """The fake API server and kubelet in this process; the runtime in its own."""

    def __init__(self, manifests: list[dict[str, Any]], tmp: Path):
        from flatjob.compiler import keys
        from flatjob.runtime.sim.cluster import FakeCluster
        from flatjob.runtime.sim.kubelet import FakeKubelet
        from flatjob.runtime.sim.server import FakeApiServer

        self.cluster = FakeCluster(time.time)
        self.server = FakeApiServer(self.cluster)
        self.kubelet = FakeKubelet(self.cluster, NS, time.time, schedule_delay=0.0, runner=Forever())  # type: ignore[arg-type]
        self.record_key = next(o for o in manifests if o["apiVersion"] == keys.RECORD_API_VERSION)
        self.plural = self.record_key["kind"].lower() + "s"
        for obj in manifests:
            if obj["kind"] in ("Pod", "PodTemplate", "PodGroup") or obj["apiVersion"] == keys.RECORD_API_VERSION:
                obj["metadata"]["namespace"] = NS
                self.cluster.apply(obj)
        self.pods = sorted(o["metadata"]["name"] for o in manifests if o["kind"] in ("Pod", "PodTemplate"))
        self.http_port = free_port()
        kubeconfig = self.server.kubeconfig(tmp / "kubeconfig", NS)
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": NS, "POD_NAME": "bench-runtime"}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flatjob.compiler.cli", "runtime", "--kind", self.record_key["kind"], "--name", NAME, "--http-port", str(self.http_port), "--log-level", "WARNING"],
            env=env, stdout=subprocess.DEVNULL, stderr=open(tmp / "runtime.log", "w"),  # noqa: SIM115
        )
        self.peak_kib = 0
        self.status_bytes_max = 0
        self.target: tuple[str, int] | None = None  # (phase, count) a change waits to see in the status's aggregate
        self.seen = threading.Event()
        self.seen_at = 0.0
        self.cluster.store.listeners.append(self._on_change)

    def _on_change(self, change: Any) -> None:
        """Every stored write (in the server's thread): note when a status shows the target."""
        if change.key != f"records/{self.plural}" or change.type != "MODIFIED":
            return
        status = change.obj.get("status") or {}
        self.status_bytes_max = max(self.status_bytes_max, len(json.dumps(status, separators=(",", ":"))))
        if self.target is not None and (status.get("aggregate") or {}).get(self.target[0].lower(), 0) >= self.target[1]:
            self.seen_at = time.perf_counter()
            self.target = None
            self.seen.set()

    # --- observing ---------------------------------------------------------------------------------
    def sample(self) -> None:
        """Keep the runtime's peak RSS and the largest status so far."""
        try:
            text = Path(f"/proc/{self.proc.pid}/status").read_text()
            self.peak_kib = max(self.peak_kib, int(re.search(r"VmHWM:\s+(\d+)", text).group(1)))  # type: ignore[union-attr]
        except (OSError, AttributeError):
            pass
        if self.proc.poll() is not None:
            raise SystemExit(f"bench: the runtime exited with {self.proc.returncode}")

    def status(self) -> dict[str, Any]:
        return self.cluster.record(NS, self.plural, NAME).get("status") or {}

    def runtime_calls(self, lease: bool = False) -> Counter[str]:
        """The runtime's requests so far, by verb and resource (watches aside; the Lease's
        only when `lease`, otherwise everything but the Lease)."""
        out: Counter[str] = Counter()
        for r in list(self.server.log):
            if getattr(r, "agent", RUNTIME_AGENT).endswith(RUNTIME_AGENT) and r.verb not in QUIET and r.resource.startswith("leases") == lease:
                out[f"{r.verb} {r.resource}"] += 1
        return out

    def metrics(self) -> dict[str, float]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=5).read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = out.get(key, 0.0) + float(value)
        return out

    # --- driving -----------------------------------------------------------------------------------
    def until(self, done: Any, limit: float, what: str) -> float:
        start = time.perf_counter()
        while not done():
            if time.perf_counter() - start > limit:
                raise SystemExit(f"bench: {what} not reached after {limit}s")
            self.kubelet.tick()
            self.sample()
            time.sleep(0.005)
        return time.perf_counter() - start

    def quiet(self, settle: float = 0.5, limit: float = 60.0) -> None:
        """Wait until the runtime made no request for `settle` seconds."""
        start = calm = time.perf_counter()
        last = sum(self.runtime_calls().values())
        while time.perf_counter() - calm < settle:
            if time.perf_counter() - start > limit:
                raise SystemExit("bench: the runtime never went quiet")
            self.kubelet.tick()
            self.sample()
            time.sleep(0.02)
            now = sum(self.runtime_calls().values())
            if now != last:
                last, calm = now, time.perf_counter()

    def change(self, pod: str, code: int, phase: str, count: int) -> float:
        """End `pod` with `code` (kubelet side); seconds until a status write counts `count`
        replicas in `phase` (status.aggregate: a 1000-pod status lists only 100 replicas)."""
        self.seen.clear()
        self.target = (phase, count)
        t0 = time.perf_counter()
        self.kubelet.kill(pod, code)
        if not self.seen.wait(60):
            raise SystemExit(f"bench: {pod} {phase} never reached the status")
        self.sample()
        return self.seen_at - t0

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.server.close()


def versions() -> dict[str, str]:
    """What the figures were measured with: Python and the libraries on the runtime's path."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in ("flatjob", "kubernetes", "urllib3", "orjson", "PyYAML"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    manifests = compile_job(args.pods)
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(manifests, Path(tmp))
        try:
            n = len(bench.pods)
            out: dict[str, Any] = {"pods": n}
            out["startup_s"] = bench.until(lambda: (bench.status().get("aggregate") or {}).get("running") == n, 900, "every pod Running in the status")
            bench.quiet()
            latencies, per_event = [], []
            for i in range(args.changes):
                before = bench.runtime_calls()
                latencies.append(bench.change(bench.pods[i], 0, "Succeeded", i + 1))
                bench.quiet()
                after = bench.runtime_calls()
                per_event.append(sum(after.values()) - sum(before.values()))
            before, lease_before = bench.runtime_calls(), bench.runtime_calls(lease=True)
            end = time.perf_counter() + args.idle
            while time.perf_counter() < end:
                bench.sample()
                time.sleep(0.05)
            idle = bench.runtime_calls() - before
            lease = bench.runtime_calls(lease=True) - lease_before
            metrics = bench.metrics()
            bench.sample()
            out.update(
                rss_peak_mib=round(bench.peak_kib / 1024, 1),
                status_latency_p50_s=round(statistics.median(latencies), 4),
                status_latency_max_s=round(max(latencies), 4),
                status_writes_per_cycle_max=int(metrics.get("flatjob_cycle_status_writes_max", 0)),
                api_calls_per_pod_event_max=max(per_event),
                idle_calls=sum(idle.values()),
                idle_lease_requests_per_s=round(sum(lease.values()) / args.idle, 2),
                status_bytes_max=bench.status_bytes_max,
                reconcile_cycles=int(metrics.get("flatjob_reconcile_seconds_count", 0)),
                api_errors=int(sum(v for k, v in metrics.items() if k.startswith("flatjob_api_errors_total"))),
                versions=versions(),
            )
            return out
        finally:
            bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of nothing changing (two Lease renewals at least)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return
    print(f"flatjob runtime bench: python bench/runtime.py {' '.join(sys.argv[1:])}".rstrip())
    for key, value in result.items():
        print(f"  {key:32} {value}")


if __name__ == "__main__":
    main()
