"""Values a job (or a pull request) may hold that deepspeed, pdsh and sshd would run as shell on
every node, run end to end under `flatjob run-local` with real sshd, pdsh and deepspeed
(review of round 14): DS_ENV_FILE and .deepspeed_env, flatjob's own FLATJOB_* paths, pdsh's
ssh options, a working directory whose resolved path is shell syntax.  Each job would touch a
marker file if an injected command ran; none may.  The lock file and processes that drop the
mark are in test_local_pieces.py and test_stop.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from .kit import free_port, run_local
from .sshkit import environment, need

pytestmark = pytest.mark.e2e


def _ok_script(tmp: Path) -> Path:
    script = tmp / "ok.py"
    script.write_text("print('rank ran')\n", encoding="utf-8")
    return script


def _deepspeed(name: str, tmp: Path, env: dict[str, str], working_dir: Path | None = None) -> str:
    env_yaml = "".join(f"\n                      - name: {k}\n                        value: {json.dumps(v)}" for k, v in env.items())
    wd = f"\n                    workingDir: {working_dir}" if working_dir else ""
    return f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata:
          name: {name}
        spec:
          runPolicy:
            backoffLimit: 0
          config:
            slotsPerWorker: 1
            otherArgs: [--master_port={free_port()}]
            run:
              python: [{_ok_script(tmp)}]
          worker:
            replicas: 1
            restartPolicy: Never
            template:
              spec:
                terminationGracePeriodSeconds: 5
                containers:
                  - name: worker
                    image: deepspeed/deepspeed:v072_torch112_cu117{wd}
                    env:{env_yaml}
        """


def _lint(tmp: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp / "lint.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "flatjob.compiler.cli", "lint", str(path)], capture_output=True, text=True, timeout=60)


# --- 1. DS_ENV_FILE ---------------------------------------------------------------------------


def test_ds_env_file_never_turns_an_env_value_into_node_shell_source(tmp_path: Path, tag: str) -> None:
    need("DeepSpeedJob")
    marker = Path(f"/tmp/rev14b-pwned-dsenv-{uuid.uuid4().hex[:8]}")
    # ../env from HOME (the pod's home/ under run-local) is FLATJOB_POD_ENV; in a cluster: /run/flatjob-pod-env
    env = {"DS_ENV_FILE": "../env", "NOTE": f"$(touch {marker})"}
    try:
        run = run_local(tmp_path, _deepspeed("dsenv", tmp_path, env), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"an env value ran in the nodes' shell through DS_ENV_FILE\n{run.explain()}"
    finally:
        marker.unlink(missing_ok=True)


def test_a_deepspeed_env_file_in_the_folder_run_local_runs_from_never_runs_in_the_nodes_shell(tmp_path: Path, tag: str) -> None:
    """The docs say to run from the repository root; a pull request that adds `.deepspeed_env` there
    (no job field at all) has deepspeed paste its values into every node's shell."""
    need("DeepSpeedJob")
    marker = Path(f"/tmp/rev14b-pwned-dsfile-{uuid.uuid4().hex[:8]}")
    (tmp_path / ".deepspeed_env").write_text(f"NCCL_DEBUG_FILE=$(touch {marker})\n", encoding="utf-8")
    try:
        run = run_local(tmp_path, _deepspeed("dsfile", tmp_path, {"A": "1"}), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"a .deepspeed_env value ran in the nodes' shell\n{run.explain()}"
    finally:
        marker.unlink(missing_ok=True)


def test_a_working_dir_that_resolves_to_shell_syntax_never_runs_in_the_nodes_shell(tmp_path: Path, tag: str) -> None:
    """Lint checks workingDir's text; deepspeed pastes `cd <os.getcwd()>`, the resolved path. A
    symlink (committed in a pull request, say) with a plain name leads to a folder named as shell."""
    need("DeepSpeedJob")
    name = f"rev14b-pwned-symwd-{uuid.uuid4().hex[:8]}"
    (tmp_path / "d").mkdir()
    (tmp_path / f"d;touch${{IFS}}{name}").mkdir()
    (tmp_path / "wd").symlink_to(f"d;touch${{IFS}}{name}")
    run = run_local(tmp_path, _deepspeed("dssym", tmp_path, {"A": "1"}, tmp_path / "wd"), tag=tag, env=environment(tag, tmp_path), timeout=120)
    assert not (tmp_path / "d" / name).exists(), f"the working folder's resolved name ran in the nodes' shell\n{run.explain()}"


@pytest.mark.parametrize("value", ["/run/flatjob-pod-env", "../env"])
def test_lint_reports_ds_env_file(tmp_path: Path, value: str) -> None:
    done = _lint(tmp_path, _deepspeed("dsenv", tmp_path, {"DS_ENV_FILE": value, "NOTE": "$(id)"}))
    assert "DS_ENV_FILE" in done.stdout + done.stderr and done.returncode == 1, done.stdout + done.stderr


# --- 2. ssh options through pdsh's environment --------------------------------------------------


def test_pdsh_ssh_args_never_run_a_local_command(tmp_path: Path, tag: str) -> None:
    need("DeepSpeedJob")
    marker = Path(f"/tmp/rev14b-pwned-pdshargs-{uuid.uuid4().hex[:8]}")
    env = {"PDSH_SSH_ARGS_APPEND": f"-oPermitLocalCommand=yes -oLocalCommand=touch\t{marker}"}
    try:
        run = run_local(tmp_path, _deepspeed("dsproxy", tmp_path, env), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"an env value ran as ssh's LocalCommand\n{run.explain()}"
    finally:
        marker.unlink(missing_ok=True)


@pytest.mark.parametrize("name,value", [
    ("PDSH_SSH_ARGS_APPEND", "-oProxyCommand={touch,/tmp/x}"),
    ("PDSH_SSH_ARGS_APPEND", "-oPermitLocalCommand=yes -oLocalCommand=id"),
    ("PDSH_SSH_ARGS", "-oProxyCommand={touch,/tmp/x} %h"),
])
def test_lint_reports_ssh_options_in_the_launchers_env(tmp_path: Path, name: str, value: str) -> None:
    done = _lint(tmp_path, _deepspeed("dsproxy", tmp_path, {name: value}))
    assert name in done.stdout + done.stderr and done.returncode == 1, done.stdout + done.stderr


# --- 3. FLATJOB_* paths from the job's env ------------------------------------------------------


def test_flatjob_pod_env_from_the_job_never_reaches_sshds_force_command(tmp_path: Path, tag: str) -> None:
    need("DeepSpeedJob")
    name = f"rev14b-pwned-forcecmd-{uuid.uuid4().hex[:8]}"
    marker = Path("/tmp") / name
    wd = tmp_path / "wd"
    wd.mkdir()
    # no '/' in the value: `export -p > "$FLATJOB_POD_ENV"` must be able to create it (in workingDir);
    # sshd's session starts in root's home, one level below /.
    env = {"FLATJOB_POD_ENV": f"pe; cd; cd ..; cd tmp; touch {name}"}
    try:
        run = run_local(tmp_path, _deepspeed("dsforce", tmp_path, env, wd), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"an env value ran in sshd's ForceCommand shell\n{run.explain()}"
    finally:
        marker.unlink(missing_ok=True)


def test_flatjob_pod_env_from_the_job_writes_nothing_outside_the_run(tmp_path: Path, tag: str) -> None:
    need("DeepSpeedJob")
    target = tmp_path / "outside" / "clobbered"
    target.parent.mkdir()
    target.write_text("precious\n", encoding="utf-8")
    run = run_local(tmp_path, _deepspeed("dsclobber", tmp_path, {"FLATJOB_POD_ENV": str(target)}), tag=tag, env=environment(tag, tmp_path), timeout=120)
    assert target.read_text(encoding="utf-8") == "precious\n", f"run-local overwrote a file outside its folders\n{run.explain()}"


@pytest.mark.parametrize("name", ["FLATJOB_POD_ENV", "FLATJOB_DIR", "FLATJOB_SSHD_CONFIG", "FLATJOB_SSH_ROOT"])
def test_lint_refuses_flatjobs_own_script_variables_in_the_env(tmp_path: Path, name: str) -> None:
    done = _lint(tmp_path, _deepspeed("dsforce", tmp_path, {name: "x; id"}))
    assert name in done.stdout + done.stderr and done.returncode == 1, done.stdout + done.stderr


def test_lint_refuses_flatjob_pod_env_on_a_colossalai_worker(tmp_path: Path) -> None:
    text = f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata:
          name: cforce
        spec:
          torchConfig:
            procPerWorker: 1
            script: [{_ok_script(tmp_path)}]
          replicaSpecs:
            - type: launcher
              replicas: 1
              template:
                spec:
                  containers:
                    - name: launcher
                      image: hpcaitech/colossalai:0.5.0
            - type: worker
              replicas: 1
              template:
                spec:
                  containers:
                    - name: worker
                      image: hpcaitech/colossalai:0.5.0
                      env:
                        - name: FLATJOB_POD_ENV
                          value: "pe; cd; cd ..; cd tmp; touch x"
        """
    done = _lint(tmp_path, text)
    assert "FLATJOB_POD_ENV" in done.stdout + done.stderr and done.returncode == 1, done.stdout + done.stderr
