"""Time `flatjob compile` from a cold start, and `kubectl kustomize` on the same output.

Synthetic PyTorchTrainingJobs of 100 torchrun workers each (env, GPU resources, a PVC and a
shared-memory volume, template labels), compiled by a fresh `flatjob` process into an empty
folder, as CI does on every commit:

  (a) 50 jobs = 5000 pods: wall time and peak RSS of the process (target <= 1.0 s, <= 300 MiB);
  (b) 500 jobs = 50 000 pods: 10x the pods must cost <= 10x the time;
  (c) 10 jobs = 1000 pods: `kubectl kustomize OUT` re-reading that output, side by side with
      flatjob compiling it (target: flatjob >= 20x faster).

Wall times are medians over --runs (fewer for the big cases, as printed); peak RSS is the
largest seen, read from the child's own rusage (os.wait4).  CPU is user+sys of the child,
useful when the machine is shared and wall time is noisy.

Python modules run from bytecode, as after `pip install` (which compiles them): the children
get PYTHONPYCACHEPREFIX inside the work folder, warmed by one untimed run, so an editable
checkout with PYTHONDONTWRITEBYTECODE=1 is not charged for compiling flatjob's source on
every start.  --no-bytecode measures that case instead.

    python bench/compile.py [--runs 5] [--big-runs 3] [--kustomize-runs 3] [--no-bytecode]
                            [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import versions

WORKERS = 100
JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: llm-{i:04d}
  namespace: team-llm
spec:
  torchrunConfig:
    enabled: true
    maxRestarts: 3
    procPerNode: gpu
  replicaSpecs:
    - type: worker
      replicas: {workers}
      restartPolicy: ExitCode
      template:
        metadata:
          labels:
            team: llm
        spec:
          containers:
            - name: python
              image: nvcr.io/nvidia/pytorch:24.05-py3
              command: [python]
              args: [-m, pretrain.main, --config, configs/7b.yaml]
              env:
                - name: NCCL_DEBUG
                  value: WARN
                - name: HF_HOME
                  value: /workspace/.cache
              resources:
                limits: {{cpu: "16", memory: 64Gi, nvidia.com/gpu: 8}}
              volumeMounts:
                - {{name: data, mountPath: /workspace}}
                - {{name: dshm, mountPath: /dev/shm}}
          volumes:
            - name: data
              persistentVolumeClaim: {{claimName: llama3-data}}
            - name: dshm
              emptyDir: {{medium: Memory, sizeLimit: 32Gi}}
"""


LOAD = (0.0, 0.0, 0.0)


@dataclass
class Run:
    """One child process: wall seconds, user+sys CPU seconds, peak RSS in MiB."""

    wall: float
    cpu: float
    rss_mib: float


def write_jobs(folder: Path, jobs: int) -> None:
    """One spec file per job."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(jobs):
        (folder / f"job-{i:04d}.yaml").write_text(
            JOB.format(i=i, workers=WORKERS), encoding="utf-8"
        )


ENV = dict(os.environ)


def run(cmd: list[str], stdout: int = subprocess.DEVNULL) -> Run:
    """Run a command to completion and measure it through its own rusage."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


FLATJOB: list[str] = []  # --flatjob: an explicit console script to measure


def flatjob_command() -> list[str]:
    """--flatjob, else the console script next to this interpreter, else `flatjob` on PATH.

    An editable install (`pip install -e .`) pays ~10 ms per start for setuptools' import
    hook; users run a regular install (`pip install .`), so measure one with --flatjob.
    """
    if FLATJOB:
        return FLATJOB
    script = Path(sys.executable).with_name("flatjob")
    return [str(script)] if script.exists() else ["flatjob"]


def compile_runs(src: Path, out: Path, runs: int) -> list[Run]:
    """Cold compiles into an empty output folder, `runs` times."""
    results = []
    for _ in range(runs):
        shutil.rmtree(out, ignore_errors=True)
        results.append(run([*flatjob_command(), "compile", str(src), "-o", str(out)]))
    return results


def median(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def row(label: str, pods: int, runs: list[Run]) -> str:
    wall, cpu = median(runs, "wall"), median(runs, "cpu")
    rss = max(r.rss_mib for r in runs)
    return f"| {label} | {pods} | {len(runs)} | {wall:.2f} s | {cpu:.2f} s | {rss:.0f} MiB |"


def output_size(out: Path) -> tuple[int, float]:
    """Files and MB written."""
    files = [p for p in out.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files) / 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs of the cheap cases (median)")
    p.add_argument("--big-runs", type=int, default=3, help="runs of the 50 000-pod case")
    p.add_argument(
        "--kustomize-runs", type=int, default=3, help="runs of kubectl kustomize (~5 s each)"
    )
    p.add_argument(
        "--workdir", type=Path, default=None, help="where specs and output go (default: a temp dir)"
    )
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--flatjob", default=None, help="the flatjob script to time (e.g. from a `pip install .` venv)")
    p.add_argument(
        "--no-bytecode", action="store_true", help="run flatjob's modules from source (no .pyc)"
    )
    args = p.parse_args()
    if args.flatjob:
        FLATJOB.append(args.flatjob)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="flatjob-bench-"))
    if args.no_bytecode:
        ENV["PYTHONDONTWRITEBYTECODE"] = "1"
        ENV.pop("PYTHONPYCACHEPREFIX", None)
    else:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    try:
        report(work, args)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def report(work: Path, args: argparse.Namespace) -> None:
    global LOAD
    LOAD = os.getloadavg()
    cases = {"1k": 10, "5k": 50, "50k": 500}
    for name, jobs in cases.items():
        write_jobs(work / f"jobs-{name}", jobs)
    fj = " ".join(flatjob_command())
    compile_runs(work / "jobs-1k", work / "warm", 1)  # warm the page cache and bytecode once
    kubectl = shutil.which("kubectl")
    small: list[Run] = []
    kust: list[Run] = []
    for i in range(max(args.runs, args.kustomize_runs if kubectl else 0)):  # side by side
        if i < args.runs:
            small += compile_runs(work / "jobs-1k", work / "out-1k", 1)
        if kubectl and i < args.kustomize_runs:
            kust.append(run([kubectl, "kustomize", str(work / "out-1k")]))
    base = compile_runs(work / "jobs-5k", work / "out-5k", args.runs)
    files, mb = output_size(work / "out-5k")
    big = compile_runs(work / "jobs-50k", work / "out-50k", args.big_runs)

    mode = (
        "from source, no .pyc"
        if args.no_bytecode
        else f"bytecode cache {ENV['PYTHONPYCACHEPREFIX']}"
    )
    print(f"flatjob {fj}; {versions.line()}; {os.cpu_count()} CPUs; {mode}")
    before, after = (" ".join(f"{x:.2f}" for x in load) for load in (LOAD, os.getloadavg()))
    print(f"load average before: {before}, after: {after}")
    per_pod = mb * 1e6 / 5000 / 1024
    print(f"5000 pods: {files} files, {mb:.1f} MB ({per_pod:.2f} KiB of YAML per pod)\n")
    print("| case | pods | runs | wall (median) | CPU user+sys (median) | peak RSS (max) |")
    print("|---|---|---|---|---|---|")
    print(row("flatjob compile, 10 jobs", 1000, small))
    print(row("flatjob compile, 50 jobs", 5000, base))
    print(row("flatjob compile, 500 jobs", 50000, big))
    if kust:
        print(row("kubectl kustomize (same 1000-pod output)", 1000, kust))
    t5, t50, rss = median(base, "wall"), median(big, "wall"), max(r.rss_mib for r in base)
    cpu_ratio = median(big, "cpu") / median(base, "cpu")
    print()
    print(
        f"(a) 5000 pods: {t5:.2f} s wall (target <= 1.0 s), peak RSS {rss:.0f} MiB (target <= 300)"
    )
    print(
        f"(b) 10x the pods: {t50 / t5:.1f}x the wall time (target <= 10x), {cpu_ratio:.1f}x the CPU"
    )
    if kust:
        wall = median(kust, "wall") / median(small, "wall")
        cpu = median(kust, "cpu") / median(small, "cpu")
        print(f"(c) kustomize/flatjob 1000 pods: {wall:.0f}x wall (target >=20x), {cpu:.0f}x CPU")
    else:
        print("(c) kubectl not found: kustomize comparison skipped")
    print("\nCommands (each compile starts from an empty output folder):")
    runs = f"--runs {args.runs} --big-runs {args.big_runs} --kustomize-runs {args.kustomize_runs}"
    print(f"  python bench/compile.py {runs}")
    prefix = (
        "PYTHONDONTWRITEBYTECODE=1 "
        if args.no_bytecode
        else f"PYTHONPYCACHEPREFIX={ENV['PYTHONPYCACHEPREFIX']} "
    )
    for name in cases:
        print(f"  {prefix}{fj} compile {work}/jobs-{name} -o {work}/out-{name}")
    print(f"  kubectl kustomize {work}/out-1k")


if __name__ == "__main__":
    main()
