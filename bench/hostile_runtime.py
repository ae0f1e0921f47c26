"""The runtime against a tenant of its namespace: its peak memory under hostile objects.

    python bench/hostile_runtime.py [--pods 10] [--junk 100] [--junk-mib 1] [--runtime namespace|job] [--json]

The runtime runs as in a cluster (its own process, the real client over HTTP against the fake
API server, bench/runtime.py's Bench), for a job of --pods pods, and meets what anyone who may
write in its namespace can make:
- status-edit: a 38-byte edit of its record's status.runtime (`released: [x0-{0..1000000}]`),
  made once every pod runs;
- junk-templates: --junk PodTemplates of --junk-mib MiB each carrying the job's labels, made
  before the runtime starts (so its first list pages hold them) and --junk more while it runs;
- junk-pods: the same with Pods (--junk-mib MiB each, 200 KiB of it annotations: the API
  server allows 256 KiB), carrying the job's labels and a forged controller ownerReference
  to its record, so the runtime must read them;
- junk-owners: the same Pods with their bulk in their controller ownerReference's name instead
  (the API server bounds no field of an ownerReference), the uid the record's;
- junk-statuses: --status-jobs jobs (4) whose records' status.runtime someone fills with 1.3 MB of small
  objects (~31 MiB each, parsed).
- junk-specs: --status-jobs jobs whose records' specs someone fills so, under a pod template;
- dense-templates, dense-pods: the junk templates and pods again, their bulk 100 000 env items
  `{"name":"a"}` (1.3 MB of JSON, ~21 MiB parsed) instead of one string: bytes alone do not
  bound what a list page costs parsed (hx22: 178 MiB at the runtime's first list).
It reports, per case, the runtime's peak RSS (VmHWM) against the memory limit compile gives it
(compiler/render/runtime.py), and what the runtime made of it (the record's Stalled condition,
its Events, whether every pod still runs).  Before issue 21: 622 MiB for the status edit, and
152 MiB with one job stalled for 100 junk PodTemplates of 1 MB, over a 128 MiB limit.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runtime import NS, Bench, compile_jobs, versions

NAME = "big"


def compile_job(args: argparse.Namespace) -> list[dict[str, Any]]:
    return compile_jobs([NAME], args.pods, args.runtime)


def junk_template(i: int, mib: float) -> dict[str, Any]:
    from flatjob.compiler import keys

    labels = {keys.JOB_NAME: NAME}
    return {
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": f"junk-{i}", "namespace": NS, "labels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "x", "image": "busybox", "env": [{"name": "J", "value": "j" * int(mib * 1024 * 1024)}]}]}},
    }


def junk_pod(i: int, mib: float, owner: dict[str, Any] | None) -> dict[str, Any]:
    """A pod anyone who may create pods can make: the job's labels, an ownerReference to its
    record, 200 KiB of annotations (the API server allows 256 KiB) and the rest in its spec."""
    from flatjob.compiler import keys

    notes = 200 * 1024
    rest = max(0, int(mib * 1024 * 1024) - notes)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"junk-pod-{i}", "namespace": NS, "labels": {keys.JOB_NAME: NAME, keys.JOB_KIND: owner["kind"] if owner else ""},
            "annotations": {f"junk.example/{k}": "j" * (notes // 8) for k in range(8)},
            "ownerReferences": [owner] if owner else [],
        },
        "spec": {"containers": [{"name": "x", "image": "busybox", "env": [{"name": "J", "value": "j" * rest}]}]},
    }


def limit_mib(pods: int) -> int:
    from flatjob.compiler.render.runtime import runtime_resources

    return int(runtime_resources(pods)["limits"]["memory"].removesuffix("Mi"))


def peak_mib(bench: Bench) -> float:
    return round(max(r.peak_kib for r in bench.runtimes) / 1024, 1)


def conditions(bench: Bench) -> dict[str, str]:
    return {c.get("type"): f"{c.get('status')} {c.get('reason')}" for c in bench.status(NAME).get("conditions") or []}


def events(bench: Bench) -> list[str]:
    from flatjob.runtime.sim.apiserver import kinds

    return sorted({o.get("reason") for (_, _, _), o in bench.cluster.store.of(kinds.by_key("events").key, NS)})


def running(bench: Bench, n: int) -> bool:
    return (bench.status(NAME).get("aggregate") or {}).get("running") == n


def watch(bench: Bench, seconds: float) -> None:
    """Let the runtime take in what changed, sampling its memory."""
    end = time.time() + seconds
    while time.time() < end:
        bench.kubelet.tick()
        bench.sample()
        time.sleep(0.05)


def outcome(bench: Bench, n: int) -> dict[str, Any]:
    """Peak memory against the limit, whether the job still runs, and its conditions."""
    return {"rss_peak_mib": peak_mib(bench), "limit_mib": limit_mib(n), "all_running": running(bench, n), "conditions": conditions(bench)}


def case_status_edit(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    bench = Bench(compile_job(args), tmp, args.runtime)
    try:
        n = len(bench.pods)
        bench.until(lambda: running(bench, n), 300, "every pod Running")
        record = bench.cluster.record(NS, bench.plural, NAME)
        status = record["status"]
        status["runtime"] = {**status.get("runtime", {}), "released": ["x0-{0..1000000}"]}
        bench.cluster.replace_record_status(NS, bench.plural, {**record, "status": status})
        watch(bench, args.settle)
        return {"rss_peak_mib": peak_mib(bench), "limit_mib": limit_mib(n), "conditions": conditions(bench), "events": events(bench)}
    finally:
        bench.close()


def case_junk_templates(args: argparse.Namespace, tmp: Path, make: Any = junk_template) -> dict[str, Any]:
    manifests = compile_job(args)
    manifests += [make(i, args.junk_mib) for i in range(args.junk)]
    bench = Bench(manifests, tmp, args.runtime)
    try:
        n = args.pods
        bench.pods = [p for p in bench.pods if not p.startswith(("junk-", "dense-"))]
        bench.until(lambda: running(bench, n), 300, "every pod Running despite the junk")
        for i in range(args.junk, 2 * args.junk):  # and more while it runs (watch events)
            bench.cluster.apply(make(i, args.junk_mib))
            bench.sample()
        watch(bench, args.settle)
        return outcome(bench, n)
    finally:
        bench.close()


DENSE = 100_000  # env items `{"name":"a"}`: 1.3 MB of JSON that is ~20 MiB parsed


def dense_template(i: int, mib: float) -> dict[str, Any]:
    """A junk PodTemplate whose bulk is many small values, not one string."""
    t = junk_template(i, 0)
    t["metadata"]["name"] = f"dense-{i}"
    t["template"]["spec"]["containers"][0]["env"] = [{"name": "a"}] * DENSE
    return t


def dense_pod(i: int, mib: float, owner: dict[str, Any]) -> dict[str, Any]:
    pod = junk_pod(i, 0, owner)
    pod["metadata"].pop("annotations")
    pod["metadata"]["name"] = f"dense-pod-{i}"
    pod["spec"]["containers"][0]["env"] = [{"name": "a"}] * DENSE
    return pod


def case_dense_pods(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    return case_junk_pods(args, tmp, dense_pod)


def case_dense_templates(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    return case_junk_templates(args, tmp, dense_template)


def owner_pod(i: int, mib: float, owner: dict[str, Any]) -> dict[str, Any]:
    """A pod with the job's labels whose controller reference names the record by its uid, with
    --junk-mib MiB in the reference's name (cached whole before hx19)."""
    pod = junk_pod(i, 0, owner)
    pod["metadata"].pop("annotations")
    pod["metadata"]["name"] = f"junk-owner-{i}"
    pod["metadata"]["ownerReferences"] = [{**owner, "name": "n" * int(mib * 1024 * 1024)}]
    return pod


def case_junk_owners(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    return case_junk_pods(args, tmp, owner_pod)


def case_junk_pods(args: argparse.Namespace, tmp: Path, make: Any = junk_pod) -> dict[str, Any]:
    manifests = compile_job(args)
    bench = Bench(manifests, tmp, args.runtime)
    try:
        n = args.pods
        bench.until(lambda: running(bench, n), 300, "every pod Running")
        record = bench.cluster.record(NS, bench.plural, NAME)
        meta = record["metadata"]
        owner = {"apiVersion": record["apiVersion"], "kind": record["kind"], "name": meta["name"], "uid": meta["uid"], "controller": True}
        for i in range(2 * args.junk):  # while it watches: every one is a watch event it reads
            bench.cluster.apply(make(i, args.junk_mib, owner))
            bench.sample()
        watch(bench, args.settle)
        return outcome(bench, n)
    finally:
        bench.close()


def case_junk_statuses(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """--status-jobs jobs, each record's status.runtime then filled with 1.3 MB of `{"a":0}`
    (~31 MiB parsed) by someone who may update status: the namespace runtime cached them parsed
    and was OOM-killed at every start (review 24 round 4); with ten jobs it parsed several side
    by side, 136.5 MiB of 128 (issue 21 round 2). rss_before_junk_mib: its peak serving the jobs
    before the junk, so the peak less it is what the junk cost."""
    from flatjob.compiler.render.runtime import runtime_resources

    names = [f"{NAME}{i}" for i in range(args.status_jobs)]
    bench = Bench(compile_jobs(names, args.pods, args.runtime), tmp, args.runtime)
    try:
        n = len(bench.pods)
        bench.until(lambda: all((bench.status(j).get("aggregate") or {}).get("running") == args.pods for j in names), 300, "every pod Running")
        before = peak_mib(bench)  # the runtime serving these jobs, before any junk
        junk = [{"a": 0} for _ in range(170_000)]
        for job in names:
            record = bench.cluster.record(NS, bench.plural, job)
            status = record["status"]
            status["runtime"] = {**status.get("runtime", {}), "x": junk}
            bench.cluster.replace_record_status(NS, bench.plural, {**record, "status": status})
            bench.sample()
        watch(bench, args.settle)
        from flatjob.runtime.sim.apiserver import kinds

        warned = {(o.get("involvedObject") or {}).get("name") for (_, _, _), o in bench.cluster.store.of(kinds.by_key("events").key, NS) if o.get("reason") == "InvalidRecord"}
        for job in names:  # a change in each job: a cycle, whose status write keeps only the ledger
            bench.kubelet.kill(f"{job}-worker-0", 1)
        watch(bench, args.settle)
        cleaned = sum(1 for j in names if "x" not in (bench.status(j).get("runtime") or {}))
        limit = int(runtime_resources(n, jobs=args.status_jobs)["limits"]["memory"].removesuffix("Mi"))
        return {"rss_peak_mib": peak_mib(bench), "rss_before_junk_mib": before, "limit_mib": limit, "jobs": args.status_jobs, "refused_jobs": len(warned & set(names)), "cleaned_jobs": cleaned}
    finally:
        bench.close()


def case_junk_specs(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """--status-jobs jobs, each record's spec then given 1.3 MB of `{"a":0}` under its pod
    template's metadata (the CRD keeps unknown fields there: ~31 MiB parsed) by someone who may
    update records: each is a new generation, whose job view the runtime makes again, on its
    cycle threads at once (before runtime.sieve: from the spec parsed whole, ~47 MiB at its peak
    typed; ten of them took the runtime to 225.1 MiB of its 128, issue 21 round 2)."""
    from flatjob.compiler.render.runtime import runtime_resources

    names = [f"{NAME}{i}" for i in range(args.status_jobs)]
    bench = Bench(compile_jobs(names, args.pods, args.runtime), tmp, args.runtime)
    try:
        n = len(bench.pods)
        bench.until(lambda: all((bench.status(j).get("aggregate") or {}).get("running") == args.pods for j in names), 300, "every pod Running")
        before = peak_mib(bench)
        junk = [{"a": 0} for _ in range(170_000)]
        for job in names:
            record = bench.cluster.record(NS, bench.plural, job)
            record["spec"]["replicaSpecs"][0]["template"]["metadata"] = {**(record["spec"]["replicaSpecs"][0]["template"].get("metadata") or {}), "x": junk}
            bench.cluster.apply_record(NS, bench.plural, record)
            bench.sample()
        watch(bench, args.settle)  # each a new generation: a cycle on its new view, observedGeneration written
        running = sum(1 for j in names if (bench.status(j).get("aggregate") or {}).get("running") == args.pods)
        observed = sum(1 for j in names if bench.status(j).get("observedGeneration") == bench.cluster.record(NS, bench.plural, j)["metadata"]["generation"])
        limit = int(runtime_resources(n, jobs=args.status_jobs)["limits"]["memory"].removesuffix("Mi"))
        return {"rss_peak_mib": peak_mib(bench), "rss_before_junk_mib": before, "limit_mib": limit, "jobs": args.status_jobs, "running_jobs": running, "observed_jobs": observed}
    finally:
        bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--junk", type=int, default=100)
    parser.add_argument("--junk-mib", type=float, default=1.0)
    parser.add_argument("--status-jobs", type=int, default=4, help="junk-statuses, junk-specs: how many jobs whose statuses (specs) are filled")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to watch after each hostile change")
    parser.add_argument("--runtime", choices=("namespace", "job"), default="namespace", help="the namespace's runtime, or the job's own")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cases", default="status_edit,junk_templates,junk_pods,junk_owners,junk_statuses,junk_specs", help="which cases, comma-separated")
    args = parser.parse_args()
    out: dict[str, Any] = {"command": f"python bench/hostile_runtime.py {' '.join(sys.argv[1:])}".rstrip()}
    cases = (("status_edit", case_status_edit), ("junk_templates", case_junk_templates), ("junk_pods", case_junk_pods), ("junk_owners", case_junk_owners),
             ("junk_statuses", case_junk_statuses), ("junk_specs", case_junk_specs), ("dense_templates", case_dense_templates), ("dense_pods", case_dense_pods))
    for name, case in [c for c in cases if c[0] in args.cases.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                out[name] = case(args, Path(tmp))
            except SystemExit as exc:  # the bench's own give-up (a job that never ran): a finding
                out[name] = {"failed": str(exc)}
    out["versions"] = versions()
    print(json.dumps(out, indent=None if args.json else 2, sort_keys=True))


if __name__ == "__main__":
    main()
