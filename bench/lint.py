"""Time `flatjob lint` over the whole T9k corpus in one fresh process (cold start).

Each run is a new interpreter: `python -m flatjob.compiler.cli lint -q <corpus>`, so the
figure includes interpreter start, every import and loading the Kubernetes schema. One
untimed run first lets Python write its bytecode cache, as `pip install` does; the
environment's PYTHONDONTWRITEBYTECODE is dropped for the same reason. Prints the median of
--runs wall times (target: <= 1.0 s on a 2-core machine) and the command.

With --kubernetes-validate PYTHON (a venv with `pip install kubernetes-validate`), the pod
templates of the same jobs are written out as Pod documents and checked with
`kubernetes-validate --strict`, the tool a user would otherwise run, for comparison.

    python bench/lint.py [--corpus DIR] [--runs 5] [--kubernetes-validate /tmp/kvenv/bin/python]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "t9k"
KUBERNETES_VERSION = "1.32.0"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    return env


def time_command(cmd: list[str], runs: int, ok: tuple[int, ...]) -> list[float]:
    """Wall seconds of `runs` fresh runs of cmd, after one untimed warm-up run."""
    env = _env()
    first = subprocess.run(cmd, env=env, capture_output=True, check=False)
    if first.returncode not in ok:
        sys.exit(f"{shlex.join(cmd)} exited {first.returncode}:\n{first.stderr.decode()[-2000:]}")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
        times.append(time.perf_counter() - start)
    return times


def report(label: str, cmd: list[str], times: list[float]) -> None:
    shown = ", ".join(f"{t:.3f}" for t in times)
    print(f"{label}: median {statistics.median(times):.3f} s (runs: {shown})")
    print(f"  command: {shlex.join(cmd)}")


def pod_documents(corpus: Path, out: Path) -> int:
    """Write every pod template of the corpus jobs as a Pod file; return how many."""
    import yaml

    count = 0
    for path in sorted(corpus.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            for i, template in enumerate(_templates(doc)):
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        **(template.get("metadata") or {}),
                        "name": f"{path.stem[:40]}-{i}",
                    },
                    "spec": template.get("spec") or {},
                }
                (out / f"{path.stem}-{i}.yaml").write_text(yaml.safe_dump(pod), encoding="utf-8")
                count += 1
    return count


def _templates(doc: Any) -> list[dict[str, Any]]:
    spec = doc.get("spec") if isinstance(doc, dict) else None
    if not isinstance(spec, dict):
        return []
    found = [r.get("template") for r in spec.get("replicaSpecs") or [] if isinstance(r, dict)]
    if isinstance(spec.get("worker"), dict):
        found.append(spec["worker"].get("template"))
    return [t for t in found if isinstance(t, dict)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--kubernetes-validate",
        metavar="PYTHON",
        default=None,
        help="python of a venv with kubernetes-validate installed",
    )
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"corpus not found: {args.corpus}")
    files = len(list(args.corpus.glob("*.yaml")))
    print(
        f"corpus: {args.corpus} ({files} files); "
        f"python {sys.version.split()[0]}; {os.cpu_count()} CPUs"
    )

    cmd = [sys.executable, "-m", "flatjob.compiler.cli", "lint", "-q", str(args.corpus)]
    report("flatjob lint", cmd, time_command(cmd, args.runs, ok=(0, 1)))
    baseline = [sys.executable, "-c", "pass"]
    report("python start-up alone", baseline, time_command(baseline, args.runs, ok=(0,)))

    if args.kubernetes_validate:
        with tempfile.TemporaryDirectory() as tmp:
            pods = pod_documents(args.corpus, Path(tmp))
            kv = [
                args.kubernetes_validate,
                "-m",
                "kubernetes_validate",
                "--strict",
                "--quiet",
                "-k",
                KUBERNETES_VERSION,
                *sorted(str(p) for p in Path(tmp).glob("*.yaml")),
            ]
            print(f"{pods} pod templates written as Pods")
            report(
                "kubernetes-validate --strict (pod templates only)",
                [*kv[:7], "<pods>"],
                time_command(kv, args.runs, ok=(0, 1)),
            )


if __name__ == "__main__":
    main()
