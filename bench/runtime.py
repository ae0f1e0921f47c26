"""Bench the runtime as it runs in a cluster: its own process, over HTTP, against pods shaped
like an API server's.

    python bench/runtime.py [--pods 1000] [--changes 20] [--idle 10] [--json]
    python bench/runtime.py --pods 1000 --mass-failure [--json]
    python bench/runtime.py --jobs 500 --pods-per-job 4 [--failing 1] [--hung 1 --hang 10] [--json]

What runs:
- GenericJobs of busybox replicas, compiled by flatjob in one run (as git holds them): one
  job of --pods pods, or --jobs jobs of --pods-per-job pods in one namespace;
- the fake API server (runtime.sim.server over runtime.sim.cluster) in this process, with the
  kubelet stand-in (runtime.sim.kubelet.FakeKubelet) whose containers run until the bench ends
  them: objects carry an API server's defaults, status and managedFields (~5-8 KB a pod);
- the runtime: `flatjob runtime` in processes of their own (the namespace's one, the default,
  or with --runtime job one per job), with a kubeconfig for the fake, the real `kubernetes`
  client and runtime.kube, on real time, with its Lease.
What it measures:
- rss_peak_mib: the runtime process's peak RSS (VmHWM), sampled to the end;
- status_latency_*: wall time from a pod's phase change (kubelet side) until its record's
  status shows it, over --changes changes made one at a time (in healthy jobs);
- status_writes_per_cycle_max: the runtime's own gauge (flatjob_cycle_status_writes_max);
- api_calls_per_pod_event_max: the runtime's requests (watches and the Lease aside) per change;
- idle_calls: its requests during --idle seconds with nothing changing, the Lease aside;
- idle_lease_requests_per_s, idle_requests_per_s: the Lease's requests meanwhile (a GET and a
  PUT every 5 s), and every request meanwhile, the Lease included;
- watches_open_max: the most watches the runtime held open at once;
- status_bytes_max: the largest status the runtime wrote (compact JSON);
- versions: Python and the libraries the figures were measured with.
With --jobs, `per_job` gives the same load's totals under --runtime job: one runtime per job,
measured on the first --per-job-sample jobs (each its own process) and scaled to --jobs; the
memory they would request is what their rendered Deployments ask for, summed.
With --failing N, N of the jobs crash-loop (their pods exit 1 two seconds after they start;
each restart waits the runtime's back-off, 10 s doubling to 5 min) and the status latency is
measured on the others (healthy_jobs, failing_jobs); failing_writes_during_changes,
failing_restarts_during_changes and changes_beside_a_failing_write (made within 1 s of a write
for a crash-looping job) say how much of the crash loop's work the changes met, and
status_latency_beside_failing_max_s the latency of those changes.  Started with the others, a
crash loop is at a back-off of 80-160 s by the time the changes are made (two of twenty changes
met its work in one run); with --fail-late its pods run until the changes begin and fail from then
on, so its first restarts (after 10 s, 20 s) fall among the changes.
With --hung N, N more jobs crash-loop and, once every pod runs, each write the runtime makes to
their record's status or to one of their pods waits --hang seconds before the API server
answers (an admission webhook near its 10 s time-out): the healthy jobs' status latency is
measured beside them (changes_beside_a_hung_request: how many changes were made while one of
those requests was waiting).
With --mass-failure, after the start every pod's container exits 1 at the same instant (a
NCCL abort across the whole job), and the bench measures instead:
- recovered_s: wall time until every pod runs again as a new incarnation;
- writes_per_s_max: the runtime's writes (create, update, patch, delete) in any one second;
- events_per_reason_per_10s_max: Event writes of one reason within any ten seconds;
- requests: the runtime's requests by verb and resource meanwhile; backoff_count.
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
JOB = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {{name: {name}}}
spec:
  replicaSpecs:
    - type: worker
      replicas: {pods}
      restartPolicy: {{policy: OnFailure, limit: 1000000}}
      template:
        spec:
          containers:
            - name: main
              image: busybox:1.36
              command: [sh, -c, 'sleep 3600']
              resources: {{requests: {{cpu: 100m, memory: 64Mi}}, limits: {{memory: 64Mi}}}}
"""
RUNTIME_AGENT = "(bench-runtime"
CRASH_NEAR = 1.0  # seconds: a change this soon after a crash-looping job's write was measured beside its work
QUIET = ("watch", )  # request verbs that are not work the runtime chose to do


def job_names(jobs: int) -> list[str]:
    return ["big"] if jobs == 1 else [f"job-{i:03d}" for i in range(jobs)]


def compile_jobs(names: list[str], pods: int, runtime: str) -> list[dict[str, Any]]:
    """The manifests git would hold for these jobs, in the namespace the bench uses."""
    from flatjob.compiler.loader import Loaded, parse
    from flatjob.compiler.options import CompileOptions
    from flatjob.compiler.pipeline import compile_documents

    docs, problems = parse("---".join(JOB.format(name=n, pods=pods) for n in names), "bench.yaml")
    assert not problems, problems
    result = compile_documents(Loaded(jobs=docs), CompileOptions(namespace=NS, runtime=runtime))  # type: ignore[arg-type]
    assert not result.failed, [d.message for d in result.diagnostics]
    return _objects(result.tree())


def _objects(tree: dict[str, str]) -> list[dict[str, Any]]:
    import yaml

    return [d for rel, body in sorted(tree.items()) if rel.endswith(".yaml") and not rel.endswith("kustomization.yaml")
            for d in yaml.safe_load_all(body) if d]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Forever:
    """The kubelet's runner here: every container runs until the bench ends it."""

    def run(self, pod: Any, container: Any) -> tuple[float, int | None]:
        return float("inf"), None


class Runtime:
    """One `flatjob runtime` process."""

    def __init__(self, who: str, args: list[str], kubeconfig: Path, log: Path):
        self.http_port = free_port()
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": NS, "POD_NAME": f"bench-runtime-{who}"}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flatjob.compiler.cli", "runtime", *args, "--http-port", str(self.http_port), "--log-level", "WARNING"],
            env=env, stdout=subprocess.DEVNULL, stderr=open(log, "w"),  # noqa: SIM115
        )
        self.peak_kib = 0

    def sample(self) -> None:
        try:
            text = Path(f"/proc/{self.proc.pid}/status").read_text()
            self.peak_kib = max(self.peak_kib, int(re.search(r"VmHWM:\s+(\d+)", text).group(1)))  # type: ignore[union-attr]
        except (OSError, AttributeError):
            pass
        if self.proc.poll() is not None:
            raise SystemExit(f"bench: a runtime exited with {self.proc.returncode}")

    def metrics(self) -> dict[str, float]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=5).read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = out.get(key, 0.0) + float(value)
        return out

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Bench:
    """The fake API server and kubelet in this process; the runtimes in their own."""

    def __init__(self, manifests: list[dict[str, Any]], tmp: Path, runtime: str, failing: set[str] = frozenset(),  # type: ignore[assignment]
                 hung: set[str] = frozenset(), hang: float = 0.0, concurrency: tuple[str, ...] = (), fail_late: bool = False):  # type: ignore[assignment]
        from flatjob.compiler import keys
        from flatjob.runtime.sim.cluster import FakeCluster
        from flatjob.runtime.sim.containers import Program
        from flatjob.runtime.sim.kubelet import FakeKubelet
        from flatjob.runtime.sim.server import FakeApiServer

        self.cluster = FakeCluster(time.time)
        self.server = FakeApiServer(self.cluster)
        self.kubelet = FakeKubelet(self.cluster, NS, time.time, schedule_delay=0.0, runner=Forever())  # type: ignore[arg-type]
        records = [o for o in manifests if o["apiVersion"] == keys.RECORD_API_VERSION]
        self.jobs = [o["metadata"]["name"] for o in records]
        self.plural = records[0]["kind"].lower() + "s"
        for obj in manifests:
            if obj["kind"] in ("PodTemplate", "PodGroup") or obj["apiVersion"] == keys.RECORD_API_VERSION:
                obj["metadata"]["namespace"] = NS
                self.cluster.apply(obj)
        self.pods = sorted(o["metadata"]["name"] for o in manifests if o["kind"] == "PodTemplate")
        self.crashing = [pod for pod in self.pods if pod.rsplit("-worker-", 1)[0] in failing and not (fail_late and pod.rsplit("-worker-", 1)[0] not in hung)]
        self.late = [pod for pod in self.pods if pod.rsplit("-worker-", 1)[0] in failing and pod not in self.crashing]
        for pod in self.crashing:
            self.kubelet.behaviors[pod] = lambda p, env: Program(2.0, 1)
        self.requested_mib = sum(int(c["resources"]["requests"]["memory"].rstrip("Mi")) for o in manifests if o["kind"] == "Deployment"
                                 for c in o["spec"]["template"]["spec"]["containers"] if c["name"] == "runtime")
        kubeconfig = self.server.kubeconfig(tmp / "kubeconfig", NS)
        scopes = [[*concurrency]] if runtime == "namespace" else [["--kind", records[0]["kind"], "--name", n] for n in self.jobs]
        self.runtimes = [Runtime(str(i), args, kubeconfig, tmp / f"runtime-{i}.log") for i, args in enumerate(scopes)]
        self.status_bytes_max = 0
        self.target: tuple[str, str, int] | None = None  # (job, phase, count) a change waits to see in its status's aggregate
        self.seen = threading.Event()
        self.seen_at = 0.0
        self.watches_max = 0
        self.cluster.store.listeners.append(self._on_change)
        self.writes: list[float] = []  # when each of the runtime's writes arrived
        self.event_writes: list[tuple[float, str]] = []  # (when, reason) of each Event write
        self.hung, self.hang = hung, hang
        self.hung_writes = 0
        self.hung_out = 0  # hung requests waiting now
        self.beside_hung = 0  # changes measured while a hung request was waiting
        self.beside_crash = 0  # changes measured within CRASH_NEAR s of a write for a crash-looping job
        self.beside_crash_latencies: list[float] = []
        self.hanging = False  # set once every pod runs: the hung jobs' writes wait `hang` seconds from then on
        self.failing = failing - hung
        self.failing_writes: list[float] = []  # when each of the runtime's writes for a crash-looping job arrived
        self.server.on_request = self._on_request

    def _on_request(self, verb: str, resource: str, namespace: str | None, name: str | None, agent: str) -> None:
        if RUNTIME_AGENT in agent and verb in ("create", "update", "patch", "delete"):
            self.writes.append(time.monotonic())
            if name and _job_of(name, resource) in self.failing:
                self.failing_writes.append(time.monotonic())
            if self.hanging and name and _job_of(name, resource) in self.hung:
                self.hung_writes += 1
                self.hung_out += 1
                time.sleep(self.hang)
                self.hung_out -= 1  # this request's own server thread: the others are answered meanwhile

    def _on_change(self, change: Any) -> None:
        """Every stored write (in the server's thread): note when a status shows the target."""
        if change.key == "events":
            self.event_writes.append((time.monotonic(), str(change.obj.get("reason"))))
            return
        if change.key != f"records/{self.plural}" or change.type != "MODIFIED":
            return
        status = change.obj.get("status") or {}
        self.status_bytes_max = max(self.status_bytes_max, len(json.dumps(status, separators=(",", ":"))))
        target = self.target
        if target is not None and change.obj["metadata"]["name"] == target[0] and (status.get("aggregate") or {}).get(target[1].lower(), 0) >= target[2]:
            self.seen_at = time.perf_counter()
            self.target = None
            self.seen.set()

    # --- observing ---------------------------------------------------------------------------------
    def sample(self) -> None:
        """Keep the runtimes' peak RSS and the most watches they held open."""
        for r in self.runtimes:
            r.sample()
        self.watches_max = max(self.watches_max, len(self.cluster.store.watches))

    def status(self, job: str) -> dict[str, Any]:
        return self.cluster.record(NS, self.plural, job).get("status") or {}

    def running(self) -> int:
        return sum((self.status(j).get("aggregate") or {}).get("running", 0) for j in self.jobs)

    def runtime_calls(self, lease: bool | None = False) -> Counter[str]:
        """The runtimes' requests so far, by verb and resource (watches aside; the Lease's only
        when `lease`, everything but the Lease when False, everything when None)."""
        out: Counter[str] = Counter()
        for r in list(self.server.log):
            if RUNTIME_AGENT in getattr(r, "agent", RUNTIME_AGENT) and r.verb not in QUIET and (lease is None or r.resource.startswith("leases") == lease):
                out[f"{r.verb} {r.resource}"] += 1
        return out

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in self.runtimes:
            for k, v in r.metrics().items():
                out[k] = max(out.get(k, 0.0), v) if k.endswith("_max") else out.get(k, 0.0) + v
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

    def quiet(self, settle: float = 0.5, limit: float = 60.0, busy: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        """Wait until the runtimes made no request for `settle` seconds (but for crash-looping jobs)."""
        start = calm = time.perf_counter()
        last = sum(self.runtime_calls().values())
        while time.perf_counter() - calm < settle:
            if time.perf_counter() - start > limit:
                if busy:
                    return  # the crash-looping jobs keep it busy: as quiet as it gets
                raise SystemExit("bench: the runtime never went quiet")
            self.kubelet.tick()
            self.sample()
            time.sleep(0.02)
            now = sum(self.runtime_calls().values())
            if now != last:
                last, calm = now, time.perf_counter()

    def change(self, job: str, pod: str, code: int, phase: str, count: int) -> float:
        """End `pod` with `code` (kubelet side); seconds until a status write of `job` counts
        `count` replicas in `phase` (status.aggregate: a 1000-pod status lists only 100 replicas)."""
        self.seen.clear()
        self.target = (job, phase, count)
        t0 = time.perf_counter()
        self.beside_hung += self.hung_out > 0
        since = time.monotonic() - CRASH_NEAR
        self.kubelet.kill(pod, code)
        deadline = time.perf_counter() + 60
        while not self.seen.wait(0.01):
            self.kubelet.tick()  # the crash-looping jobs' pods go on failing meanwhile
            if time.perf_counter() > deadline:
                raise SystemExit(f"bench: {pod} {phase} never reached the status")
        near = any(at >= since for at in self.failing_writes)
        self.beside_crash += near
        if near:
            self.beside_crash_latencies.append(self.seen_at - t0)
        self.sample()
        return self.seen_at - t0

    def start_failing(self) -> None:
        """--fail-late: the crash-looping jobs' pods fail now, and every incarnation after them
        two seconds after it starts (their back-off starts from its first, shortest step)."""
        from flatjob.runtime.sim.containers import Program

        for pod in self.late:
            self.kubelet.behaviors[pod] = lambda p, env: Program(2.0, 1)
            self.kubelet.kill(pod, 1)

    def close(self) -> None:
        for r in self.runtimes:
            r.close()
        self.server.close()


def _job_of(name: str, resource: str) -> str:
    """The job a write is for: a record's status by its name, a pod by its name's prefix."""
    return name if resource.endswith("/status") else name.rsplit("-worker-", 1)[0]


def _most_within(times: list[float], window: float) -> int:
    """The most of `times` that fall within any `window` seconds."""
    times, best, start = sorted(times), 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


def mass_failure(bench: Bench) -> dict[str, Any]:
    """Every pod fails at once; until every pod runs again, as a new incarnation."""
    before = {n: p["metadata"]["uid"] for n, p in bench.cluster.pods(NS).items()}
    requests_before = bench.runtime_calls()
    bench.writes.clear()
    bench.event_writes.clear()
    t0 = time.monotonic()
    for name in bench.pods:
        bench.kubelet.kill(name, 1)

    def recovered() -> bool:
        pods = bench.cluster.pods(NS)
        return len(pods) == len(before) and all(
            p["metadata"]["uid"] != before.get(n) and (p.get("status") or {}).get("phase") == "Running" for n, p in pods.items())

    bench.until(recovered, 600, "every pod running again")
    recovered_s = time.monotonic() - t0
    bench.quiet(settle=11.0, limit=120)  # the last aggregated Events go out
    reasons: dict[str, list[float]] = {}
    for at, reason in bench.event_writes:
        reasons.setdefault(reason, []).append(at)
    return {
        "recovered_s": round(recovered_s, 2),
        "writes_per_s_max": _most_within(bench.writes, 1.0),
        "events_per_reason_per_10s_max": max((_most_within(ts, 10.0) for ts in reasons.values()), default=0),
        "event_writes": {r: len(ts) for r, ts in sorted(reasons.items())},
        "requests": dict(sorted((bench.runtime_calls() - requests_before).items())),
        "backoff_count": bench.status(bench.jobs[0]).get("backoffCount"),
    }


def versions() -> dict[str, str]:
    """What the figures were measured with: Python and the libraries on the runtime's path."""
    from versions import versions as measured_with

    return measured_with(("flatjob", "kubernetes", "urllib3", "orjson", "PyYAML"))


def measure(names: list[str], pods: int, runtime: str, args: argparse.Namespace, failing: set[str], hung: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    """Start the runtimes, wait for every pod to run, change pods one at a time, stay idle."""
    manifests = compile_jobs(names, pods, runtime)
    with tempfile.TemporaryDirectory() as tmp:
        concurrency = ("--concurrency", str(args.concurrency)) if getattr(args, "concurrency", None) else ()
        bench = Bench(manifests, Path(tmp), runtime, failing | hung, hung, getattr(args, "hang", 0.0), concurrency, getattr(args, "fail_late", False))
        failing = failing | hung
        try:
            n = len(bench.pods)
            healthy = [j for j in bench.jobs if j not in failing]
            out: dict[str, Any] = {"jobs": len(bench.jobs), "pods": n, "runtime": runtime, "runtime_processes": len(bench.runtimes),
                                   **({"healthy_jobs": len(healthy), "failing_jobs": len(failing - hung)} if failing - hung else {})}
            out["startup_s"] = bench.until(lambda: bench.running() >= n - len(bench.crashing), 1800, "every pod Running in the status")
            if hung:
                bench.hanging = True
                out.update(hung_jobs=len(hung), hang_s=args.hang)
            bench.quiet(busy=failing)
            if args.mass_failure:
                out.update(mass_failure(bench))
                bench.sample()
                out.update(rss_peak_mib=round(max(r.peak_kib for r in bench.runtimes) / 1024, 1), versions=versions())
                return out
            latencies, per_event = [], []
            bench.start_failing()
            crash_writes, restarts = len(bench.failing_writes), {j: bench.status(j).get("backoffCount", 0) for j in failing - hung}
            for i in range(args.changes):
                job = healthy[i] if len(healthy) > 1 else healthy[0]
                pod = f"{job}-worker-{0 if len(healthy) > 1 else i}"
                before = bench.runtime_calls()
                latencies.append(bench.change(job, pod, 0, "Succeeded", 1 if len(healthy) > 1 else i + 1))
                bench.quiet(busy=failing)
                per_event.append(sum((bench.runtime_calls() - before).values()))
            before, lease_before, all_before = bench.runtime_calls(), bench.runtime_calls(lease=True), bench.runtime_calls(lease=None)
            end = time.perf_counter() + args.idle
            while time.perf_counter() < end:
                bench.sample()
                time.sleep(0.05)
            idle = bench.runtime_calls() - before
            lease = bench.runtime_calls(lease=True) - lease_before
            everything = bench.runtime_calls(lease=None) - all_before
            metrics = bench.metrics()
            bench.sample()
            out.update(
                rss_peak_mib=round(max(r.peak_kib for r in bench.runtimes) / 1024, 1),
                rss_peak_mib_total=round(sum(r.peak_kib for r in bench.runtimes) / 1024, 1),
                status_latency_p50_s=round(statistics.median(latencies), 4),
                status_latency_max_s=round(max(latencies), 4),
                status_writes_per_cycle_max=int(metrics.get("flatjob_cycle_status_writes_max", 0)),
                api_calls_per_pod_event_max=max(per_event),
                idle_calls=sum(idle.values()),
                idle_lease_requests_per_s=round(sum(lease.values()) / args.idle, 2),
                idle_requests_per_s=round(sum(everything.values()) / args.idle, 2),
                watches_open_max=bench.watches_max,
                memory_requested_mib=bench.requested_mib,
                status_bytes_max=bench.status_bytes_max,
                reconcile_cycles=int(metrics.get("flatjob_reconcile_seconds_count", 0)),
                api_errors=int(sum(v for k, v in metrics.items() if k.startswith("flatjob_api_errors_total"))),
                **({"hung_writes": bench.hung_writes, "changes_beside_a_hung_request": bench.beside_hung} if hung else {}),
                **({"failing_writes_during_changes": len(bench.failing_writes) - crash_writes, "changes_beside_a_failing_write": bench.beside_crash,
                    "failing_restarts_during_changes": sum(bench.status(j).get("backoffCount", 0) - c for j, c in restarts.items()),
                    "status_latency_beside_failing_max_s": round(max(bench.beside_crash_latencies, default=0.0), 4)} if failing - hung else {}),
                versions=versions(),
            )
            return out
        finally:
            bench.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.jobs == 1:
        return measure(job_names(1), args.pods, args.runtime, args, set())
    names = job_names(args.jobs)
    failing = set(names[-args.failing:]) if args.failing else set()
    hung = set(names[-(args.failing + args.hung):len(names) - args.failing]) if args.hung else set()
    out = measure(names, args.pods_per_job, args.runtime, args, failing, hung)
    if args.runtime == "namespace" and args.per_job_sample:
        sample = names[: args.per_job_sample]
        part = measure(sample, args.pods_per_job, "job", argparse.Namespace(**{**vars(args), "changes": min(args.changes, len(sample))}), set())
        scale = args.jobs / len(sample)
        out["per_job"] = {
            "measured_on_jobs": len(sample),
            "runtime_processes": args.jobs,
            "rss_mib_total": round(part["rss_peak_mib_total"] * scale),
            "watches_open_max": round(part["watches_open_max"] * scale),
            "idle_requests_per_s": round(part["idle_requests_per_s"] * scale, 1),
            "memory_requested_mib_total": round(part["memory_requested_mib"] * scale),
            "status_latency_max_s": part["status_latency_max_s"],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000, help="pods of the one job (without --jobs)")
    parser.add_argument("--jobs", type=int, default=1, help="jobs in the namespace")
    parser.add_argument("--pods-per-job", type=int, default=4)
    parser.add_argument("--failing", type=int, default=0, help="how many of the jobs crash-loop")
    parser.add_argument("--fail-late", action="store_true", help="the --failing jobs start crash-looping when the changes begin (their back-off at its shortest meanwhile)")
    parser.add_argument("--hung", type=int, default=0, help="how many more jobs crash-loop behind writes that wait --hang seconds")
    parser.add_argument("--hang", type=float, default=10.0, help="seconds each write to a hung job's status or pods waits")
    parser.add_argument("--concurrency", type=int, default=None, help="the namespace runtime's --concurrency (default: its own)")
    parser.add_argument("--runtime", choices=("namespace", "job"), default="namespace", help="one runtime for the namespace, or one per job")
    parser.add_argument("--per-job-sample", type=int, default=10, help="with --jobs: per-job runtimes measured to give the per_job totals (0: none)")
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of nothing changing (two Lease renewals at least)")
    parser.add_argument("--mass-failure", action="store_true", help="every pod fails at once; measure the recovery")
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
