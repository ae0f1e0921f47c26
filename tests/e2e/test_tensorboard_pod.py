"""The hardened TensorBoard pod runs: real tensorboard, as the rendered securityContext says.

The rendered Deployment's container runs here with its own args, as its runAsUser/runAsGroup,
with a read-only root filesystem (a private mount namespace remounts / read-only) and its
emptyDir volumes mounted as fresh tmpfs; the test then reads the scalars back over HTTP.  A
second run without the emptyDirs shows they are needed (tensorboard writes its info file to
/tmp).  Needs root (unshare, setpriv) and a tensorboard outside /tmp, e.g.
`python3 -m venv /var/tmp/tb && /var/tmp/tb/bin/pip install tensorboard` and
FLATJOB_TENSORBOARD=/var/tmp/tb/bin/tensorboard, as .ci/run does; skipped otherwise.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from manifestkit import compiled_objects

from flatjob.compiler.render.tensorboard import MOUNT_ROOT

from .kit import free_port

TENSORBOARD = os.environ.get("FLATJOB_TENSORBOARD") or shutil.which("tensorboard")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not TENSORBOARD or str(TENSORBOARD).startswith("/tmp/"), reason="needs tensorboard outside /tmp (FLATJOB_TENSORBOARD)"),
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"), reason="needs root, unshare and setpriv"),
]

JOB = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata: {name: tb}
spec:
  tensorboardSpec:
    image: tensorflow/tensorflow:2.14.0
    logDir: {pvc: [{name: logs, subPath: [run1]}]}
  replicaSpecs:
    - type: worker
      template: {spec: {containers: [{name: python, image: p, command: [python, train.py]}]}}
"""

WRITE_EVENTS = """
import sys, time
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
w = EventFileWriter(sys.argv[1])
for step in range(3):
    v = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
    w.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[v])))
w.close()
"""


def deployment() -> dict:
    return next(o for o in compiled_objects(JOB) if o["kind"] == "Deployment" and o["metadata"]["name"] == "tb-tensorboard")


def run_pod(pod: dict, logs: Path, port: int, *, with_empty_dirs: bool) -> subprocess.Popen[str]:
    """Start the pod's container the way its securityContext and volumes say (the PVC `logs` at `logs`)."""
    spec = pod["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["automountServiceAccountToken"] is False
    user, group = spec["securityContext"]["runAsUser"], spec["securityContext"]["runAsGroup"]
    empty = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    mounts = [m["mountPath"] for m in container["volumeMounts"] if m["name"] in empty] if with_empty_dirs else []
    args = [a.replace(f"{MOUNT_ROOT}/logs", str(logs)).replace("--host=0.0.0.0", "--host=127.0.0.1").replace("--port=6006", f"--port={port}") for a in container["args"]]
    script = "mount -o remount,bind,ro / || exit 90\n"
    script += "".join(f"mount -t tmpfs -o mode=1777 tmpfs {shlex.quote(m)}\n" for m in mounts)
    script += f"exec setpriv --reuid={user} --regid={group} --clear-groups --no-new-privs env -i HOME=/ PATH=/usr/bin:/bin {shlex.quote(str(TENSORBOARD))} {shlex.join(args)}\n"
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def scalars(port: int, deadline: float) -> str | None:
    """The scalar tags tensorboard serves, once it has loaded the `loss` run (it loads in the background)."""
    body = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=2) as r:
                body = r.read().decode()
            if '"loss"' in body:
                return body
        except OSError:
            pass
        time.sleep(0.5)
    return body


def stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
    out, _ = proc.communicate(timeout=30)
    return out


@pytest.fixture
def logs() -> Path:
    # Not under /tmp: the pod's /tmp is a fresh emptyDir that would hide it.
    root = Path(tempfile.mkdtemp(prefix="flatjob-tb-", dir="/var/tmp"))
    run1 = root / "run1"
    run1.mkdir()
    python = Path(str(TENSORBOARD)).read_text().splitlines()[0].removeprefix("#!").strip()
    subprocess.run([python, "-c", WRITE_EVENTS, str(run1)], check=True, capture_output=True)
    subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
    yield root  # the PVC; the job's logDir names its sub-path run1
    shutil.rmtree(root)


def test_hardened_tensorboard_serves_the_logs(logs: Path) -> None:
    port = free_port()
    proc = run_pod(deployment(), logs, port, with_empty_dirs=True)
    try:
        tags = scalars(port, time.monotonic() + 60)
    finally:
        out = stop(proc)
    assert tags is not None and '"loss"' in tags, out


def test_without_its_tmp_emptydir_tensorboard_cannot_start(logs: Path) -> None:
    proc = run_pod(deployment(), logs, free_port(), with_empty_dirs=False)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "No usable temporary directory" in out
