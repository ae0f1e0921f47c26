"""worker-0's launch.sh of a DeepSpeedJob, executed by /bin/sh against stub programs.

Covers, with the ConfigMap read back from the emitted YAML and run by dash:
- the exact deepspeed argv for every spec.config field (run.python/module/exec, localRank,
  autotune, otherArgs incl. a user --master_port, elastic: no elastic flags) and the
  hostfile's slots; --force_multi unless otherArgs has it;
- customCommand runs as `sh -c` with $FLATJOB_HOSTFILE_IN_USE (elastic: the run hostfile);
- hostile arguments reach deepspeed intact through run args, otherArgs and customCommand;
- the kept environment: `export -p` of the container, which session.sh loads byte for byte
  (disableCustomEnv: FLATJOB_* only); values deepspeed cannot quote are left out of its own
  environment, by name; the order of the steps;
- the pdsh wrapper: a signal death is passed on as 128+N; deepspeed exiting 0 while pdsh
  never finished is 137;
- exit codes: deepspeed's own, 143/130 on SIGTERM/SIGINT even when deepspeed exits 0 or 1.
The same scripts run with the real sshd, pdsh and deepspeed in tests/e2e/test_deepspeed.py.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scriptkit import (
    HOSTILE,
    SH,
    SIGNALS,
    Scripts,
    compile_job,
    deepspeed_job,
    stub_bin,
)

from flatjob.compiler.plan.scripts import UNNAMABLE_PY

MASTER = "--master_addr=job-worker-0.job"
PORT = "--master_port=29500 --force_multi"


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stub_bin(tmp_path_factory.mktemp("bin"))


def launch(tmp_path: Path, bin_dir: Path, config: dict[str, Any], refused: frozenset[str] = frozenset(), **spec: Any) -> Scripts:
    job = deepspeed_job(config, sshd=str(bin_dir / "sshd"), **spec)
    return Scripts(tmp_path, compile_job(job, refused).data, bin_dir)


PY = {"run": {"python": ["train.py", "--lr", "0.1"]}}
ELASTIC = {"elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3}}
M, P = MASTER, PORT
# (id, spec.config, more spec, deepspeed's argv after --hostfile, as sh words)
ARGV = [
    ("python", PY, {}, f"{M} {P} train.py --lr 0.1"),
    ("module", {"run": {"module": ["pkg.train", "--x"]}}, {}, f"{M} {P} --module pkg.train --x"),
    ("exec", {"run": {"exec": ["bash", "run.sh"]}}, {}, f"{M} {P} --no_python bash run.sh"),
    (
        "local-rank-false",
        {**PY, "localRank": False},
        {},
        f"{M} {P} --no_local_rank train.py --lr 0.1",
    ),
    ("local-rank-true", {**PY, "localRank": True}, {}, f"{M} {P} train.py --lr 0.1"),
    (
        "autotune-tune",
        {**PY, "autotune": "tune"},
        {},
        f"{M} {P} --autotuning=tune train.py --lr 0.1",
    ),
    ("autotune-run", {**PY, "autotune": "run"}, {}, f"{M} {P} --autotuning=run train.py --lr 0.1"),
    ("autotune-none", {**PY, "autotune": "none"}, {}, f"{M} {P} train.py --lr 0.1"),
    (
        "other-args",
        {**PY, "otherArgs": ["--bind_cores_to_rank", "--exclude", "worker-1:0 1"]},
        {},
        f"{M} {P} --bind_cores_to_rank --exclude 'worker-1:0 1' train.py --lr 0.1",
    ),
    (
        "user-master-port",
        {**PY, "otherArgs": ["--master_port=12346"]},
        {},
        f"{M} --force_multi --master_port=12346 train.py --lr 0.1",
    ),
    (
        "user-master-port-split",
        {**PY, "otherArgs": ["--master_port", "1"]},
        {},
        f"{M} --force_multi --master_port 1 train.py --lr 0.1",
    ),
    (
        "user-master-addr",
        {**PY, "otherArgs": ["--master_addr=10.0.0.1"]},
        {},
        f"{P} --master_addr=10.0.0.1 train.py --lr 0.1",
    ),
    (
        "user-force-multi",
        {**PY, "otherArgs": ["--force_multi"]},
        {},
        f"{M} --master_port=29500 --force_multi train.py --lr 0.1",
    ),
    ("elastic", PY, ELASTIC, f"{M} {P} train.py --lr 0.1"),
    (
        "everything",
        {
            "run": {"module": ["m"]},
            "localRank": False,
            "autotune": "run",
            "otherArgs": ["--ssh_port=22"],
        },
        ELASTIC,
        f"{M} {P} --no_local_rank --autotuning=run --module --ssh_port=22 m",
    ),
]


@pytest.mark.parametrize(
    ("config", "spec", "expected"), [r[1:] for r in ARGV], ids=[r[0] for r in ARGV]
)
def test_deepspeed_argv_per_config_field(
    tmp_path: Path, bin_dir: Path, config: dict[str, Any], spec: dict[str, Any], expected: list[str]
) -> None:
    s = launch(tmp_path, bin_dir, config, **spec)
    run = s.run()
    assert run.code == 0, run.stderr
    hostfile = s.run_hostfile if "elastic" in spec else s.hostfile
    assert run.argv("deepspeed") == [f"--hostfile={hostfile}", *shlex.split(expected)]
    waiter = run.waiter()
    assert ("--min" in waiter, "--out" in waiter) == ("elastic" in spec, "elastic" in spec)


@pytest.mark.parametrize("slots", [1, 3, 8])
def test_hostfile_lists_every_worker_with_its_slots(
    tmp_path: Path, bin_dir: Path, slots: int
) -> None:
    s = launch(tmp_path, bin_dir, {**PY, "slotsPerWorker": slots}, replicas=3)
    assert s.hostfile.read_text() == "".join(
        f"job-worker-{i}.job slots={slots}\n" for i in range(3)
    )
    run = s.run()
    assert run.argv("deepspeed")[0] == f"--hostfile={s.hostfile}"


def test_steps_run_in_order(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY)
    up = tmp_path / "sshd.running"  # the background sshd is up (its call logged) before deepspeed runs
    run = s.run(env={"STUB_BLOCK_SSHD": str(up), "STUB_AWAIT_DEEPSPEED": str(up)})
    sequential = [
        (c.prog, c.argv[:2]) for c in run.calls if not (c.prog == "sshd" and "-t" not in c.argv)
    ]
    assert sequential == [
        ("ssh-keygen", ["-A"]),
        ("mkdir", ["-p", "/run/sshd"]),
        ("sshd", ["-D", "-e"]),
        ("python3", [f"{s.dir}/wait_for_peers.py", "--hostfile"]),
        ("python3", ["-c", UNNAMABLE_PY]),  # the env names no shell can hold
        ("deepspeed", [f"--hostfile={s.hostfile}", MASTER]),
    ]
    # worker-0 is in its own hostfile: sshd checked (-t), then in the background, logging to
    # stderr; the peer wait watches that sshd.
    sshd = [*SSHD_ARGV(s)]
    assert [c.argv for c in run.of("sshd")] == [[*sshd, "-t"], sshd]
    (bg,) = [c for c in run.of("sshd") if "-t" not in c.argv]
    assert run.waiter()[-2:] == ["--sshd-pid", str(bg.pid)]


def SSHD_ARGV(s: Scripts) -> list[str]:
    """sshd's argv: -D -e -p 22, the config, StrictModes off, the key mount, session.sh."""
    return [
        "-D", "-e", "-p", "22", "-f", str(s.sshd_config), "-o", "StrictModes=no",
        "-o", f"AuthorizedKeysFile={s.ssh_dir}/authorized_keys",
        "-o", f"ForceCommand=/bin/sh '{s.dir}/session.sh' '{s.pod_env}'",  # single-quoted for sshd's shell
    ]


# --- customCommand --------------------------------------------------------------------------

CUSTOM = (
    'deepspeed --hostfile "$FLATJOB_HOSTFILE_IN_USE" train.py \'a b\' "$(echo sub)"\necho done >&2'
)


@pytest.mark.parametrize("elastic", [False, True], ids=["static", "elastic"])
def test_custom_command_runs_as_sh_c_with_the_hostfile(
    tmp_path: Path, bin_dir: Path, elastic: bool
) -> None:
    config = {"customCommand": CUSTOM, "slotsPerWorker": 2}
    s = launch(tmp_path, bin_dir, config, **(ELASTIC if elastic else {}))
    run = s.run()
    assert run.code == 0, run.stderr
    hostfile = str(s.run_hostfile if elastic else s.hostfile)
    (call,) = run.of("deepspeed")
    assert call.argv == ["--hostfile", hostfile, "train.py", "a b", "sub"]
    assert call.env["FLATJOB_HOSTFILE_IN_USE"] == hostfile
    assert run.stderr.endswith("done\n")
    assert s.hostfile.read_text().splitlines()[0] == "job-worker-0.job slots=2"


def test_custom_command_exit_code_is_the_launch_exit_code(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, {"customCommand": "deepspeed x; exit 7"})
    assert s.run().code == 7


# --- hostile arguments -----------------------------------------------------------------------

# (id, spec.config, what deepspeed must receive after --hostfile)
# run.python and run.exec words are refused at lint (FJ340: deepspeed pastes them into each
# node's shell; test_hostile_run_words_never_compile); rendered anyway, flatjob's own script
# still passes them to deepspeed intact.
REFUSED = frozenset({"FJ340"})
HOSTILE_CASES = [
    (
        "run-python-args",
        {"run": {"python": ["train.py", *HOSTILE]}},
        [MASTER, *PORT.split(), "train.py", *HOSTILE],
    ),
    ("run-exec", {"run": {"exec": HOSTILE}}, [MASTER, *PORT.split(), "--no_python", *HOSTILE]),
    (
        "other-args",
        {"run": {"python": ["t.py"]}, "otherArgs": HOSTILE},
        [MASTER, *PORT.split(), *HOSTILE, "t.py"],
    ),
    ("custom-command", {"customCommand": "exec deepspeed " + shlex.join(HOSTILE)}, None),
]


@pytest.mark.parametrize(
    ("config", "expected"), [r[1:] for r in HOSTILE_CASES], ids=[r[0] for r in HOSTILE_CASES]
)
def test_hostile_arguments_reach_deepspeed_intact(
    tmp_path: Path, bin_dir: Path, config: dict[str, Any], expected: list[str] | None
) -> None:
    s = launch(tmp_path, bin_dir, config, REFUSED)
    (s.cwd / "glob-bait.py").write_text("")  # `*` would expand to this if it reached a shell
    run = s.run()
    assert run.code == 0, run.stderr
    argv = run.argv("deepspeed")
    if expected is None:  # customCommand: its own words, no --hostfile added
        assert argv == HOSTILE
    else:
        assert argv == [f"--hostfile={s.hostfile}", *expected]
    assert not list(tmp_path.rglob("pwned")), "a hostile argument was executed"


@pytest.mark.parametrize("config", [{"run": {"python": ["train.py", *HOSTILE]}}, {"run": {"exec": HOSTILE}}], ids=["run-python-args", "run-exec"])
def test_hostile_run_words_never_compile(config: dict[str, Any]) -> None:
    """deepspeed's pdsh runner pastes the script's words into every node's shell (quoted only
    when they hold a space), so each word a shell would change is an error, never rendered."""
    import yaml

    from flatjob.compiler.loader import Loaded, parse
    from flatjob.compiler.options import CompileOptions
    from flatjob.compiler.pipeline import compile_documents

    docs, problems = parse(yaml.safe_dump(deepspeed_job(config, sshd="/usr/sbin/sshd"), sort_keys=False), "job.yaml")
    assert not problems
    result = compile_documents(Loaded(jobs=docs), CompileOptions())
    assert result.failed and not any(j.files for j in result.jobs)
    assert {d.code for d in result.diagnostics if d.is_error} == {"FJ340"}


# --- the environment for ssh sessions ------------------------------------------------------

ENV = [
    {"name": "PLAIN", "value": "1"},
    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    {"name": "TRICKY", "value": "x=y 'q' \"d\" $HOME `b` # not a comment"},
]
# What the kubelet would put in the container's environment.
EXPORTED = {
    "PLAIN": "1",
    "FROM_SECRET": "s3cret-from-valueFrom",
    "MULTILINE": "a\nb\n",
    "TRICKY": "x=y 'q' \"d\" $HOME `b` # not a comment",
    "UNICODE": "ü ✓",
    "LEADING": " space",
    "BACKSLASH": "a\\b",
    "PYTHONSAFE": "/opt/a:/opt/b",
    "PERCENT": "50%n",  # pdsh would make it 500 on the first node (hx13)
    "FLATJOB_ATTEMPT": "2",
}
PRINT_ENV = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


def session(s: Scripts, command: str, login: dict[str, str] | None = None) -> dict[str, str]:
    """Run session.sh as sshd would (ForceCommand, a login environment): the environment the
    client's `command` ran with."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/root", "SHELL": SH, "SSH_ORIGINAL_COMMAND": command, **(login or {})}
    out = subprocess.run([SH, str(s.dir / "session.sh"), str(s.pod_env)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_sessions_get_the_containers_environment_byte_for_byte(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY, env=ENV)
    run = s.run(env=EXPORTED)
    assert run.code == 0, run.stderr
    assert oct(s.pod_env.stat().st_mode & 0o777) == "0o600"  # valueFrom may hold secrets
    seen = session(s, shlex.join(PRINT_ENV), login={"SSH_CONNECTION": "1.2.3.4 5 6.7.8.9 22"})
    for name, value in EXPORTED.items():
        assert seen[name] == value, name
    assert seen["SSH_CONNECTION"] == "1.2.3.4 5 6.7.8.9 22"  # the session's own stay
    assert seen["FLATJOB_DIR"] == str(s.dir)


def test_session_runs_the_command_with_the_login_shell_and_its_exit_code(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY)
    assert s.run().code == 0
    env = {"PATH": "/usr/bin:/bin", "SHELL": SH, "SSH_ORIGINAL_COMMAND": "exit 7"}
    done = subprocess.run([SH, str(s.dir / "session.sh"), str(s.pod_env)], env=env, check=False)
    assert done.returncode == 7


def test_disable_custom_env_keeps_only_flatjobs_variables(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY, env=ENV, disableCustomEnv=True)
    run = s.run(env=EXPORTED)
    assert run.code == 0, run.stderr
    seen = session(s, shlex.join(PRINT_ENV))
    assert seen["FLATJOB_ATTEMPT"] == "2"
    assert not {"PLAIN", "FROM_SECRET", "TRICKY"} & set(seen)


def test_values_deepspeed_cannot_quote_are_left_out_of_its_environment(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY, env=ENV)
    run = s.run(env=EXPORTED)
    assert run.code == 0, run.stderr
    (call,) = run.of("deepspeed")
    left_out = {"TRICKY", "MULTILINE", "LEADING", "BACKSLASH", "PERCENT"}
    assert not left_out & set(call.env)
    assert call.env["PYTHONSAFE"] == "/opt/a:/opt/b" and call.env["UNICODE"] == "ü ✓"
    assert call.env["PLAIN"] == "1" and call.env["FROM_SECRET"] == "s3cret-from-valueFrom"
    (line,) = [ln for ln in run.stderr.splitlines() if "cannot quote" in ln]
    assert sorted(line.split("values of ")[1].split(";")[0].split()) == sorted(left_out)
    assert "s3cret" not in run.stderr and "$HOME" not in run.stderr  # names only


# --- the pdsh wrapper ---------------------------------------------------------------------------


def wrapper(s: Scripts, pdsh: str) -> subprocess.CompletedProcess[str]:
    status = s.root / "status"
    env = {"PATH": "/usr/bin:/bin", "FLATJOB_PDSH": pdsh, "FLATJOB_PDSH_STATUS": str(status)}
    return subprocess.run([str(s.dir / "pdsh"), "-w", "a,b", "cmd"], env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("script", "code"), [("exit 0", 0), ("exit 3", 3), ("kill -KILL $$", 137), ("kill -TERM $$", 143)])
def test_pdsh_wrapper_passes_a_signal_on_as_128_plus_n(tmp_path: Path, bin_dir: Path, script: str, code: int) -> None:
    s = launch(tmp_path, bin_dir, PY)
    fake = tmp_path / "fake-pdsh"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    done = wrapper(s, str(fake))
    assert done.returncode == code
    assert (s.root / "status").read_text() == f"{code}\n"


def test_deepspeed_exiting_0_while_pdsh_never_finished_is_137(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY)
    # deepspeed's pdsh (the wrapper) started, then died without recording an end.
    fake = tmp_path / "fake" / "deepspeed"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho started > "$FLATJOB_PDSH_STATUS"\n')
    fake.chmod(0o755)
    run = s.run(env={"PATH": f"{fake.parent}:{bin_dir}:/usr/bin:/bin"})
    assert run.code == 137
    assert "pdsh was killed" in run.stderr
    assert s.run().code == 0  # no pdsh at all (the stub): deepspeed's 0 stands


# --- exit codes -------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [0, 1, 3, 255])
def test_launch_exits_with_deepspeeds_code(tmp_path: Path, bin_dir: Path, code: int) -> None:
    s = launch(tmp_path, bin_dir, PY)
    assert s.run(env={"STUB_EXIT_DEEPSPEED": str(code)}).code == code


# (id, signal, the code deepspeed exits with on it, the launch's code)
SIGNAL_CASES = [
    ("term-deepspeed-exits-0", "TERM", 0, 143),  # DeepSpeed's runner exits 0 if its child is killed
    ("term-deepspeed-exits-1", "TERM", 1, 143),
    ("int-deepspeed-exits-0", "INT", 0, 130),
]


@pytest.mark.parametrize(
    ("sig", "child_code", "code"), [r[1:] for r in SIGNAL_CASES], ids=[r[0] for r in SIGNAL_CASES]
)
def test_signal_while_deepspeed_runs(
    tmp_path: Path, bin_dir: Path, sig: str, child_code: int, code: int
) -> None:
    s = launch(tmp_path, bin_dir, PY)
    run = s.signal_while("deepspeed", SIGNALS[sig], env={"STUB_EXIT_DEEPSPEED": str(child_code)})
    assert run.code == code, run.stderr
    assert run.signals("deepspeed") == [signal.SIGTERM]  # passed on as SIGTERM, then waited for
    assert run.seconds < 5


def test_sigterm_during_the_peer_wait_stops_it(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY)
    run = s.signal_while("python3", signal.SIGTERM)
    assert run.code == 143
    assert run.signals("python3") == [signal.SIGTERM]
    assert not run.of("deepspeed")


@pytest.mark.slow  # a race run many times: 5-10 s a shell
@pytest.mark.parametrize("shell", ["/bin/sh", "bash"])
def test_sigterm_right_after_a_step_starts_is_never_lost(tmp_path: Path, shell: str) -> None:
    """SIGTERM at any moment of a step's start reaches the step: dash runs its trap in a child
    forked but not yet exec'd, where the signal was only noted and lost (the script then
    waited for its step until the grace period's SIGKILL; 52 of 1 500 runs hung), and a signal
    before `child=$!` stopped the previous step. 300 runs, each signalled 0-4 ms in."""
    import random
    import time

    from flatjob.compiler.plan.scripts import background, traps

    script = tmp_path / "s.sh"
    script.write_text(traps() + background("true") + background("sleep 31.7"))
    rng = random.Random(7)
    hung = []
    for i in range(300):
        proc = subprocess.Popen([shell, str(script)])
        time.sleep(rng.uniform(0, 0.004))
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            hung.append(i)
            proc.kill()
            proc.wait()
    subprocess.run(["pkill", "-f", "^sleep 31.7$"], check=False)  # those a signal before the trap left behind
    assert not hung, f"{len(hung)} of 300 runs kept waiting for their step"


# --- deepspeed's and pdsh's own settings are flatjob's (review of round 14) --------------------


def test_deepspeeds_and_pdshs_own_settings_never_reach_deepspeed(tmp_path: Path, bin_dir: Path) -> None:
    """An env file for deepspeed to paste into every node's shell, ssh options that run a
    command: configuration, not data; launch.sh unsets them (lint refuses them, FJ346)."""
    s = launch(tmp_path, bin_dir, PY)
    knobs = {"DS_ENV_FILE": str(s.pod_env), "PDSH_SSH_ARGS_APPEND": "-oProxyCommand=sh", "PDSH_SSH_ARGS": "-x", "PDSH_RCMD_TYPE": "exec", "PDSH_MODULE_DIR": "/tmp"}
    run = s.run(env=knobs)
    assert run.code == 0, run.stderr
    (call,) = run.of("deepspeed")
    assert not set(knobs) & set(call.env)


@pytest.mark.parametrize("where", ["home", "cwd"])
def test_a_deepspeed_env_file_deepspeed_could_not_quote_stops_the_launch(tmp_path: Path, bin_dir: Path, where: str) -> None:
    """deepspeed pastes each line of ~/.deepspeed_env and ./.deepspeed_env into every node's
    command as `export K="V"`, unescaped: such a line stops launch.sh, naming line numbers only."""
    s = launch(tmp_path, bin_dir, PY)
    folder = s.root if where == "home" else s.cwd
    (folder / ".deepspeed_env").write_text("GOOD=1\nNCCL_X=$(touch /tmp/flatjob-pwned)\n", encoding="utf-8")
    run = s.run()
    assert run.code == 1 and not run.of("deepspeed")
    assert "line(s) 2 :" in run.stderr and "pwned" not in run.stderr
    (folder / ".deepspeed_env").write_text("GOOD=1\nNCCL_X=50%n\nOK=50%\nNCCL_Y=$(id)\n", encoding="utf-8")  # pdsh makes %n the node's rank (hx13)
    run = s.run()
    assert run.code == 1 and not run.of("deepspeed") and "line(s) 2 4 :" in run.stderr, run.stderr
    (folder / ".deepspeed_env").write_text("GOOD=1\nNCCL_DEBUG = INFO\n", encoding="utf-8")  # what deepspeed can quote runs
    assert s.run().code == 0


@pytest.mark.parametrize("name", ["d;touch${IFS}x", "run_%h"])  # pdsh would cd to run_<host> (hx13)
def test_a_working_directory_whose_resolved_path_is_shell_syntax_stops_the_launch(tmp_path: Path, bin_dir: Path, name: str) -> None:
    """deepspeed pastes `cd <os.getcwd()>` (links resolved) into every node's shell: lint sees
    the workingDir's text only, launch.sh the directory itself."""
    s = launch(tmp_path, bin_dir, PY)
    hostile = s.root / name
    hostile.mkdir()
    s.cwd.rmdir()
    s.cwd.symlink_to(hostile)
    run = s.run()
    assert run.code == 1 and not run.of("deepspeed"), run.stderr
    assert "working directory (links resolved)" in run.stderr
