"""The ColossalAI launcher's launch.sh and every worker's sshd.sh, executed against stubs.

Covers:
- `colossalai run --hostfile --nproc_per_node --master_addr --master_port
  [--extra_launch_args=...] script -- args`, exact argv, for both spec shapes; the script's
  arguments shell-quoted (colossalai joins the remote command unquoted); master_port or
  master_addr in extraArgs replace flatjob's flag;
- both shapes render the same launch script, hostfile and sshd script;
- hostile script args reach the workers' shell intact, as colossalai joins them;
- per-pod variables (HOSTNAME, FLATJOB_*), the names the worker template sets and values
  colossalai cannot quote are left out of its environment, the rest is kept; the launch runs
  in the launcher's working directory;
- exit codes: colossalai's own, 143 on SIGTERM;
- sshd.sh (both kinds): `ssh-keygen -A`, the kept environment, then exec `<sshdPath> -D -e -p 22`
  with StrictModes off, the key mount and session.sh.
The same scripts run with the real sshd and `colossalai run` in tests/e2e/test_colossalai.py.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from manifestkit import pods_of
from scriptkit import (
    HOSTILE,
    Compiled,
    Scripts,
    colossalai_job,
    compile_job,
    container,
    deepspeed_job,
    stub_bin,
)

MASTER = "--master_addr=cai-worker-0.cai"
PORT = "--master_port=29500"


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stub_bin(tmp_path_factory.mktemp("bin"))


def worker_template() -> dict[str, Any]:
    env = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    return {"spec": {"containers": [container(workingDir="/w", env=env)]}}


def old_shape(
    script: list[str], torch_args: list[str], procs: int = 4, replicas: int = 2
) -> dict[str, Any]:
    return {
        "launcher": {"workingDir": "/work"},
        "worker": {
            "replicas": replicas,
            "procPerWorker": procs,
            "command": script,
            "torchArgs": torch_args,
            "template": worker_template(),
        },
    }


def new_shape(
    script: list[str], extra: list[str], procs: int = 4, replicas: int = 2
) -> dict[str, Any]:
    launcher = {"spec": {"containers": [container("launcher", workingDir="/work")]}}
    return {
        "torchConfig": {"procPerWorker": procs, "script": script, "extraArgs": extra},
        "replicaSpecs": [
            {"type": "worker", "replicas": replicas, "template": worker_template()},
            {"type": "launcher", "replicas": 1, "template": launcher},
        ],
    }


def scripts(tmp_path: Path, bin_dir: Path, spec: dict[str, Any]) -> Scripts:
    return Scripts(
        tmp_path, compile_job(colossalai_job(spec, sshd=str(bin_dir / "sshd"))).data, bin_dir
    )


SHAPES = {"old": old_shape, "new": new_shape}
# (id, script, torchArgs/extraArgs, procPerWorker, colossalai's argv after --hostfile)
ARGV = [
    (
        "plain",
        ["train.py", "--config", "c.py"],
        [],
        4,
        ["--nproc_per_node=4", MASTER, PORT, "train.py", "--", "--config", "c.py"],
    ),
    ("one-proc", ["train.py"], [], 1, ["--nproc_per_node=1", MASTER, PORT, "train.py", "--"]),
    (
        "split-value",
        ["train.py"],
        ["--max_restarts", "3", "--monitor_interval", "5"],
        8,
        [
            "--nproc_per_node=8",
            MASTER,
            PORT,
            "--extra_launch_args=max_restarts=3,monitor_interval=5",
            "train.py",
            "--",
        ],
    ),
    (
        "joined-and-bare",
        ["train.py", "-x"],
        ["--a=1", "--b"],
        2,
        ["--nproc_per_node=2", MASTER, PORT, "--extra_launch_args=a=1,b", "train.py", "--", "-x"],
    ),
    (
        "user-master-port",
        ["train.py", "two words", "--master_port", "1"],
        ["--master_port=29400"],
        2,
        ["--nproc_per_node=2", MASTER, "--extra_launch_args=master_port=29400", "train.py", "--", "'two words'", "--master_port", "1"],
    ),
    (
        "user-master-addr",
        ["-m", "pkg.train", "--lr", "1"],
        ["--master_addr", "10.0.0.1"],
        2,
        ["--nproc_per_node=2", PORT, "--extra_launch_args=master_addr=10.0.0.1", "-m", "pkg.train", "--", "--lr", "1"],
    ),
]
ARGV_IDS = [f"{shape}-{r[0]}" for shape in SHAPES for r in ARGV]
ARGV_PARAMS = [(shape, *r[1:]) for shape in SHAPES for r in ARGV]


@pytest.mark.parametrize(
    ("shape", "script", "extra", "procs", "expected"), ARGV_PARAMS, ids=ARGV_IDS
)
def test_colossalai_run_argv(
    tmp_path: Path,
    bin_dir: Path,
    shape: str,
    script: list[str],
    extra: list[str],
    procs: int,
    expected: list[str],
) -> None:
    s = scripts(tmp_path, bin_dir, SHAPES[shape](script, extra, procs))
    assert s.hostfile.read_text() == "cai-worker-0.cai\ncai-worker-1.cai\n"
    run = s.run()
    assert run.code == 0, run.stderr
    assert [c.prog for c in run.calls] == ["python3", "python3", "colossalai"]  # the peer wait, the env names no shell can hold
    assert run.argv("colossalai") == ["run", f"--hostfile={s.hostfile}", *expected]


@pytest.mark.parametrize(
    ("script", "extra", "procs"), [r[1:4] for r in ARGV], ids=[r[0] for r in ARGV]
)
def test_both_shapes_render_the_same_scripts(
    script: list[str], extra: list[str], procs: int
) -> None:
    old = compile_job(colossalai_job(old_shape(script, extra, procs), sshd="/s/sshd")).data
    new = compile_job(colossalai_job(new_shape(script, extra, procs), sshd="/s/sshd")).data
    assert old == new


def test_hostile_script_args_reach_the_workers_shell_intact(tmp_path: Path, bin_dir: Path) -> None:
    # colossalai run joins `torchrun ... script args` with spaces, unquoted, and the worker's
    # shell runs it: the arguments are passed to colossalai shell-quoted, after `--`.
    s = scripts(tmp_path, bin_dir, new_shape(["train.py", *HOSTILE], ["--max_restarts=3"]))
    (s.cwd / "glob-bait.py").write_text("")
    run = s.run()
    assert run.code == 0, run.stderr
    argv = run.argv("colossalai")
    assert argv[:7] == ["run", f"--hostfile={s.hostfile}", "--nproc_per_node=4", MASTER, PORT, "--extra_launch_args=max_restarts=3", "train.py"]
    assert argv[7] == "--"
    joined = " ".join(["printf '%s\\0'", *argv[8:]])  # as colossalai joins them, then a shell
    out = subprocess.run(["/bin/sh", "-c", joined], cwd=s.cwd, capture_output=True, check=True).stdout
    assert out.decode().split("\0")[:-1] == HOSTILE
    assert not list(tmp_path.rglob("pwned"))


def test_per_pod_worker_and_unquotable_values_are_left_out(tmp_path: Path, bin_dir: Path) -> None:
    s = scripts(tmp_path, bin_dir, old_shape(["train.py"], []))
    env = {
        "HOSTNAME": "cai-launcher", "FLATJOB_ATTEMPT": "1", "POD_NAME": "cai-launcher",  # per pod; POD_NAME: the worker sets it
        "NCCL_DEBUG": "INFO", "QUOTE": 'say "hi"', "DOLLAR": "$HOME", "TICK": "`id`", "BACKSLASH": "a\\b",
    }
    run = s.run(env=env)
    assert run.code == 0, run.stderr
    (call,) = run.of("colossalai")
    assert not {"HOSTNAME", "FLATJOB_ATTEMPT", "POD_NAME", "QUOTE", "DOLLAR", "TICK", "BACKSLASH"} & set(call.env)
    assert call.env["NCCL_DEBUG"] == "INFO" and call.env["PATH"].startswith(str(bin_dir))
    (line,) = [ln for ln in run.stderr.splitlines() if "cannot quote" in ln]
    assert sorted(line.split("values of ")[1].split(";")[0].split()) == ["BACKSLASH", "DOLLAR", "QUOTE", "TICK"]
    assert call.cwd == str(s.cwd)  # colossalai run cds the workers into this directory


def test_launcher_pod_runs_in_the_launchers_working_directory() -> None:
    for shape in (old_shape, new_shape):
        c = compile_job(colossalai_job(shape(["t.py"], []), sshd="/s/sshd"))
        (launcher,) = c.pod("cai-launcher")["spec"]["containers"]
        assert launcher["workingDir"] == "/work"
        assert launcher["command"] == ["/bin/sh", "/flatjob/launch.sh"]


@pytest.mark.parametrize("code", [0, 1])
def test_launch_exits_with_colossalais_code(tmp_path: Path, bin_dir: Path, code: int) -> None:
    s = scripts(tmp_path, bin_dir, new_shape(["t.py"], []))
    assert s.run(env={"STUB_EXIT_COLOSSALAI": str(code)}).code == code


def test_sigterm_while_colossalai_runs(tmp_path: Path, bin_dir: Path) -> None:
    s = scripts(tmp_path, bin_dir, new_shape(["t.py"], []))
    run = s.signal_while("colossalai", signal.SIGTERM)
    assert run.code == 143
    assert run.signals("colossalai") == [signal.SIGTERM]


def test_waiter_failure_stops_the_launch(tmp_path: Path, bin_dir: Path) -> None:
    s = scripts(tmp_path, bin_dir, new_shape(["t.py"], []))
    run = s.run(env={"STUB_EXIT_PYTHON3": "1"})
    assert run.code == 1 and not run.of("colossalai")


# --- sshd.sh ---------------------------------------------------------------------------------


def sshd_scripts(kind: str, sshd: str) -> dict[str, str]:
    if kind == "deepspeed":
        return compile_job(deepspeed_job({"run": {"python": ["t.py"]}}, sshd=sshd)).data
    return compile_job(colossalai_job(new_shape(["t.py"], []), sshd=sshd)).data


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_sshd_script_generates_host_keys_then_execs_sshd(
    tmp_path: Path, bin_dir: Path, kind: str
) -> None:
    s = Scripts(tmp_path, sshd_scripts(kind, str(bin_dir / "sshd")), bin_dir)
    proc = s.start("sshd.sh")
    run = s.finish(proc)
    assert run.code == 0, run.stderr
    assert [(c.prog, c.argv) for c in run.calls] == [
        ("ssh-keygen", ["-A"]),
        ("mkdir", ["-p", "/run/sshd"]),
        ("sshd", [
            "-D", "-e", "-p", "22", "-f", str(s.sshd_config), "-o", "StrictModes=no",
            "-o", f"AuthorizedKeysFile={s.ssh_dir}/authorized_keys",
            "-o", f"ForceCommand=/bin/sh '{s.dir}/session.sh' '{s.pod_env}'",  # single-quoted for sshd's shell
        ]),
    ]
    assert run.calls[-1].pid == proc.pid  # exec: sshd replaces the script (PID 1 in the pod)
    assert s.pod_env.is_file()  # the environment kept for ssh sessions


def test_ssh_keygen_writes_under_flatjob_ssh_root_when_set(tmp_path: Path, bin_dir: Path) -> None:
    s = Scripts(tmp_path, sshd_scripts("colossalai", str(bin_dir / "sshd")), bin_dir)
    run = s.run("sshd.sh", env={"FLATJOB_SSH_ROOT": "/some root"})
    assert run.argv("ssh-keygen") == ["-A", "-f", "/some root"]


def test_sshd_script_fails_when_host_keys_cannot_be_made(tmp_path: Path, bin_dir: Path) -> None:
    s = Scripts(tmp_path, sshd_scripts("colossalai", str(bin_dir / "sshd")), bin_dir)
    run = s.run("sshd.sh", env={"STUB_EXIT_SSH_KEYGEN": "1"})
    assert run.code == 1 and not run.of("sshd")


def test_sshd_path_is_used_verbatim() -> None:
    data = sshd_scripts("deepspeed", "/opt/my ssh/sbin/sshd")
    assert "exec '/opt/my ssh/sbin/sshd' -D -e -p 22 -f " in data["sshd.sh"]


def test_a_working_directory_whose_resolved_path_is_shell_syntax_stops_the_launch(tmp_path: Path, bin_dir: Path) -> None:
    """colossalai run pastes `cd <os.path.abspath('.')>` into every worker's shell (review of round 14)."""
    s = scripts(tmp_path, bin_dir, new_shape(["t.py"], []))
    hostile = s.root / "d;touch${IFS}x"
    hostile.mkdir()
    s.cwd.rmdir()
    s.cwd.symlink_to(hostile)
    run = s.run()
    assert run.code == 1 and not run.of("colossalai"), run.stderr


def launch_job(kind: str, sshd: str, ssh: dict[str, str]) -> Compiled:
    """A job of either SSH kind, with spec.ssh set to `ssh` (+ sshdPath), compiled."""
    if kind == "deepspeed":
        job = deepspeed_job({"run": {"python": ["t.py"]}}, sshd=sshd)
    else:
        job = colossalai_job(new_shape(["t.py"], []), sshd=sshd)
    job["spec"]["ssh"] = {**job["spec"]["ssh"], **ssh}
    return compile_job(job)


def launch_scripts(kind: str, sshd: str, ssh: dict[str, str]) -> dict[str, str]:
    """The launching pod's scripts of either SSH kind, with spec.ssh set to `ssh` (+ sshdPath)."""
    return launch_job(kind, sshd, ssh).data


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_keys_mounted_elsewhere_are_linked_into_home_ssh_for_the_clients(tmp_path: Path, bin_dir: Path, kind: str) -> None:
    """ssh.authMountPath is "the directory where SSH keys are mounted" (T9k), and the launching
    pod's ssh clients read ~/.ssh only: a job with `authMountPath: /etc/keys` failed with "not
    reachable via ssh" / "No authentication methods available" (the same jobs run whole under
    run-local in tests/e2e).  Which ~ depends on the client: OpenSSH (deepspeed's pdsh) reads the
    passwd entry's home, fabric (colossalai) $HOME; with HOME=/workspace in the container's env
    they differ, and both get the links (issue 20)."""
    s = Scripts(tmp_path, launch_scripts(kind, str(bin_dir / "sshd"), {"authMountPath": "/etc/keys"}), bin_dir)
    s.ssh_dir.mkdir()
    for f in ("config", "id_ed25519", "id_ed25519.pub", "authorized_keys"):
        (s.ssh_dir / f).write_text(f, encoding="utf-8")
    home = tmp_path / "home"
    run = s.run(env={"HOME": str(home), "STUB_EXEC_MKDIR": '["/bin/mkdir"]'})
    assert run.code == 0, run.stderr
    for where in (home, s.passwd_home):
        assert {p.name: p.resolve() for p in (where / ".ssh").iterdir()} == {
            f: (s.ssh_dir / f).resolve() for f in ("config", "id_ed25519", "id_ed25519.pub")
        }
        assert (where / ".ssh").stat().st_mode & 0o077 == 0
    assert run.of(kind)  # and the launch went on


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_the_passwd_home_is_the_users_own_in_a_pod(tmp_path: Path, bin_dir: Path, kind: str) -> None:
    """In a pod FLATJOB_SSH_HOME is empty (rendered so: an envFrom cannot point it elsewhere),
    and the home OpenSSH reads is the passwd entry's, asked of Python; a user without one gets
    a clear stop, as OpenSSH itself would refuse to run ("No user exists for uid")."""
    compiled = launch_job(kind, str(bin_dir / "sshd"), {"authMountPath": "/etc/keys"})
    s = Scripts(tmp_path, compiled.data, bin_dir)
    s.ssh_dir.mkdir()
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(str(tmp_path / 'from-passwd'))}\n", encoding="utf-8")
    fake.chmod(0o755)
    run = s.run(env={"FLATJOB_SSH_HOME": "", "FLATJOB_PYTHON": str(fake), "STUB_EXEC_MKDIR": '["/bin/mkdir"]'})
    assert sorted(p.name for p in (tmp_path / "from-passwd" / ".ssh").iterdir()) == ["config", "id_ed25519", "id_ed25519.pub"], run.stderr
    run = s.run(env={"FLATJOB_SSH_HOME": "", "FLATJOB_PYTHON": "false"})
    assert run.code == 1 and not run.of(kind)
    assert f"flatjob: false could not read a home from the passwd entry of uid {os.getuid()}, the home where OpenSSH reads the ssh key and config (spec.ssh.authMountPath: {s.ssh_dir})" in run.stderr
    empty = tmp_path / "empty-python"  # a passwd entry whose home is empty: no `/.ssh` made instead
    empty.write_text("#!/bin/sh\necho\n", encoding="utf-8")
    empty.chmod(0o755)
    run = s.run(env={"FLATJOB_SSH_HOME": "", "FLATJOB_PYTHON": str(empty)})
    assert run.code == 1 and not run.of(kind) and "could not read a home from the passwd entry" in run.stderr
    for pod in pods_of(compiled.objects):
        for c in pod["spec"]["containers"]:
            assert {"name": "FLATJOB_SSH_HOME", "value": ""} in c["env"]


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_every_pods_sshd_script_links_keys_mounted_elsewhere_too(tmp_path: Path, bin_dir: Path, kind: str) -> None:
    """Debug mode runs sshd.sh in every pod, and the user runs deepspeed or ssh there by hand."""
    s = Scripts(tmp_path, launch_scripts(kind, str(bin_dir / "sshd"), {"authMountPath": "/etc/keys"}), bin_dir)
    s.ssh_dir.mkdir()
    home = tmp_path / "home"
    run = s.run("sshd.sh", env={"HOME": str(home), "STUB_EXEC_MKDIR": '["/bin/mkdir"]'})
    assert run.code == 0, run.stderr
    assert sorted(p.name for p in (home / ".ssh").iterdir()) == ["config", "id_ed25519", "id_ed25519.pub"]
    assert run.of("sshd")


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_a_home_ssh_that_cannot_hold_the_links_stops_the_launch_saying_why(tmp_path: Path, bin_dir: Path, kind: str) -> None:
    s = Scripts(tmp_path, launch_scripts(kind, str(bin_dir / "sshd"), {"authMountPath": "/etc/keys"}), bin_dir)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".ssh").write_text("a file, not a folder", encoding="utf-8")
    run = s.run(env={"HOME": str(home), "STUB_EXEC_MKDIR": '["/bin/mkdir"]'})
    assert run.code == 1 and not run.of(kind)
    assert f"flatjob: cannot create {home}/.ssh, where fabric and paramiko ($HOME) read the ssh key and config (spec.ssh.authMountPath: {s.ssh_dir})" in run.stderr


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_a_linked_name_that_leads_to_a_folder_is_replaced_not_written_into(tmp_path: Path, bin_dir: Path, kind: str) -> None:
    """`ln -sf key ~/.ssh/config` where ~/.ssh/config is a link to a folder made the link inside
    that folder, outside the .ssh, and left the clients reading a folder as their config; a
    folder of that name stops the launch, naming it."""
    s = Scripts(tmp_path, launch_scripts(kind, str(bin_dir / "sshd"), {"authMountPath": "/etc/keys"}), bin_dir)
    s.ssh_dir.mkdir()
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    (home / ".ssh").mkdir(parents=True)
    elsewhere.mkdir()
    (home / ".ssh" / "config").symlink_to(elsewhere)
    run = s.run(env={"HOME": str(home), "STUB_EXEC_MKDIR": '["/bin/mkdir"]'})
    assert run.code == 0, run.stderr
    assert list(elsewhere.iterdir()) == []
    assert (home / ".ssh" / "config").resolve() == (s.ssh_dir / "config").resolve()
    (home / ".ssh" / "config").unlink()
    (home / ".ssh" / "config").mkdir()
    run = s.run(env={"HOME": str(home), "STUB_EXEC_MKDIR": '["/bin/mkdir"]'})
    assert run.code == 1 and not run.of(kind)
    assert f"flatjob: cannot link {home}/.ssh/config to {s.ssh_dir}/config: fabric and paramiko ($HOME) read no key there" in run.stderr


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_the_default_key_mount_renders_no_link_step(kind: str) -> None:
    """/root/.ssh, T9k's default, is where the clients look: nothing to link (golden files unchanged)."""
    for ssh in ({}, {"authMountPath": "/root/.ssh/"}):
        data = launch_scripts(kind, "/usr/sbin/sshd", ssh)
        assert ".ssh/$f" not in data["launch.sh"] + data["sshd.sh"]


@pytest.mark.parametrize("kind", ["deepspeed", "colossalai"])
def test_a_home_whose_ssh_is_the_mount_is_left_alone(tmp_path: Path, bin_dir: Path, kind: str) -> None:
    """run-local's pods: HOME's .ssh is the key mount itself; nothing is written into it."""
    s = Scripts(tmp_path, launch_scripts(kind, str(bin_dir / "sshd"), {"authMountPath": "/etc/keys"}), bin_dir)
    s.ssh_dir.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (home / ".ssh").symlink_to(s.ssh_dir)
    run = s.run(env={"HOME": str(home), "STUB_EXEC_MKDIR": '["/bin/mkdir"]'})
    assert run.code == 0, run.stderr
    assert list(s.ssh_dir.iterdir()) == []
