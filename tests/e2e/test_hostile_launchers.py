"""Values a job (or a pull request) may hold that deepspeed, pdsh and sshd would run as shell on
every node, run end to end under `flatjob run-local` with real sshd, pdsh and deepspeed
(review of round 14): DS_ENV_FILE and .deepspeed_env, flatjob's own FLATJOB_* paths, pdsh's
ssh options, a working directory whose resolved path is shell syntax.  Each job would touch a
marker file if an injected command ran; none may.  The lock file and processes that drop the
mark are in test_local_pieces.py and test_stop.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def _marker(what: str) -> Iterator[Path]:
    """A file an injected command would create (`touch`), removed afterwards."""
    marker = Path(f"/tmp/flatjob-pwned-{what}-{uuid.uuid4().hex[:8]}")
    try:
        yield marker
    finally:
        marker.unlink(missing_ok=True)


def _lint(tmp: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp / "lint.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "flatjob.compiler.cli", "lint", str(path)], capture_output=True, text=True, timeout=60)


# --- 1. DS_ENV_FILE ---------------------------------------------------------------------------


def test_ds_env_file_never_turns_an_env_value_into_node_shell_source(tmp_path: Path, tag: str) -> None:
    need("DeepSpeedJob")
    with _marker("dsenv") as marker:
        # ../env from HOME (the pod's home/ under run-local) is FLATJOB_POD_ENV; in a cluster: /run/flatjob-pod-env
        env = {"DS_ENV_FILE": "../env", "NOTE": f"$(touch {marker})"}
        run = run_local(tmp_path, _deepspeed("dsenv", tmp_path, env), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"an env value ran in the nodes' shell through DS_ENV_FILE\n{run.explain()}"


def test_a_deepspeed_env_file_in_the_folder_run_local_runs_from_never_runs_in_the_nodes_shell(tmp_path: Path, tag: str) -> None:
    """The docs say to run from the repository root; a pull request that adds `.deepspeed_env` there
    (no job field at all) has deepspeed paste its values into every node's shell."""
    need("DeepSpeedJob")
    with _marker("dsfile") as marker:
        (tmp_path / ".deepspeed_env").write_text(f"NCCL_DEBUG_FILE=$(touch {marker})\n", encoding="utf-8")
        run = run_local(tmp_path, _deepspeed("dsfile", tmp_path, {"A": "1"}), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"a .deepspeed_env value ran in the nodes' shell\n{run.explain()}"


def test_a_working_dir_that_resolves_to_shell_syntax_never_runs_in_the_nodes_shell(tmp_path: Path, tag: str) -> None:
    """Lint checks workingDir's text; deepspeed pastes `cd <os.getcwd()>`, the resolved path. A
    symlink (committed in a pull request, say) with a plain name leads to a folder named as shell."""
    need("DeepSpeedJob")
    name = f"flatjob-pwned-symwd-{uuid.uuid4().hex[:8]}"
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
    with _marker("pdshargs") as marker:
        env = {"PDSH_SSH_ARGS_APPEND": f"-oPermitLocalCommand=yes -oLocalCommand=touch\t{marker}"}
        run = run_local(tmp_path, _deepspeed("dsproxy", tmp_path, env), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"an env value ran as ssh's LocalCommand\n{run.explain()}"


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
    with _marker("forcecmd") as marker:
        wd = tmp_path / "wd"
        wd.mkdir()
        # no '/' in the value: `export -p > "$FLATJOB_POD_ENV"` must be able to create it (in workingDir);
        # sshd's session starts in root's home, one level below /.
        env = {"FLATJOB_POD_ENV": f"pe; cd; cd ..; cd tmp; touch {marker.name}"}
        run = run_local(tmp_path, _deepspeed("dsforce", tmp_path, env, wd), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"an env value ran in sshd's ForceCommand shell\n{run.explain()}"


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

# --- review of round 15: what the round-14 fixes missed -----------------------------------------

# --- 1. pdsh's DSHPATH: pasted as `PATH=<value>;` in front of every node's command ------------


def test_dshpath_never_runs_in_the_nodes_shell(tmp_path: Path, tag: str) -> None:
    """pdsh reads DSHPATH and sends `PATH=<DSHPATH>;<command>` to every node's shell. The value
    holds no $ ` " \\ so drop_unquotable keeps it; it is not in LAUNCHER_ENV, FJ346 is silent."""
    need("DeepSpeedJob")
    with _marker("dshpath") as marker:
        run = run_local(tmp_path, _deepspeed("dshpath", tmp_path, {"DSHPATH": f"/usr/bin:/bin;touch {marker}"}), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"DSHPATH ran in the nodes' shell\n{run.explain()}"


def test_lint_reports_dshpath(tmp_path: Path) -> None:
    done = _lint(tmp_path, _deepspeed("dshpath", tmp_path, {"DSHPATH": "/usr/bin;id"}))
    assert "DSHPATH" in done.stdout + done.stderr and done.returncode == 1, done.stdout + done.stderr


# --- 2. .deepspeed_env: a carriage return splits a line for Python, not for grep ------------------


def test_a_carriage_return_in_deepspeed_env_never_runs_in_the_nodes_shell(tmp_path: Path, tag: str) -> None:
    """ENV_FILES_CHECK greps lines split at \\n; deepspeed reads the file with readlines() in text
    mode (universal newlines: \\r ends a line too).  `A=1\\r;touch M;B=1` is one line with a plain
    value for grep, and two for deepspeed, the second with the key `;touch M;B`, which
    add_export pastes as `export ;touch M;B="1";` into every node's command."""
    need("DeepSpeedJob")
    with _marker("dsenvcr") as marker:
        (tmp_path / ".deepspeed_env").write_bytes(f"A=1\r;touch {marker};B=1\n".encode())
        run = run_local(tmp_path, _deepspeed("dsenvcr", tmp_path, {"A": "1"}), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"a .deepspeed_env line ran in the nodes' shell\n{run.explain()}"


# --- 3. BASH_ENV: the login shell of every ssh session expands it ---------------------------------


def test_bash_env_never_runs_on_the_nodes_ssh_sessions(tmp_path: Path, tag: str) -> None:
    """session.sh loads the pod's whole env (export -p), then execs $SHELL (root: /bin/bash) -c
    the launcher's command; bash expands BASH_ENV (command substitution included) before it runs
    it.  drop_unquotable removes the value from deepspeed's env only, not from the kept file."""
    need("DeepSpeedJob")
    with _marker("bashenv") as marker:
        run = run_local(tmp_path, _deepspeed("bashenv", tmp_path, {"BASH_ENV": f"$(touch {marker})"}), tag=tag, env=environment(tag, tmp_path), timeout=120)
        assert not marker.exists(), f"BASH_ENV ran in an ssh session's shell\n{run.explain()}"


def test_lint_reports_bash_env(tmp_path: Path) -> None:
    done = _lint(tmp_path, _deepspeed("bashenv", tmp_path, {"BASH_ENV": "$(id)"}))
    assert "BASH_ENV" in done.stdout + done.stderr and done.returncode == 1, done.stdout + done.stderr


# --- 4. run-local in-process (CliRunner) kills its caller's other children -------------------------


GENERIC = """
    apiVersion: batch.tensorstack.dev/v1beta1
    kind: GenericJob
    metadata:
      name: quick
    spec:
      replicaSpecs:
        - type: worker
          replicas: 1
          restartPolicy:
            policy: Never
          template:
            spec:
              containers:
                - name: main
                  image: busybox
                  command: [sh, -c, "exit 0"]
    """


def test_run_local_in_process_leaves_the_callers_other_children_alone(tmp_path: Path, tag: str) -> None:
    """Only `flatjob run-local`'s own process becomes a subreaper and kills what is below it at
    the end; called in-process (click's CliRunner), it left the caller a subreaper and killed
    the caller's own children (review of round 15)."""
    import ctypes

    from click.testing import CliRunner

    from flatjob.compiler.cli import cli

    job = tmp_path / "job.yaml"
    job.write_text(textwrap.dedent(GENERIC), encoding="utf-8")
    bystander = subprocess.Popen(["sleep", "300"], env={**os.environ, "E2E_TAG": tag})
    libc = ctypes.CDLL(None, use_errno=True)
    before = ctypes.c_int(0)
    libc.prctl(37, ctypes.byref(before), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    old = os.getcwd()
    try:
        os.chdir(tmp_path)
        res = CliRunner().invoke(cli, ["run-local", str(job), "--timeout", "60"])
        after = ctypes.c_int(0)
        libc.prctl(37, ctypes.byref(after), 0, 0, 0)
        time.sleep(0.2)
        assert res.exit_code == 0, res.output
        assert bystander.poll() is None, f"run-local killed its caller's own child (returncode {bystander.returncode})"
        assert after.value == before.value, "run-local left its caller a subreaper"
    finally:
        os.chdir(old)
        libc.prctl(36, before.value, 0, 0, 0)
        bystander.kill()
        bystander.wait()


# --- 5. ColossalAI: HOME from the launcher's env decides which fabric config colossalai run loads ----


def _colossalai(name: str, tmp: Path, launcher_env: dict[str, str]) -> str:
    env_yaml = "".join(f"\n                      - name: {k}\n                        value: {json.dumps(v)}" for k, v in launcher_env.items())
    script = tmp / "ok.py"
    script.write_text("print('rank ran')\n", encoding="utf-8")
    return f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata:
          name: {name}
        spec:
          torchConfig:
            procPerWorker: 1
            extraArgs: [--master_port={free_port()}]
            script: [{script}]
          replicaSpecs:
            - type: launcher
              replicas: 1
              template:
                spec:
                  terminationGracePeriodSeconds: 5
                  containers:
                    - name: launcher
                      image: hpcaitech/colossalai:0.5.0
                      env:{env_yaml}
            - type: worker
              replicas: 1
              template:
                spec:
                  terminationGracePeriodSeconds: 5
                  containers:
                    - name: worker
                      image: hpcaitech/colossalai:0.5.0
        """


def test_home_from_the_launchers_env_never_makes_colossalai_run_load_code(tmp_path: Path, tag: str) -> None:
    """fabric.Connection() loads ~/.fabric.{yaml,yml,json,py} (the .py is executed) and
    ~/.ssh/config (ProxyCommand runs a command) from $HOME. launch.sh checks ~/.deepspeed_env for
    DeepSpeed, but neither lint nor the ColossalAI launch.sh looks at HOME: a job's `HOME` (here a
    folder of the pull request) makes `colossalai run` execute what it holds."""
    need("ColossalAIJob")
    with _marker("fabricpy") as marker:
        home = tmp_path / "cfg"
        home.mkdir()
        (home / ".fabric.py").write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
        run = run_local(tmp_path, _colossalai("cfab", tmp_path, {"HOME": str(home)}), tag=tag, env=environment(tag, tmp_path), timeout=150)
        assert not marker.exists(), f"colossalai run executed the launcher's $HOME/.fabric.py\n{run.explain()}"


def test_lint_reports_home_on_a_colossalai_launcher(tmp_path: Path) -> None:
    done = _lint(tmp_path, _colossalai("cfab", tmp_path, {"HOME": "/somewhere"}))
    assert "HOME" in done.stdout + done.stderr and done.returncode == 1, done.stdout + done.stderr
