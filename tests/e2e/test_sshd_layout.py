"""run-local mounts the SSH key Secret the way the kubelet does, so StrictModes-class
problems show up on a laptop as they do in a cluster (kubernetes#61049).

- the layout: a 1777 folder, `..<timestamp>/` holding each item at its mode, `..data` and a
  symlink per item (runtime/local/ssh.py, from the rendered pod's projected volume);
- a real sshd with StrictModes on refuses the key there, naming that folder, exactly the
  cluster's "bad ownership or modes for directory /root/.ssh"; with the rendered
  StrictModes=no the same login works (the DeepSpeed and ColossalAI e2e tests log in there).
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from flatjob.runtime.local.ssh import claim_block, prepare

from .sshkit import need

pytestmark = pytest.mark.e2e

JOB = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata: {name: layout}
spec:
  config: {run: {python: [t.py]}}
  worker:
    replicas: 1
    template: {spec: {containers: [{name: worker, image: x}]}}
"""


def rendered_pod(tmp_path: Path) -> tuple[dict, dict[str, str]]:
    from flatjob.compiler.loader import Loaded, parse
    from flatjob.compiler.options import CompileOptions
    from flatjob.compiler.pipeline import compile_documents

    docs, _ = parse(JOB, "job.yaml")
    result = compile_documents(Loaded(jobs=docs), CompileOptions(local_addresses=True))
    files = result.jobs[0].files
    pod = next(d for d in yaml.safe_load_all(files["pods.yaml"]) if d)
    return pod, result.jobs[0].plan.files


def test_the_key_mount_is_the_kubelets_projected_layout(tmp_path: Path) -> None:
    pod, data = rendered_pod(tmp_path)
    run = prepare(tmp_path / "pods", {"metadata": {"name": "layout"}}, "layout-ssh", data, "/root/.ssh", os.environ.get("PATH", ""))
    mount = Path(run.pod("layout-worker-0", "u1", pod, "127.0.1.1").env["FLATJOB_SSH_DIR"])
    assert stat.S_IMODE(mount.stat().st_mode) == 0o1777
    data_dir = mount / os.readlink(mount / "..data")
    assert data_dir.name.startswith("..") and data_dir.is_dir()
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in data_dir.iterdir()}
    assert modes == {"id_ed25519": 0o600, "id_ed25519.pub": 0o644, "authorized_keys": 0o600, "config": 0o644}
    for name in modes:
        assert os.readlink(mount / name) == f"..data/{name}"
    assert (mount / "authorized_keys").read_text() == run.secret["authorized_keys"]


@pytest.mark.parametrize(("strict", "works"), [("yes", False), ("no", True)], ids=["strict-modes-refuses", "rendered-no-works"])
def test_sshd_strict_modes_refuses_the_layout_and_the_rendered_flag_lets_it_in(tmp_path: Path, strict: str, works: bool) -> None:
    need("ColossalAIJob")  # root, sshd, ssh
    pod, data = rendered_pod(tmp_path)
    block, lock = claim_block(1)
    try:
        ip = f"127.0.{block}.1"
        run = prepare(tmp_path / "pods", {"metadata": {"name": "layout"}}, "layout-ssh", data, "/root/.ssh", os.environ.get("PATH", ""))
        env = run.pod("layout-worker-0", "u1", pod, ip).env
        mount = env["FLATJOB_SSH_DIR"]
        os.makedirs("/run/sshd", exist_ok=True)
        log = tmp_path / "sshd.log"
        with log.open("w") as out:
            sshd = subprocess.Popen(
                ["/usr/sbin/sshd", "-D", "-e", "-p", "22", "-f", env["FLATJOB_SSHD_CONFIG"], "-o", f"StrictModes={strict}",
                 "-o", f"AuthorizedKeysFile={mount}/authorized_keys"],
                stdout=out, stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 10
            while "Server listening" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            login = subprocess.run(
                ["ssh", "-F", f"{mount}/config", "-i", f"{mount}/id_ed25519", "-o", "BatchMode=yes", ip, "echo", "in"],
                capture_output=True, text=True, timeout=30,
            )
        finally:
            sshd.terminate()
            sshd.wait(timeout=10)
    finally:
        lock.close()
    assert (login.returncode == 0 and login.stdout == "in\n") is works, (login, log.read_text())
    if not works:
        assert f"Authentication refused: bad ownership or modes for directory {mount}" in log.read_text()
