"""ColossalAIJob end to end under run-local with the real tools: one sshd per worker on its
loopback address, the key Secret in the kubelet's projected layout, real `colossalai run`
(fabric/paramiko) starting torchrun on every worker, gloo.

- examples/local/colossalai-cpu.yaml: every rank prints its all-reduce line;
- (2 workers x 1 rank from here on, to keep it quick; the example runs 2 x 2)
- script arguments with spaces, `$` and quotes arrive whole; the worker template's env (a
  hostile value, downward-API values) reaches every rank with its own pod's values, and the
  launcher's plain env reaches them too; FLATJOB_ATTEMPT is the worker's own; the job names
  its own key Secret (flatjob.dev/ssh-secret), which run-local provides;
- a rank killed by SIGKILL fails the job (ColossalAI never restarts; T9k).
No process of a run outlives it: E2E_TAG (tests/e2e/conftest.py), and sshd by its command line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .kit import SCRIPTS, free_port, run_local
from .sshkit import (
    HOSTILE,
    addresses,
    check_example,
    environment,
    need,
    pod_env,
    results,
    run_example,
    spec_patch,
    sshd_left,
)

pytestmark = pytest.mark.e2e

ARGS = ["hello world", "$HOME", 'a "quoted" word', "--master_port", "1"]


@pytest.fixture(autouse=True)
def _tools() -> None:
    need("ColossalAIJob")


def job(name: str, out: Path, *, procs: int, env: str = "", args: list[str] | None = None, secret: str | None = None) -> str:
    script = json.dumps([str(SCRIPTS / "ranks.py"), *(args or [])])
    annotations = f"\n          annotations: {{flatjob.dev/ssh-secret: {secret}}}" if secret else ""
    return f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata:
          name: {name}{annotations}
        spec:
          torchConfig:
            procPerWorker: {procs}
            script: {script}
            extraArgs: [--master_port={free_port()}]
          replicaSpecs:
            - type: launcher
              replicas: 1
              template:
                spec:
                  containers:
                    - name: launcher
                      image: hpcaitech/colossalai:0.5.0
                      env:
                        - name: FROM_LAUNCHER
                          value: plain
            - type: worker
              replicas: 2
              template:
                spec:
                  terminationGracePeriodSeconds: 5
                  containers:
                    - name: worker
                      image: hpcaitech/colossalai:0.5.0
                      env:{pod_env(out, 24)}{env}
        """


def test_the_example_prints_every_ranks_all_reduce(tmp_path: Path, tag: str) -> None:
    check_example(tmp_path, tag, "colossalai-cpu", "{{torchConfig: {{extraArgs: [--master_port={port}]}}}}")


def test_keys_mounted_outside_home_ssh_still_reach_the_ssh_clients(tmp_path: Path, tag: str) -> None:
    """ssh.authMountPath elsewhere than ~/.ssh: the launch links the keys where the clients look
    (it failed, "No authentication methods available")."""
    check_example(tmp_path, tag, "colossalai-cpu", "{{torchConfig: {{extraArgs: [--master_port={port}]}}, ssh: {{authMountPath: /etc/flatjob-keys}}}}")


def test_a_worker_home_is_refused_here_and_the_overlay_named_runs_the_job(tmp_path: Path, tag: str) -> None:
    """A worker template that sets HOME has launch.sh unset HOME on the launcher, so fabric
    reads the passwd entry's home, this machine's own ~/.ssh here, without the job's key (the
    launch failed "No authentication methods available"): run-local refuses it before anything
    starts (exit 2), and the overlay it names runs the example."""
    worker = [{"type": "worker", "template": {"spec": {"containers": [{"name": "worker", "env": [{"name": "HOME", "value": "/workspace"}]}]}}}]
    patch = spec_patch({"torchConfig": {"extraArgs": ["--master_port={port}"]}, "replicaSpecs": worker})
    (tmp_path / "refused").mkdir()
    done, why = run_example(tmp_path / "refused", tag, "colossalai-cpu", patch)
    assert done.returncode == 2, why
    (named,) = re.findall(r"--overlay that removes that HOME, patches: (\[.*\])$", done.stderr, re.MULTILINE)
    assert not sshd_left(tmp_path / "refused")
    overlay = tmp_path / "no-home"
    overlay.mkdir()
    (overlay / "overlay.yaml").write_text(f"patches: {named}\n", encoding="utf-8")
    check_example(tmp_path, tag, "colossalai-cpu", patch, "--overlay", str(overlay))


def test_arguments_and_the_workers_env_arrive_whole_on_every_rank(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    env = f"""
                        - name: HOSTILE
                          value: {json.dumps(HOSTILE)}"""
    # The job names its own key Secret: run-local puts a key pair there, as the user would in a cluster.
    run = run_local(tmp_path, job("cai-env", out, procs=1, env=env, args=ARGS, secret="cai-keys"), tag=tag, timeout=240, env=environment(tag, tmp_path))
    assert run.code == 0, run.explain()
    assert "SecretCreated" not in run.stderr  # the runtime made none of its own
    seen = results(out, "attempt-1-rank-*.json")
    assert sorted(r["rank"] for r in seen) == [0, 1]
    assert {(r["world_size"], r["sum"]) for r in seen} == {(2, 3.0)}
    where = addresses(run.stderr)
    for r in seen:
        assert r["argv"] == ARGS  # colossalai joins them unquoted: flatjob quoted them
        assert r["env"]["HOSTILE"] == HOSTILE
        assert r["env"]["FROM_LAUNCHER"] == "plain"  # colossalai run exports the launcher's env
        assert r["env"]["FLATJOB_ATTEMPT"] == "1"
        pod = f"cai-env-worker-{r['rank']}"
        assert (r["env"]["POD_NAME"], r["env"]["POD_IP"], r["env"]["HOSTNAME"]) == (pod, where[pod], pod)
    assert not sshd_left(tmp_path)


def test_a_killed_rank_fails_the_job(tmp_path: Path, tag: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    env = """
                        - name: E2E_KILL_RANK
                          value: "1\""""
    run = run_local(tmp_path, job("cai-kill", out, procs=1, env=env), tag=tag, timeout=240, env=environment(tag, tmp_path))
    assert run.code == 1, run.explain()
    assert [r["env"]["RANK"] for r in results(out, "killed-*.json")] == ["1"]
    assert "cai-kill-launcher failed with exit code 1" in run.stderr
    assert not sshd_left(tmp_path)
