"""Bench the runtime on the fake cluster with a 1000-pod job (the figures issue 6 asks for).

    python bench/runtime.py [--pods 1000] [--changes 20] [--idle 5] [--lease] [--no-restart] [--no-rss]

What runs:
- one GenericJob with N busybox replicas, compiled by flatjob (as git would hold it);
- the fake API server (runtime.fake.FakeCluster), made thread-safe with one lock, and waking
  the runtime on every write the way runtime.kube's watches set `notify`;
- the real runtime: runtime.controller.Controller driven by runtime.cli.run_loop in a thread,
  on real time (no virtual clock anywhere);
- a kubelet stand-in (runtime.kubelet.FakeKubelet) with a trivial in-process runner: every
  container "runs until changed", and the bench changes pods from the kubelet's side.  The
  ShellRunner would start N real `sh` processes, which measures fork, not the runtime.
What it measures:
- latency: wall time from a pod's phase change (kubelet side) until a status write of the
  record shows it; median and max over --changes changes made one at a time;
- status writes per reconcile cycle (at most 1), and API calls per pod event (counted);
- RSS: ru_maxrss of fresh subprocesses (imports only; fake cluster with N running pods and no
  runtime; the same plus the runtime), so the runtime's own share can be read off;
- idle: reconcile cycles and API calls during --idle seconds with nothing changing.
The fake keeps only the watch history its open watches have not read yet (the real API
server's history is not the runtime's memory); everything else is runtime.fake as is.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import weakref
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
"""


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def hwm_mib() -> float | None:
    """VmHWM: the peak RSS of this process image alone (Linux), as a cross-check of ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# --- the job ---------------------------------------------------------------------------------

def compile_job(pods: int) -> list[dict[str, Any]]:
    """The manifests git would hold: record, pods (gated) and the rest."""
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
    for obj in out:
        obj["metadata"].setdefault("namespace", NS)
    return out


# --- a thread-safe fake that wakes the runtime -------------------------------------------------

class LockedWatch:
    """A FakeWatch read under the cluster's lock."""

    def __init__(self, cluster: Any, inner: Any):
        self.cluster, self.inner = cluster, inner

    def next_events(self, timeout: float | None = None) -> list[tuple[str, Any]]:
        with self.cluster.lock:
            return self.inner.next_events(timeout)

    def close(self) -> None:
        self.inner.close()


class BenchMixin:
    """FakeCluster behind one lock; every write sets `notify`; history kept only while unread."""

    lock: Any
    log: list[Any]

    def __init__(self) -> None:
        super().__init__(time.time)  # type: ignore[call-arg]
        self.lock = threading.RLock()
        self.notify = threading.Event()
        self.watches: weakref.WeakSet[Any] = weakref.WeakSet()
        self.target: tuple[str, str] | None = None  # (pod, phase) the bench waits to see in status
        self.seen = threading.Event()
        self.seen_at = 0.0

    def _bump(self, resource: str, etype: str, obj: Any) -> None:
        super()._bump(resource, etype, obj)  # type: ignore[misc]
        self.notify.set()

    def _trim(self) -> None:
        """Forget the events every open watch has read (the runtime's memory is what we measure)."""
        cursors = [w.cursor for w in self.watches if not w.closed]
        keep_after = min(cursors) if cursors else self.rv  # type: ignore[attr-defined]
        if self.log and self.log[0][0] <= keep_after:
            self.log = [e for e in self.log if e[0] > keep_after]
            self.compacted = max(self.compacted, keep_after)  # type: ignore[has-type]

    def _locked_watch(self, watch: Any) -> LockedWatch:
        self.watches.add(watch)
        return LockedWatch(self, watch)

    def replace_record_status(self, namespace: str, plural: str, body: Any) -> Any:
        with self.lock:
            out = super().replace_record_status(namespace, plural, body)  # type: ignore[misc]
            self._trim()
        self._check_target(body.get("status") or {})
        return out

    def _check_target(self, status: dict[str, Any]) -> None:
        if self.target is None:
            return
        pod, phase = self.target
        for task in status.get("tasks") or []:
            if any(r["name"] == pod and r["phase"] == phase for r in task.get("replicas") or []):
                self.seen_at = time.perf_counter()
                self.target = None
                self.seen.set()


LOCKED = (
    "list_pods", "watch_pods", "create_pod", "patch_pod", "delete_pod", "list_records", "watch_records",
    "apply_record", "scale_record", "get_secret", "create_secret", "get_podgroup", "create_event",
    "get_lease", "create_lease", "replace_lease", "apply", "pods", "record", "set_pod_status",
)


def _locked(method: Any, name: str) -> Any:
    def call(self: Any, *args: Any, **kw: Any) -> Any:
        with self.lock:
            out = method(self, *args, **kw)
            if name.startswith("watch_"):
                return self._locked_watch(out)
            if name in ("set_pod_status", "patch_pod", "create_pod", "delete_pod"):
                self._trim()
            return out

    call.__name__ = name
    return call


def bench_cluster_class() -> type:
    """BenchMixin over runtime.fake.FakeCluster, every public call under the lock."""
    from flatjob.runtime.fake import FakeCluster

    cls = type("BenchCluster", (BenchMixin, FakeCluster), {})
    for name in LOCKED:
        setattr(cls, name, _locked(getattr(FakeCluster, name), name))
    return cls


def in_process_kubelet(cluster: Any) -> Any:
    """FakeKubelet whose containers run in-process: each runs until the bench changes it."""
    from flatjob.runtime.kubelet import FakeKubelet

    class ForeverRunner:
        def run(self, pod: Any, container: Any) -> tuple[float, int | None]:
            return float("inf"), None

    return FakeKubelet(cluster, NS, time.time, schedule_delay=0.0, runner=ForeverRunner())  # type: ignore[arg-type]


def counting_controller(cluster: Any, lease: bool) -> Any:
    from flatjob.runtime.controller import Controller

    class CountingController(Controller):
        """The real Controller; also counts status writes per reconcile cycle."""

        def __post_init__(self) -> None:
            super().__post_init__()
            self.writes_per_cycle: Counter[int] = Counter()

        def _write_status(self, record: Any, status: Any) -> bool:
            self.writes_per_cycle[self.cycles] += 1
            return super()._write_status(record, status)

    return CountingController(cluster, NS, "GenericJob", NAME, clock=time.time, use_lease=lease, identity="bench")


# --- the scenario ------------------------------------------------------------------------------------

class Bench:
    """Cluster, kubelet and (optionally) the runtime thread for one job."""

    def __init__(self, manifests: list[dict[str, Any]], runtime: bool, lease: bool = False, ungate: bool = False):
        from flatjob.compiler import keys

        self.cluster = bench_cluster_class()()
        self.kubelet = in_process_kubelet(self.cluster)
        self.pods = [o["metadata"]["name"] for o in manifests if o["kind"] == "Pod"]
        for obj in manifests:
            if obj["kind"] in ("Pod", "PodGroup") or obj["apiVersion"] == keys.RECORD_API_VERSION:
                obj = copy.deepcopy(obj)
                if ungate and obj["kind"] == "Pod":
                    obj["spec"]["schedulingGates"] = []
                self.cluster.apply(obj)
        self.controller = None
        self.stop = threading.Event()
        if runtime:
            from flatjob.runtime.cli import run_loop
            from flatjob.runtime.server import Health

            self.controller = counting_controller(self.cluster, lease)
            self.thread = threading.Thread(target=run_loop, args=(self.controller, self.stop, self.cluster.notify, Health()), daemon=True)

    def start(self) -> None:
        if self.controller is not None:
            self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.cluster.notify.set()
        if self.controller is not None:
            self.thread.join(10)

    def kubelet_tick(self) -> bool:
        with self.cluster.lock:
            return self.kubelet.tick()

    def running(self) -> int:
        with self.cluster.lock:
            return sum(1 for p in self.cluster.objects.values() if (p.get("status") or {}).get("phase") == "Running")

    def status(self) -> dict[str, Any]:
        with self.cluster.lock:
            return self.cluster.objects[("records/genericjobs", NS, NAME)].get("status") or {}

    def until(self, done: Any, limit: float, what: str) -> float:
        """Tick the kubelet until done(); returns the seconds it took."""
        start = time.perf_counter()
        while not done():
            if time.perf_counter() - start > limit:
                raise SystemExit(f"bench: {what} not reached after {limit}s")
            self.kubelet_tick()
            time.sleep(0.002)
        return time.perf_counter() - start

    def quiet(self, settle: float = 0.3, limit: float = 30.0) -> None:
        """Wait until the runtime made no API call and no cycle for `settle` seconds."""
        assert self.controller is not None
        start = time.perf_counter()
        last = (sum(self.cluster.calls.values()), self.controller.cycles, self.controller.metrics.hist_count)
        calm_since = time.perf_counter()
        while time.perf_counter() - calm_since < settle:
            if time.perf_counter() - start > limit:
                raise SystemExit("bench: the runtime never went quiet")
            self.kubelet_tick()
            time.sleep(0.01)
            now = (sum(self.cluster.calls.values()), self.controller.cycles, self.controller.metrics.hist_count)
            if now != last:
                last, calm_since = now, time.perf_counter()

    def change(self, pod: str, code: int, phase: str, limit: float = 30.0) -> float:
        """Make `pod` exit with `code` (kubelet side); seconds until a status write shows `phase`."""
        self.cluster.seen.clear()
        self.cluster.target = (pod, phase)
        with self.cluster.lock:
            t0 = time.perf_counter()
            self.kubelet.kill(pod, code)
        if not self.cluster.seen.wait(limit):
            raise SystemExit(f"bench: {pod} {phase} never reached the status")
        return self.cluster.seen_at - t0


def steady(bench: Bench, n: int) -> float:
    """Start the runtime; seconds until every pod runs and the status says so."""
    bench.start()
    took = bench.until(lambda: bench.status().get("aggregate", {}).get("running") == n, 600, "all pods running in status")
    bench.quiet()
    return took


def calls_of(before: Counter[str], after: Counter[str]) -> Counter[str]:
    return Counter({k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)})


def run(args: argparse.Namespace, manifests: list[dict[str, Any]]) -> dict[str, Any]:
    n = len([o for o in manifests if o["kind"] == "Pod"])
    bench = Bench(manifests, runtime=True, lease=args.lease)
    ctl = bench.controller
    assert ctl is not None
    out: dict[str, Any] = {"pods": n}
    before = Counter(bench.cluster.calls)
    out["startup_s"] = steady(bench, n)
    out["startup_calls"] = calls_of(before, Counter(bench.cluster.calls))
    out["startup_cycles"] = ctl.cycles

    latencies, per_event = [], []
    for i in range(args.changes):
        before = Counter(bench.cluster.calls)
        latencies.append(bench.change(bench.pods[i], 0, "Succeeded"))
        bench.quiet()
        per_event.append(calls_of(before, Counter(bench.cluster.calls)))
    out["latency_s"] = latencies
    out["calls_per_change"] = per_event

    if args.restart:
        before = Counter(bench.cluster.calls)
        victim = bench.pods[args.changes]
        t0 = time.perf_counter()
        bench.change(victim, 1, "Failed")
        bench.until(lambda: any(r["name"] == victim and r["phase"] == "Running" for r in bench.status()["tasks"][0]["replicas"]), 120, "restart")
        bench.quiet()
        out["restart_s"] = time.perf_counter() - t0
        out["restart_calls"] = calls_of(before, Counter(bench.cluster.calls))

    before_calls, before_cycles, before_reconciles = Counter(bench.cluster.calls), ctl.cycles, ctl.metrics.hist_count
    time.sleep(args.idle)
    out["idle_calls"] = calls_of(before_calls, Counter(bench.cluster.calls))
    out["idle_cycles"] = ctl.cycles - before_cycles
    out["idle_reconciles"] = ctl.metrics.hist_count - before_reconciles
    out["cycle_mean_s"] = ctl.metrics.hist_sum / max(ctl.metrics.hist_count, 1)
    out["writes_per_cycle_max"] = max(ctl.writes_per_cycle.values())
    out["status_writes"] = bench.cluster.calls["replace_record_status"]
    out["cycles"] = ctl.cycles
    bench.close()
    return out


# --- RSS in fresh processes -------------------------------------------------------------------------

IMPORTS = {
    "python": (),
    "imports": ("flatjob.runtime.cli", "flatjob.runtime.controller"),
    "imports+kubernetes": ("flatjob.runtime.cli", "flatjob.runtime.controller", "flatjob.runtime.kube"),
    "fake": ("flatjob.runtime.cli", "flatjob.runtime.controller"),
    "full": ("flatjob.runtime.cli", "flatjob.runtime.controller"),
}


def rss_child(mode: str, manifests_path: str, changes: int) -> None:
    """Runs in a fresh interpreter; prints {"maxrss_mib": ..., "hwm_mib": ...} as JSON."""
    if mode == "compile":  # not measured: writes the manifests the other children load
        Path(manifests_path).write_text(json.dumps(compile_job(changes)))
        return
    for module in IMPORTS[mode]:
        importlib.import_module(module)
    if mode in ("fake", "full"):
        manifests = json.loads(Path(manifests_path).read_text())
        n = len([o for o in manifests if o["kind"] == "Pod"])
        bench = Bench(manifests, runtime=mode == "full", ungate=mode == "fake")
        del manifests
        if mode == "fake":  # the pods run (released by hand) and change, with no runtime
            bench.until(lambda: bench.running() == n, 600, "all pods running")
            for i in range(changes):
                with bench.cluster.lock:
                    bench.kubelet.kill(bench.pods[i], 0)
        else:
            steady(bench, n)
            for i in range(changes):
                bench.change(bench.pods[i], 0, "Succeeded")
                bench.quiet()
            bench.close()
    print(json.dumps({"maxrss_mib": maxrss_mib(), "hwm_mib": hwm_mib()}))


def child(mode: str, path: str, number: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--rss-child", mode, path, "--changes", str(number)], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"bench: child {mode} failed:\n{done.stderr}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def rss(path: str, changes: int) -> dict[str, float]:
    """ru_maxrss of fresh interpreters, spawned while this process is still small: on Linux a
    child's ru_maxrss starts from its parent's RSS at fork (the kernel keeps the pre-exec
    high-water mark), so they are all started before this process loads anything big."""
    out = {}
    for mode in ("python", "imports", "imports+kubernetes", "fake", "full"):
        got = child(mode, path, changes)
        out[mode] = got["maxrss_mib"]
        out[f"{mode}-hwm"] = got.get("hwm_mib") or 0.0
    return out


# --- report --------------------------------------------------------------------------------------------

def total(c: Counter[str]) -> int:
    return sum(c.values())


def report(args: argparse.Namespace, r: dict[str, Any], mem: dict[str, float] | None) -> None:
    lat = r["latency_s"]
    per = [total(c) for c in r["calls_per_change"]]
    kinds: Counter[str] = Counter()
    for c in r["calls_per_change"]:
        kinds.update(c)
    idle_calls = total(r["idle_calls"])
    rows = [
        ("pods", f"{r['pods']}", ""),
        ("start: all pods released and Running in status", f"{r['startup_s']:.2f} s", f"{r['startup_cycles']} cycles, {total(r['startup_calls'])} API calls ({dict(sorted(r['startup_calls'].items()))})"),
        ("phase change -> status, median", f"{statistics.median(lat) * 1000:.0f} ms", f"over {len(lat)} changes (target <= 1000 ms)"),
        ("phase change -> status, max", f"{max(lat) * 1000:.0f} ms", "PASS" if max(lat) <= 1.0 else "MISSED (see profile)"),
        ("reconcile cycle, mean wall time", f"{r['cycle_mean_s'] * 1000:.0f} ms", "runtime.metrics flatjob_reconcile_seconds sum/count"),
        ("status writes per reconcile cycle, max", f"{r['writes_per_cycle_max']}", f"{r['status_writes']} writes in {r['cycles']} cycles (target <= 1)"),
        ("API calls per pod phase change, max", f"{max(per)}", f"mean {statistics.mean(per):.2f}; by call: {dict(sorted(kinds.items()))}"),
    ]
    if "restart_s" in r:
        rows.append(("API calls for one pod restart (fail -> Running)", f"{total(r['restart_calls'])}", f"{dict(sorted(r['restart_calls'].items()))}; {r['restart_s']:.1f} s incl. the 10 s back-off"))
    rows += [
        (f"idle {args.idle:g} s: reconcile cycles", f"{r['idle_cycles']}", f"reconcile() calls {r['idle_reconciles']}" + ("; lease renewals included" if args.lease else "; Lease off (--lease to include it)")),
        (f"idle {args.idle:g} s: API calls", f"{idle_calls}", f"{dict(r['idle_calls'])}" if idle_calls else ""),
    ]
    if mem:
        runtime_share = mem["full"] - mem["fake"]
        rows += [
            ("RSS: python", f"{mem['python']:.1f} MiB", "interpreter with this script's stdlib imports"),
            ("RSS: + runtime imports", f"{mem['imports']:.1f} MiB", "flatjob.runtime.controller and .cli (compiler, yaml; not pydantic, which a valid record never loads)"),
            ("RSS: + kubernetes client", f"{mem['imports+kubernetes']:.1f} MiB", "what the runtime image also imports (runtime.kube)"),
            ("RSS: fake cluster + kubelet, no runtime", f"{mem['fake']:.1f} MiB", f"{r['pods']} running pods held by the fake"),
            ("RSS: fake cluster + kubelet + runtime", f"{mem['full']:.1f} MiB", f"runtime's share {runtime_share:.1f} MiB above the fake"),
            ("RSS: cross-check (VmHWM)", f"{mem['full-hwm']:.1f} MiB", f"python {mem['python-hwm']:.1f}, imports {mem['imports-hwm']:.1f}, fake {mem['fake-hwm']:.1f}"),
            ("RSS: runtime process estimate", f"{mem['imports+kubernetes'] + runtime_share:.1f} MiB",
             "imports incl. kubernetes + runtime's share (target <= 80 MiB) " + ("PASS" if mem["imports+kubernetes"] + runtime_share <= 80 else "MISSED")),
        ]
    width = max(len(a) for a, _, _ in rows)
    print(f"flatjob runtime bench: GenericJob with {r['pods']} busybox replicas on runtime.fake; in-process kubelet runner (no sh per pod); real time")
    print(f"command: python bench/runtime.py {' '.join(sys.argv[1:])}".rstrip())
    print()
    print(f"{'measure'.ljust(width)}  {'value':>10}  notes")
    print(f"{'-' * width}  {'-' * 10}  -----")
    for a, b, c in rows:
        print(f"{a.ljust(width)}  {b:>10}  {c}")


def profile_cycle(manifests: list[dict[str, Any]], top: int) -> None:
    """Profile the reconcile cycle that one pod phase change triggers, in steady state."""
    import cProfile
    import pstats

    n = len([o for o in manifests if o["kind"] == "Pod"])
    bench = Bench(manifests, runtime=False)
    ctl = counting_controller(bench.cluster, False)
    ctl.start()
    while bench.status().get("aggregate", {}).get("running") != n:
        ctl.step()
        bench.kubelet_tick()
    ctl.step()
    bench.kubelet.kill(bench.pods[0], 0)
    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    ctl.step()
    prof.disable()
    print(f"\nprofile of one reconcile cycle after one phase change ({time.perf_counter() - started:.3f} s under cProfile):")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--lease", action="store_true", help="run with the Lease (renewals every 10 s show up as idle work)")
    parser.add_argument("--no-restart", dest="restart", action="store_false", help="skip the one-restart measurement (10 s back-off)")
    parser.add_argument("--no-rss", dest="rss", action="store_false", help="skip the RSS subprocesses")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="also print the N top functions of one cycle")
    parser.add_argument("--rss-child", nargs=2, metavar=("MODE", "MANIFESTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child[0], args.rss_child[1], args.changes)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "manifests.json")
        child("compile", path, args.pods)  # compiled in a child: this process stays small for rss()
        mem = rss(path, args.changes) if args.rss else None
        manifests = json.loads(Path(path).read_text())
    result = run(args, manifests)
    report(args, result, mem)
    if args.profile:
        profile_cycle(manifests, args.profile)


if __name__ == "__main__":
    main()
