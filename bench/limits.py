"""Time `flatjob lint` from a cold start on hostile inputs that stop at a limit (FJ105, FJ324).

Each input is a small file that asks for far more than it holds (aliases of aliases, `<<`
merges of merges, a `<<` list of 900 000 aliases, an inline `<<` mapping of 4 MiB, a million
empty documents, 100 000 levels of nesting, a 5 MiB flow list, a billion replicas), or whose
output would be gigabytes (a 1 MiB env value in 2 000 pods; a GenericJob value of 130 000
`$(rank)`; an overlay's 40 JSON patch copies, through `flatjob compile --overlay`), next to
one valid job; 30 000 empty files; a krm ResourceList of 400 one-pod jobs (linear, measured
for its speed: 4.9 s before generated items bypassed ruamel).  Each run is a fresh process under an address-space cap (--memory-mib), so a
limit that does not act fails the run instead of the machine.  Prints wall time, CPU time and
peak RSS per input (median and max over --runs), beside `flatjob lint` of the valid job
alone, and the command.  Target: every limit in under a second of CPU and 100 MiB.

    python bench/limits.py [--runs 5] [--memory-mib 1024] [--flatjob PATH]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import versions

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


def inline_merge() -> str:
    keys, used, i = [], 10, 0
    while used < 4 * 1024 * 1024 - 64:
        keys.append(f"k{i}: 1")
        used += len(keys[-1]) + 2
        i += 1
    return "b:\n  <<: {" + ", ".join(keys) + "}\n"


def env_job(value: str, replicas: int, kind: str = "PyTorchTrainingJob") -> str:
    text = JOB.replace("name: ok", "name: big").replace("replicas: 2", f"replicas: {replicas}").replace("PyTorchTrainingJob", kind)
    return text.replace("command: [python, train.py]\n", f'command: [python, train.py]\n              env: [{{name: BIG, value: "{value}"}}]\n')


def many_env(name: str, items: int) -> str:
    """A one-pod job whose container has `items` env variables (5 YAML nodes each)."""
    env = "".join(f"                - {{name: E{i}, value: v}}\n" for i in range(items))
    return JOB.replace("name: ok", f"name: {name}").replace("replicas: 2", "replicas: 1").replace("command: [python, train.py]\n", "command: [python, train.py]\n              env:\n" + env)


COPIES = "patches:\n  - target: {kind: PyTorchTrainingJob}\n    patch:\n" + "".join(f"      - {{op: copy, from: /spec, path: /spec/a{i}}}\n" for i in range(40))

MANY_PATCHES = "patches:\n" + "".join(f"  - {{target: {{kind: X{i}}}, patch: {{spec: {{}}}}}}\n" for i in range(5000))
BIG_PATCHES = {
    "overlay/overlay.yaml": "patches:\n" + "".join(f"  - {{path: p{i}.yaml, target: {{kind: PyTorchTrainingJob}}}}\n" for i in range(2)),
    **{f"overlay/p{i}.yaml": "spec:\n  x: [" + ", ".join("0" for _ in range(12_000)) + "]\n" for i in range(2)},
}


GENERIC_100 = "apiVersion: batch.tensorstack.dev/v1beta1\nkind: GenericJob\nmetadata:\n  name: g\nspec:\n  replicaSpecs:\n" + "".join(
    f"    - type: t{t}\n      replicas: 1\n      template:\n        spec:\n          containers:\n            - {{name: c, image: 'img:1'}}\n" for t in range(100))


def resource_list(n: int) -> str:
    """A KRM ResourceList of n one-pod jobs (what kustomize or kpt hands the function)."""
    one = JOB.replace("replicas: 2", "replicas: 1")
    items = "".join("- " + one.replace("name: ok", f"name: j{i}").replace("\n", "\n  ").rstrip() + "\n" for i in range(n))
    return "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n" + items


DEEPSPEED = re.sub(r"replicas: \d+", "replicas: 10000", (Path(__file__).resolve().parents[1] / "examples" / "deepspeed.yaml").read_text())
BARE_DEEPSPEED = """apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata: {{name: job{i}}}
spec:
  config: {{slotsPerWorker: 1, run: {{python: [train.py]}}}}
  worker: {{replicas: 10000, template: {{spec: {{containers: [{{name: worker, image: x}}]}}}}}}
"""


def jobs(n: int) -> dict[str, str]:
    """n more valid jobs beside ok.yaml."""
    return {f"job-{i}.yaml": JOB.replace("name: ok", f"name: job-{i}") for i in range(n)}


# label -> files beside ok.yaml (None: the valid job alone); overlay cases compile with --overlay
INPUTS = {
    "valid job alone (baseline)": None,
    "alias bomb, 9 x 9 levels (460 bytes)": lambda: {"hostile.yaml": alias_bomb()},
    "<< merge bomb, 39 levels (2 KB)": lambda: {"hostile.yaml": merge_bomb()},
    "<< list of 900 000 aliases (3.6 MB)": lambda: {"hostile.yaml": "a: &a {x: 1}\nb:\n  <<: [" + ", ".join(["*a"] * 900_000) + "]\n"},
    "inline << mapping of 4 MiB": lambda: {"hostile.yaml": inline_merge()},
    "1 000 000 empty documents (4 MB)": lambda: {"hostile.yaml": "---\n" * 1_000_000},
    "15 files of 1 000 000 empty documents": lambda: {f"empty{i:02d}.yaml": "---\n" * 1_000_000 for i in range(15)},
    "nesting 100 000 deep (200 KB)": lambda: {"hostile.yaml": "[" * 100_000 + "]" * 100_000 + "\n"},
    "flow list of 5 MiB": lambda: {"hostile.yaml": "[" + "1," * (5 * 1024 * 1024 // 2) + "1]\n"},
    "1 MB duplicate key, its alias 20 000 times as a key": lambda: {"hostile.yaml": "a:\n  ? &k " + "A" * 1_000_000 + "\n  : v\n" + "  *k : v\n" * 20_000},
    "!!bool x on a 1 MB line, its alias 20 000 times": lambda: {"hostile.yaml": "a: &a !!bool x   #" + "C" * 1_000_000 + "\nb: [" + ", ".join(["*a"] * 20_000) + "]\n"},
    "replicas: 1000000000": lambda: {"hostile.yaml": JOB.replace("name: ok", "name: big").replace("replicas: 2", "replicas: 1000000000")},
    "render: 1 MiB env value x 2 000 replicas": lambda: {"hostile.yaml": env_job("x" * 1024 * 1024, 2000)},
    "render: 900 KiB env value x 2 000 replicas": lambda: {"hostile.yaml": env_job("x" * 900 * 1024, 2000)},
    "render: GenericJob, 130 000 $(rank) x 2 000 replicas": lambda: {"hostile.yaml": env_job("$(rank)" * 130 * 1024, 2000, "GenericJob")},
    "render: 16 000-byte env value x 9 000 replicas (17 KB, 157 MB)": lambda: {"hostile.yaml": env_job("x" * 16000, 9000)},
    "render: 10 DeepSpeed jobs x 10 000 workers (13 KB)": lambda: {f"ds{i}.yaml": DEEPSPEED.replace("name: ", f"name: ds{i}-", 1) for i in range(10)},
    "render: 4 bare DeepSpeed jobs x 10 000 workers (1.1 KB)": lambda: {f"ds{i}.yaml": BARE_DEEPSPEED.format(i=i) for i in range(4)},
    "overlay: 40 JSON patch copies of /spec (compile)": lambda: {"overlay/overlay.yaml": COPIES},
    "overlay: 5 000 patches x 200 jobs (compile)": lambda: {**jobs(199), "overlay/overlay.yaml": MANY_PATCHES},
    "overlay: 2 patch files of 12 000 values x 30 jobs (compile)": lambda: {**jobs(29), **BIG_PATCHES},
    "50 000 %TAG directives (1.2 MB)": lambda: {"hostile.yaml": "".join(f"%TAG !t{i}! tag:x,2000:\n" for i in range(50_000)) + "---\n" + JOB},
    "overlay: 12 000 labels over a 100-type GenericJob (compile)": lambda: {"g.yaml": GENERIC_100, "overlay/overlay.yaml": "labels:\n" + "".join(f"  l{i}: v\n" for i in range(12_000))},
    "30 000 empty files": lambda: {f"e{i:05d}.yaml": "" for i in range(30_000)},
    "25 files of 45 000 nodes (11 MB, each under the file limit)": lambda: {f"env{i:02d}.yaml": many_env(f"env{i}", 9_000) for i in range(25)},
    "20 files of 90 000 nodes (each past the file limit)": lambda: {f"env{i:02d}.yaml": many_env(f"env{i}", 18_000) for i in range(20)},
    "krm: 400 one-pod jobs on stdin": lambda: {"krm/stdin.yaml": resource_list(400)},
}


def measure(cmd: list[str], memory: int, stdin: Path | None = None) -> tuple[float, float, float, int]:
    """(wall s, cpu s, peak RSS MiB, exit code) of one capped run."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    start = time.perf_counter()
    with stdin.open("rb") if stdin is not None else open(os.devnull, "rb") as given:
        proc = subprocess.Popen(cmd, stdin=given, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=cap)
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
    print(f"flatjob {' '.join(flatjob)}; {versions.line()}; {os.cpu_count()} CPUs; cap {args.memory_mib} MiB; load {os.getloadavg()[0]:.2f}")
    print("\n| input | exit | wall (median, max) | CPU (median) | peak RSS (max) |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, make in INPUTS.items():
            case = Path(tmp) / f"case{list(INPUTS).index(label)}"
            folder = case / "jobs"
            folder.mkdir(parents=True)
            (folder / "ok.yaml").write_text(JOB)
            overlay = stdin = None
            for name, text in (make() if make is not None else {}).items():
                path = (case if name.startswith(("overlay/", "krm/")) else folder) / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                overlay = path.parent if name.startswith("overlay/") else overlay
                stdin = path if name.startswith("krm/") else stdin
            if stdin is not None:
                cmd = [*flatjob, "krm"]
            elif overlay is not None:
                cmd = [*flatjob, "compile", str(folder), "--overlay", str(overlay), "-o", str(case / "out")]
            else:
                cmd = [*flatjob, "lint", "-q", str(folder)]
            measure(cmd, args.memory_mib * 1024 * 1024, stdin)  # untimed: bytecode caches
            runs = [measure(cmd, args.memory_mib * 1024 * 1024, stdin) for _ in range(args.runs)]
            walls = [r[0] for r in runs]
            codes = sorted({r[3] for r in runs})
            print(f"| {label} | {','.join(map(str, codes))} | {statistics.median(walls):.2f} s, {max(walls):.2f} s | {statistics.median(r[1] for r in runs):.2f} s | {max(r[2] for r in runs):.0f} MiB |")
    print(f"\nCommand: python bench/limits.py --runs {args.runs} --memory-mib {args.memory_mib}" + (f" --flatjob {args.flatjob}" if args.flatjob else ""))


if __name__ == "__main__":
    main()
