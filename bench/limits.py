"""Time `flatjob lint` from a cold start on hostile inputs that stop at a reading limit (FJ105).

Each input is a small file that asks for far more than it holds (aliases of aliases, `<<`
merges of merges, 100 000 levels of nesting, a 5 MiB flow list, a billion replicas), next
to one valid job.  Each run is a fresh process under an address-space cap (--memory-mib),
so a limit that does not act fails the run instead of the machine.  Prints wall time, CPU
time and peak RSS per input (median and max over --runs), beside `flatjob lint` of the valid
job alone, and the command.  Target: every limit in well under a second.

    python bench/limits.py [--runs 5] [--memory-mib 1024] [--flatjob PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: ok
spec:
  replicaSpecs:
    - type: worker
      replicas: 2
      template:
        spec:
          containers:
            - name: python
              image: pytorch/pytorch:2.4.0
              command: [python, train.py]
"""


def alias_bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def merge_bomb() -> str:
    lines = ["m0: &m0 {k0: v, k1: v}"]
    lines += [f"m{i}: &m{i} {{<<: [*m{i - 1}], x{i}: *m{i - 1}, y{i}: *m{i - 1}}}" for i in range(1, 40)]
    return "\n".join(lines) + "\n"


INPUTS = {
    "valid job alone (baseline)": None,
    "alias bomb, 9 x 9 levels (460 bytes)": alias_bomb,
    "<< merge bomb, 39 levels (2 KB)": merge_bomb,
    "nesting 100 000 deep (200 KB)": lambda: "[" * 100_000 + "]" * 100_000 + "\n",
    "flow list of 5 MiB": lambda: "[" + "1," * (5 * 1024 * 1024 // 2) + "1]\n",
    "replicas: 1000000000": lambda: JOB.replace("name: ok", "name: big").replace("replicas: 2", "replicas: 1000000000"),
}


def measure(cmd: list[str], memory: int) -> tuple[float, float, float, int]:
    """(wall s, cpu s, peak RSS MiB, exit code) of one capped run."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=cap)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--memory-mib", type=int, default=1024)
    p.add_argument("--flatjob", default=None, help="the flatjob script to time (default: this interpreter's module)")
    args = p.parse_args()
    flatjob = [args.flatjob] if args.flatjob else [sys.executable, "-m", "flatjob.compiler.cli"]
    print(f"flatjob {' '.join(flatjob)}; Python {sys.version.split()[0]}; {os.cpu_count()} CPUs; cap {args.memory_mib} MiB; load {os.getloadavg()[0]:.2f}")
    print("\n| input | exit | wall (median, max) | CPU (median) | peak RSS (max) |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, make in INPUTS.items():
            folder = Path(tmp) / f"case{list(INPUTS).index(label)}"
            folder.mkdir()
            (folder / "ok.yaml").write_text(JOB)
            if make is not None:
                (folder / "hostile.yaml").write_text(make())
            cmd = [*flatjob, "lint", "-q", str(folder)]
            measure(cmd, args.memory_mib * 1024 * 1024)  # untimed: bytecode caches
            runs = [measure(cmd, args.memory_mib * 1024 * 1024) for _ in range(args.runs)]
            walls = [r[0] for r in runs]
            codes = sorted({r[3] for r in runs})
            print(f"| {label} | {','.join(map(str, codes))} | {statistics.median(walls):.2f} s, {max(walls):.2f} s | {statistics.median(r[1] for r in runs):.2f} s | {max(r[2] for r in runs):.0f} MiB |")
    print(f"\nCommand: python bench/limits.py --runs {args.runs} --memory-mib {args.memory_mib}" + (f" --flatjob {args.flatjob}" if args.flatjob else ""))


if __name__ == "__main__":
    main()
