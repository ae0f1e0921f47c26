"""No user value becomes shell source, also after the kubelet's $(VAR) expansion.

The resumeSpecs wrapper runs `sh -c` around the user's argv.  The kubelet expands $(VAR) in
a container's command and args before the shell starts, so a ConfigMap value such as
`x'$(touch …)'` once became part of the script (and ran), and `it's` broke the container.
Here the rendered container is expanded as the kubelet does (runtime/kubelet.expand) and run
by the real /bin/sh, resuming and not: each argument reaches the program exactly, and
nothing runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from manifestkit import pod_of

from flatjob.compiler.loader import Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents
from flatjob.runtime.sim.kubelet import container_env, expand

HOSTILE = [
    "x'$(touch {marker})'",
    "it's",
    '"; touch {marker}; echo "',
    "`touch {marker}`",
    "$(touch {marker})",
    "$$(touch {marker})",
    "a\nb\\n $HOME ${{HOME}} * ? [ ] ~ # ; & | < > ( ) {{ }}",
    "",
]

JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: resumable
spec:
  runMode:
    pause:
      enabled: false
      resumeSpecs:
        - type: worker
          skipInitContainer: true
          command: [prog, resumed]
          args: ["$(EVIL)", --resume, it's, "$(EVIL)"]
  replicaSpecs:
    - type: worker
      replicas: 1
      template:
        spec:
          initContainers:
            - name: fetch
              image: busybox
              command: [prog, init, "$(EVIL)"]
              env: [{name: EVIL, value: {value}}]
          containers:
            - name: main
              image: python:3.11
              command: [prog, normal]
              args: ["$(EVIL)", "it's"]
              env: [{name: EVIL, value: {value}}]
"""


def pod(value: str) -> dict[str, Any]:
    docs, problems = parse(JOB.replace("{value}", json.dumps(value)), "job.yaml")
    assert problems == []
    result = compile_documents(Loaded(jobs=docs), CompileOptions())
    assert not result.failed, result.diagnostics
    (job,) = result.jobs
    return pod_of(next(d for d in yaml.safe_load_all(job.files["podtemplates.yaml"]) if d and d["kind"] == "PodTemplate"))


def run_container(manifest: dict[str, Any], container: dict[str, Any], tmp: Path, resuming: bool) -> list[str]:
    """Expand as the kubelet does, then run with the real shell; the stub prints its argv."""
    env = {k: v for k, v in container_env(manifest, container).items() if k == "EVIL"}
    argv = [expand(a, env) for a in [*container["command"], *container.get("args", [])]]
    stub = tmp / "bin" / "prog"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    stub.chmod(0o755)
    done = subprocess.run(
        argv, env={**env, "PATH": f"{stub.parent}:/usr/bin:/bin", "FLATJOB_RESUMING": "true" if resuming else "false"},
        cwd=tmp, capture_output=True, text=True, timeout=30, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout else []


@pytest.mark.parametrize("template", HOSTILE)
def test_resume_wrapper_passes_values_as_words(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "pwned"
    written = template.format(marker=marker)
    manifest = pod(written)
    main, init = manifest["spec"]["containers"][0], manifest["spec"]["initContainers"][0]
    for c in (main, init):
        assert (not written or written not in c["command"][2]) and "$(" not in c["command"][2]  # no user text in the script
    value = container_env(manifest, main)["EVIL"]  # as the kubelet sets it ($$ is $)
    assert run_container(manifest, main, tmp_path, resuming=False) == ["normal", value, "it's"]
    assert run_container(manifest, main, tmp_path, resuming=True) == ["resumed", value, "--resume", "it's", value]
    assert run_container(manifest, init, tmp_path, resuming=False) == ["init", value]
    assert run_container(manifest, init, tmp_path, resuming=True) == []  # skipped on resume
    assert not marker.exists()
    assert os.listdir(tmp_path) == ["bin"]
