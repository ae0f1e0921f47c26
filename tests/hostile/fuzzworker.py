"""A long-lived child for tests/hostile/test_fuzz.py: runs entry points on one YAML text at a time.

Reads one JSON request per line on stdin ({"text": ..., "krm": ..., "overlay": ... or null}),
runs `flatjob lint`, `flatjob compile` (with --overlay when an overlay.yaml is given),
`flatjob krm`, the Argo CD plugin (OVERLAY likewise) and `flatjob run-local` (--overlay
likewise) up to the moment it would start a process (localchecks.py) in this process (as their console
entry points do, with SystemExit as the exit code), and answers one JSON line: the exit code
of each and the end of anything that looks like a crash.  The parent starts it under
resource limits (memory for the whole worker, CPU per request); a signal or a memory
error ends it, which the parent reports.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

REQUEST_CPU_SECONDS = 20  # per request (the soft limit moves on; SIGXCPU ends the worker)


def _code(exc: SystemExit) -> int:
    return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


def _run(call: Any, stdin: bytes = b"") -> tuple[int, str]:
    """Run an entry point with captured stdio: (exit code, its output)."""
    out, err = io.StringIO(), io.StringIO()
    old_in = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                call()
                code = 0
            except SystemExit as exc:
                code = _code(exc)
    finally:
        sys.stdin = old_in
    return code, out.getvalue() + err.getvalue()


def serve() -> None:
    from localchecks import checks_only

    from flatjob.compiler import cmp
    from flatjob.compiler.cli import main

    root = Path(tempfile.mkdtemp(prefix="flatjob-fuzz-"))
    jobs = root / "repo" / "jobs"
    jobs.mkdir(parents=True)
    os.chdir(root / "repo")
    for line in sys.stdin:
        request = json.loads(line)
        used = resource.getrusage(resource.RUSAGE_SELF)
        seconds = int(used.ru_utime + used.ru_stime) + REQUEST_CPU_SECONDS
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, resource.getrlimit(resource.RLIMIT_CPU)[1]))
        (jobs / "job.yaml").write_bytes(request["text"].encode("utf-8", "surrogatepass"))
        overlay = request.get("overlay")
        if overlay is not None:
            (root / "repo" / "overlay").mkdir(exist_ok=True)
            (root / "repo" / "overlay" / "overlay.yaml").write_bytes(overlay.encode("utf-8", "surrogatepass"))
        with_overlay = ["--overlay", "overlay"] if overlay is not None else []
        results = {
            "lint": _run(lambda: main(["lint", "jobs"])),
            "compile": _run(lambda args=with_overlay: main(["compile", "jobs", "-o", "rendered", *args])),
            "krm": _run(lambda: main(["krm"]), request["krm"].encode("utf-8", "surrogatepass")),
        }
        with checks_only():
            results["run-local"] = _run(lambda args=with_overlay: main(["run-local", "jobs", *args]))
        os.environ.update({"ARGOCD_ENV_SOURCES": "jobs", "ARGOCD_APP_NAMESPACE": "training"})
        if overlay is not None:
            os.environ["ARGOCD_ENV_OVERLAY"] = "overlay"
        else:
            os.environ.pop("ARGOCD_ENV_OVERLAY", None)
        results["plugin"] = _run(lambda: cmp.main([]))
        answer = {name: {"code": code, "output": output[-1500:]} for name, (code, output) in results.items()}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
