"""DeepSpeedJob end to end under run-local with the real tools: one sshd per pod on its
loopback address, the key Secret in the kubelet's projected layout (StrictModes would refuse
it, so the rendered StrictModes=no is what lets every login in), real pdsh and deepspeed, gloo.

- examples/local/deepspeed-cpu.yaml: every rank prints its all-reduce line;
- (2 pods x 1 rank from here on, to keep it quick; the example runs 2 x 2)
- a rank SIGKILLed in attempt 1 restarts the group (ExitCode); in attempt 2 every rank has
  FLATJOB_ATTEMPT=2, a hostile env value byte for byte and its own pod's downward-API values;
- pdsh killed inside worker-0 fails the job (deepspeed itself exits 0 then);
- SIGTERM to worker-0's launch.sh (as a pod deletion sends it) ends that pod with 143.
No process of a run outlives it: E2E_TAG (tests/e2e/conftest.py), and sshd by its command line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .kit import SCRIPTS, command, free_port, run_local, write_job
from .sshkit import (
    HOSTILE,
    addresses,
    check_example,
    environment,
    find,
    need,
    pod_env,
    results,
    run_example,
    spec_patch,
    sshd_left,
)

pytestmark = pytest.mark.e2e



@pytest.fixture(autouse=True)
def _tools() -> None:
    need("DeepSpeedJob")


def job(name: str, out: Path, *, slots: int, policy: str, env: str = "") -> str:
    return f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata:
          name: {name}
        spec:
          runPolicy:
            backoffLimit: 1
          config:
            slotsPerWorker: {slots}
            otherArgs: [--master_port={free_port()}]
            run:
              python: [{SCRIPTS / 'ranks.py'}]
          worker:
            replicas: 2
            restartPolicy: {policy}
            template:
              spec:
                terminationGracePeriodSeconds: 5
                containers:
                  - name: worker
                    image: deepspeed/deepspeed:v072_torch112_cu117
                    env:{pod_env(out, 22)}{env}
        """


def test_the_example_prints_every_ranks_all_reduce(tmp_path: Path, tag: str) -> None:
    check_example(tmp_path, tag, "deepspeed-cpu", "{{config: {{otherArgs: [--master_port={port}]}}}}")


def test_keys_mounted_outside_home_ssh_still_reach_the_ssh_clients(tmp_path: Path, tag: str) -> None:
    """ssh.authMountPath elsewhere than ~/.ssh: the launch links the keys where the clients look
    (it failed, "not reachable via ssh")."""
    check_example(tmp_path, tag, "deepspeed-cpu", "{{config: {{otherArgs: [--master_port={port}]}}, ssh: {{authMountPath: /etc/flatjob-keys}}}}")


def test_keys_mounted_elsewhere_reach_pdsh_whatever_home_the_container_sets(tmp_path: Path, tag: str) -> None:
    """A container env HOME=/workspace beside a custom authMountPath: the keys were linked into
    $HOME/.ssh only, but OpenSSH (pdsh's, and deepspeed's ssh check) reads the passwd entry's
    home, so the launch failed "not reachable via ssh" (issue 20).  Here that HOME is a folder
    of this machine's, so it is given with --env (run-local refuses the job's own)."""
    home = tmp_path / "workspace"  # not there yet: the link step makes it, as root would in a pod
    worker = {"template": {"spec": {"containers": [{"name": "worker", "env": [{"name": "HOME", "value": "/workspace"}]}]}}}
    check_example(tmp_path, tag, "deepspeed-cpu", spec_patch({"config": {"otherArgs": ["--master_port={port}"]}, "ssh": {"authMountPath": "/etc/flatjob-keys"}, "worker": worker}), "--env", f"HOME={home}")
    assert sorted(p.name for p in (home / ".ssh").iterdir()) == ["config", "id_ed25519", "id_ed25519.pub"]  # where fabric and paramiko look


def test_a_home_that_cannot_hold_the_keys_fails_the_job_saying_why(tmp_path: Path, tag: str) -> None:
    """HOME under a file (no folder can be made there, even by root): every pod stops at once
    naming the folder, and the job fails; no pod waits out the peer timeout."""
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    home = tmp_path / "a-file" / "home"
    worker = {"restartPolicy": "Never"}
    done, why = run_example(tmp_path, tag, "deepspeed-cpu", spec_patch({"ssh": {"authMountPath": "/etc/flatjob-keys"}, "worker": worker}), "--env", f"HOME={home}")
    assert done.returncode != 0, why
    assert f"flatjob: cannot create {home}/.ssh" in done.stdout + done.stderr, why
    assert not sshd_left(tmp_path)


def test_a_home_only_the_jobs_env_sets_is_refused_before_anything_starts(tmp_path: Path, tag: str) -> None:
    """The job's HOME=/etc beside a custom authMountPath would have made this machine's
    /etc/.ssh and linked the keys there: run-local refuses it (exit 2), and nothing is made."""
    before = os.path.lexists("/etc/.ssh")
    worker = {"template": {"spec": {"containers": [{"name": "worker", "env": [{"name": "HOME", "value": "/etc"}]}]}}}
    done, why = run_example(tmp_path, tag, "deepspeed-cpu", spec_patch({"ssh": {"authMountPath": "/etc/flatjob-keys"}, "worker": worker}))
    assert done.returncode == 2, why
    assert "deepspeed-cpu-worker-0/worker: HOME=/etc (the job's env): " in done.stderr and "(in a folder that holds files of its own)" in done.stderr, why
    assert "pass --env HOME=<an empty folder>, or an --overlay that removes HOME" in done.stderr, why
    assert "Traceback" not in done.stderr, why
    assert os.path.lexists("/etc/.ssh") == before
    assert not sshd_left(tmp_path)


def test_a_killed_rank_restarts_the_group_and_attempt_2_has_every_value(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    env = f"""
                      - name: HOSTILE
                        value: {json.dumps(HOSTILE)}
                      - name: E2E_KILL_RANK
                        value: "1\""""
    run = run_local(tmp_path, job("ds-restart", out, slots=1, policy="ExitCode", env=env), "--backoff-scale", "0.02",
                    tag=tag, timeout=240, env=environment(tag, tmp_path))
    assert run.code == 0, run.explain()
    assert [r["env"]["RANK"] for r in results(out, "killed-*.json")] == ["1"]
    seen = results(out, "attempt-2-rank-*.json")
    assert sorted(r["rank"] for r in seen) == [0, 1]
    assert {(r["world_size"], r["sum"]) for r in seen} == {(2, 3.0)}
    for r in seen:
        assert r["env"]["HOSTILE"] == HOSTILE  # through the pod's kept env, byte for byte
        assert r["env"]["FLATJOB_ATTEMPT"] == "2"  # the resume contract reaches every rank
    # Downward-API values stay per pod: rank 0 runs in worker-0, rank 1 in worker-1.
    where = addresses(run.stderr)
    for r in seen:
        pod = f"ds-restart-worker-{r['rank']}"
        assert (r["env"]["POD_NAME"], r["env"]["POD_IP"], r["env"]["HOSTNAME"]) == (pod, where[pod], pod)
    assert "Restarting" in run.stderr or "restart" in run.stderr.lower()
    assert "SecretCreated: generated an ed25519 key pair in Secret ds-restart-ssh" in run.stderr  # the keys every pod mounted
    assert not sshd_left(tmp_path)


def start(tmp_path: Path, tag: str, name: str) -> tuple[subprocess.Popen[str], Path]:
    """A job whose ranks sleep (no torch), one per pod, restartPolicy Never."""
    out = tmp_path / "out"
    out.mkdir()
    env = """
                      - name: E2E_SLEEP
                        value: "1\""""
    path = write_job(tmp_path, job(name, out, slots=1, policy="Never", env=env))
    proc = subprocess.Popen(command(path, "--timeout", "240"), env=environment(tag, tmp_path), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while len(list(out.glob("sleeping-*"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    return proc, out


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_pdsh_killed_inside_worker_0_is_not_a_success(tmp_path: Path, tag: str) -> None:
    proc, _ = start(tmp_path, tag, "ds-pdsh")
    pdsh = find(tag, lambda pid, comm, cmdline: comm.startswith("pdsh") and b"deepspeed.launcher.launch" in cmdline)
    os.kill(pdsh, signal.SIGKILL)
    _, stderr = finish(proc)
    assert proc.returncode == 1, stderr[-3000:]
    assert "ds-pdsh-worker-0 failed with exit code 137" in stderr
    assert not sshd_left(tmp_path)


def test_sigterm_to_the_launching_pod_ends_it_with_143(tmp_path: Path, tag: str) -> None:
    proc, _ = start(tmp_path, tag, "ds-term")
    launch = find(tag, lambda pid, comm, cmdline: cmdline.startswith(b"/bin/sh\0") and cmdline.endswith(b"/launch.sh\0"))
    os.kill(launch, signal.SIGTERM)
    _, stderr = finish(proc)
    assert proc.returncode == 1, stderr[-3000:]
    assert "ds-term-worker-0 failed with exit code 143" in stderr
    assert not sshd_left(tmp_path)
