"""Why lint refuses a launcher's workingDir and env names that are not plain shell words (FJ340).

flatjob cannot change how the launchers build each node's command, so these tests build it
with the real code, in this process, and run it with `sh` as the node would (pdsh and ssh
only carry the string): deepspeed 0.19.8's PDSHRunner (`cd <cwd>;` and `export K=V;`
unquoted) and invoke's Context, which fabric's Connection.run uses for `colossalai run`
(`cd <workdir> && export K="V" && <cmd>`, spaces escaped, nothing else).  A value lint
refuses runs a command on the node; a value lint accepts is inert and lands where it should.
Skipped without deepspeed or invoke (`.ci/run` installs both).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flatjob.compiler.validate.launchers import PLAIN_WORD, SHELL_NAME


def _sh(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=30, check=False)


def _deepspeed_remote(cwd: Path, exports: dict[str, str], flags: tuple[str, ...] = ("--master_addr=127.0.0.1",), program: tuple[str, ...] = ("train.py", "--x")) -> str:
    """The command deepspeed's pdsh runner has each node's shell run, its launcher made a no-op."""
    runner_mod = pytest.importorskip("deepspeed.launcher.multinode_runner")
    from deepspeed.launcher.runner import parse_args

    args = parse_args(["--hostfile=/dev/null", *flags, *program])
    runner = runner_mod.PDSHRunner(args, "e30=")
    for key, value in exports.items():
        runner.add_export(key, value)
    here = os.getcwd()
    os.chdir(cwd)
    try:
        cmd, _, _ = runner.get_cmd({}, {"node-0": [0]})
    finally:
        os.chdir(here)
    remote = cmd[cmd.index("-w") + 2 :]  # what pdsh sends: everything after `-w <hosts>`
    return " ".join(remote).replace(sys.executable, ":", 1)


def _colossalai_remote(workdir: str, env: dict[str, str]) -> str:
    """The command `colossalai run` has each node's shell run (fabric's cd and prefix)."""
    invoke = pytest.importorskip("invoke")
    ctx = invoke.Context()
    env_msg = " ".join(f'{k}="{v}"' for k, v in env.items())  # colossalai/cli/launcher/multinode_runner.py
    with ctx.cd(workdir), ctx.prefix(f"export {env_msg}"):
        return ctx._prefix_commands("true")


@pytest.mark.parametrize("name", ["ws;touch ran", "ws$(touch ran)", "ws`touch ran`"])
def test_deepspeed_runs_what_a_working_dir_holds(tmp_path: Path, name: str) -> None:
    assert not PLAIN_WORD.fullmatch(name)
    (tmp_path / name).mkdir()
    _sh(_deepspeed_remote(tmp_path / name, {}), tmp_path)
    assert any(p.name == "ran" for p in tmp_path.rglob("ran")), "the working directory's command did not run"


def test_deepspeed_runs_what_an_exported_env_name_holds(tmp_path: Path) -> None:
    name = "PYTHONX;touch ran;Y"
    assert not SHELL_NAME.fullmatch(name)
    _sh(_deepspeed_remote(tmp_path, {name: "1"}), tmp_path)
    assert (tmp_path / "ran").exists()


@pytest.mark.parametrize("flag", ["--master_addr={}", "--master_a={}", "--venv_script={}", "--enable_each_rank_log={}"])
def test_deepspeed_runs_what_a_pasted_flag_value_holds_and_lint_refuses_it(tmp_path: Path, flag: str) -> None:
    ran = tmp_path / "ran"
    value = f"x;touch {ran};:"
    _sh(_deepspeed_remote(tmp_path, {}, (flag.format(value),) if "master" in flag else ("--master_addr=h", flag.format(value))), tmp_path)
    assert ran.exists()
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "DeepSpeedJob", "metadata": {"name": "ds"},
        "spec": {"config": {"run": {"python": ["t.py"]}, "otherArgs": [flag.format(value)]},
                 "worker": {"replicas": 1, "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}}},
    }
    (tmp_path / "job.yaml").write_text(json.dumps(job))
    out = subprocess.run([sys.executable, "-m", "flatjob.compiler.cli", "lint", str(tmp_path / "job.yaml")], capture_output=True, text=True, check=False)
    assert out.returncode == 1 and "[FJ340]" in out.stdout and "unquoted into every node's command" in out.stdout


def _lint(tmp_path: Path, config: dict[str, object]) -> subprocess.CompletedProcess[str]:
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "DeepSpeedJob", "metadata": {"name": "ds"},
        "spec": {"config": config, "worker": {"replicas": 1, "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}}},
    }
    (tmp_path / "job.yaml").write_text(json.dumps(job))
    return subprocess.run([sys.executable, "-m", "flatjob.compiler.cli", "lint", str(tmp_path / "job.yaml")], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("program", [("train.py; touch {ran} #", "a b"), ("--master_port", "29501", "t.py;touch {ran}", "train.py")])
def test_deepspeed_runs_what_its_script_word_holds_and_lint_refuses_it(tmp_path: Path, program: tuple[str, ...]) -> None:
    """deepspeed quotes a spaced argument but never the script (get_cmd appends user_script
    raw), which is the first positional word, also one in otherArgs (review 21, round 4)."""
    ran = tmp_path / "ran"
    words = tuple(w.format(ran=ran) for w in program)
    _sh(_deepspeed_remote(tmp_path, {}, ("--master_addr=h",), words), tmp_path)
    assert ran.exists()
    config = {"run": {"python": list(words)}} if words[0] != "--master_port" else {"run": {"python": [words[-1]]}, "otherArgs": list(words[:-1])}
    out = _lint(tmp_path, config)
    assert out.returncode == 1 and "[FJ340]" in out.stdout and "deepspeed puts the script unquoted" in out.stdout


def test_deepspeed_hands_launcher_args_to_pdsh_and_lint_refuses_them(tmp_path: Path) -> None:
    """--launcher_args words go before the remote command: a plain word starts it."""
    ran = tmp_path / "ran"
    _sh(_deepspeed_remote(tmp_path, {}, ("--master_addr=h", f"--launcher_args=touch {ran};")), tmp_path)
    assert ran.exists()
    out = _lint(tmp_path, {"run": {"python": ["train.py"]}, "otherArgs": [f"--launcher_args=touch {ran};"]})
    assert out.returncode == 1 and "[FJ340]" in out.stdout and "--launcher_args into pdsh's own arguments" in out.stdout


def test_a_plain_working_dir_and_names_are_inert_with_deepspeed(tmp_path: Path) -> None:
    plain = tmp_path / "ws_1.0-a@b"
    plain.mkdir()
    assert PLAIN_WORD.fullmatch(plain.name) and SHELL_NAME.fullmatch("PYTHON_X")
    out = _sh(_deepspeed_remote(plain, {"PYTHON_X": "a b"}) + "; pwd; echo $PYTHON_X", tmp_path)
    assert out.stdout.splitlines()[-2:] == [str(plain), "a b"] and not list(tmp_path.rglob("ran"))


@pytest.mark.parametrize("workdir", ["/tmp/$(id>{ran})", "/tmp;id>{ran}"])  # invoke escapes spaces, nothing else
def test_colossalai_runs_what_a_working_dir_holds(tmp_path: Path, workdir: str) -> None:
    ran = tmp_path / "ran"
    _sh(_colossalai_remote(workdir.format(ran=ran), {}), tmp_path)
    assert ran.exists()


def test_colossalai_runs_what_an_env_name_holds(tmp_path: Path) -> None:
    _sh(_colossalai_remote(str(tmp_path), {"A;touch ran;B": "1"}), tmp_path)
    assert (tmp_path / "ran").exists()


def test_a_plain_working_dir_and_names_are_inert_with_colossalai(tmp_path: Path) -> None:
    out = _sh(_colossalai_remote(str(tmp_path), {"MY_VAR": "a b"}) + " && pwd && echo $MY_VAR", tmp_path)
    assert out.stdout.splitlines() == [str(tmp_path), "a b"]


# --- names from an envFrom ConfigMap or Secret: the cluster's, not the spec's ------------------


def test_a_name_no_shell_can_hold_fails_colossalai_runs_command(tmp_path: Path) -> None:
    # ConfigMap and Secret keys may hold `.` and `-` (the API server's IsConfigMapKey), the
    # kubelet passes them on (IsEnvVarName allows both), and colossalai run exports them all.
    out = _sh(_colossalai_remote(str(tmp_path), {"MY_VAR": "a", "log.level": "debug"}) + " && echo ran", tmp_path)
    assert out.returncode != 0 and "ran" not in out.stdout


@pytest.mark.parametrize("shell", ["/bin/sh", "bash"])  # dash leaves such names out itself; bash passes them on
def test_names_no_shell_can_hold_never_reach_colossalai_run(tmp_path: Path, shell: str) -> None:
    from scriptkit import Scripts, compile_job, stub_bin
    from test_scripts_colossalai import colossalai_job, new_shape

    bin_dir = stub_bin(tmp_path / "bin")
    s = Scripts(tmp_path / "pod", compile_job(colossalai_job(new_shape(["t.py"], []), sshd=str(bin_dir / "sshd"))).data, bin_dir)
    run = s.run(env={"log.level": "debug", "1ABC": "x", "nvidia-visible": "0", "MY_VAR": "a b"}, shell=shell)
    assert run.code == 0, run.stderr
    (call,) = run.of("colossalai")
    assert not {"log.level", "1ABC", "nvidia-visible"} & set(call.env) and call.env["MY_VAR"] == "a b"
    if shell == "bash":
        (line,) = [ln for ln in run.stderr.splitlines() if "no shell names" in ln]
        assert line.split("the names ")[1].split(" (")[0].split() == ["1ABC", "log.level", "nvidia-visible"]
    exported = {k: v for k, v in call.env.items() if k in ("MY_VAR", "log.level", "1ABC")}
    out = _sh(_colossalai_remote(str(tmp_path), exported) + " && echo $MY_VAR", tmp_path)
    assert out.stdout.splitlines() == ["a b"], out.stderr  # what every node's shell then runs
