"""Send Ctrl-C (SIGINT) to a flatjob console script at random instants and count how it ended.

Each run starts the console script as pip's wrapper does (the wrapper writes a line once the
interpreter is up, as tests/test_interrupt.py's does), waits a random 0-150 ms, sends SIGINT
and records the exit status: 130 ("interrupted"), 0 or 1 (done before the signal came), or
anything else, which is a defect (-11: a segfault, 3: an internal error) and is printed with
its stderr, as is a run whose stderr holds a traceback or "Exception ignored" (a Ctrl-C lost).  `flatjob-cmp` imports most of the compiler lazily inside its command,
so it is where a Ctrl-C meets a C extension's init (orjson: SIGSEGV in 1-2 % of runs before
compiler/console.py deferred such a Ctrl-C).  faulthandler is on, so a crash names its module.

    python bench/ctrl_c.py [--runs 300] [--script flatjob-cmp] [--seed 0]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import versions

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_interrupt as kit  # noqa: E402  (the wrapper and job the tests use)

# Besides an exit status that is none of 0, 1 and 130: a Ctrl-C printed and lost (raised in the
# import system's weakref callback: "Exception ignored"), or a traceback.
DEFECTS = (b"Exception ignored", b"Traceback")
ARGS = {"flatjob": ["compile", "job.yaml", "-o", "out"], "flatjob-cmp": [], "flatjob-ci": ["--jobs", "job.yaml"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--script", choices=sorted(ARGS), default="flatjob-cmp")
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    ends: collections.Counter[int] = collections.Counter()
    defects = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "job.yaml").write_text(kit.SLEEPER)
        path = kit.script(work, opts.script, up=True)
        env = {**os.environ, "PYTHONFAULTHANDLER": "1", "ARGOCD_APP_NAME": "app", "ARGOCD_APP_NAMESPACE": "team"}
        for _ in range(opts.runs):
            delay = rng.uniform(0.0, 0.15)
            proc = subprocess.Popen([sys.executable, str(path), *ARGS[opts.script]], cwd=work,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            assert proc.stderr is not None
            proc.stderr.readline()
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            ends[proc.returncode] += 1
            if proc.returncode not in (0, 1, 130) or any(mark in err for mark in DEFECTS):
                defects += 1
                print(f"defect: exit {proc.returncode} at {delay * 1000:.1f} ms:\n{err.decode(errors='replace')[:1500]}")
    print(f"{opts.script}, {opts.runs} Ctrl-Cs at 0-150 ms: " + ", ".join(f"exit {code}: {n}" for code, n in sorted(ends.items())))
    print(f"defects: {defects}; {versions.line(('orjson', 'PyYAML'))}")


if __name__ == "__main__":
    main()
