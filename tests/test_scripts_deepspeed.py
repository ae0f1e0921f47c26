"""worker-0's launch.sh of a DeepSpeedJob, executed by /bin/sh against stub programs.

Covers, with the ConfigMap read back from the emitted YAML and run by dash:
- the exact deepspeed argv for every spec.config field (run.python/module/exec, localRank,
  autotune, otherArgs incl. a user --master_port, elastic) and the hostfile's slots;
- customCommand runs as `sh -c` with $FLATJOB_HOSTFILE_IN_USE (elastic: the run hostfile);
- hostile arguments reach deepspeed intact through run args, otherArgs and customCommand;
- the env file: declared names that are set, KEY=VALUE only, newline values skipped with a
  message, DeepSpeed's own parse rule, disableCustomEnv; the order of the steps;
- exit codes: deepspeed's own, 143/130 on SIGTERM/SIGINT even when deepspeed exits 0 or 1.
"""

from __future__ import annotations

import shlex
import signal
from pathlib import Path
from typing import Any

import pytest
from scriptkit import (
    HOSTILE,
    SIGNALS,
    Scripts,
    compile_job,
    deepspeed_env,
    deepspeed_job,
    stub_bin,
)

MASTER = "--master_addr=job-worker-0.job"
PORT = "--master_port=29500"


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stub_bin(tmp_path_factory.mktemp("bin"))


def launch(tmp_path: Path, bin_dir: Path, config: dict[str, Any], **spec: Any) -> Scripts:
    job = deepspeed_job(config, sshd=str(bin_dir / "sshd"), **spec)
    return Scripts(tmp_path, compile_job(job).data, bin_dir)


PY = {"run": {"python": ["train.py", "--lr", "0.1"]}}
ELASTIC = {"elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3}}
ELASTIC_FLAGS = "--elastic_training --min_elastic_nodes=1 --max_elastic_nodes=3"
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
        {**PY, "otherArgs": ["--bind_cores_to_rank", "--launcher_args", "-S -o x"]},
        {},
        f"{M} {P} --bind_cores_to_rank --launcher_args '-S -o x' train.py --lr 0.1",
    ),
    (
        "user-master-port",
        {**PY, "otherArgs": ["--master_port=12346"]},
        {},
        f"{M} --master_port=12346 train.py --lr 0.1",
    ),
    (
        "user-master-port-split",
        {**PY, "otherArgs": ["--master_port", "1"]},
        {},
        f"{M} --master_port 1 train.py --lr 0.1",
    ),
    (
        "user-master-addr",
        {**PY, "otherArgs": ["--master_addr=10.0.0.1"]},
        {},
        f"{P} --master_addr=10.0.0.1 train.py --lr 0.1",
    ),
    ("elastic", PY, ELASTIC, f"{M} {P} {ELASTIC_FLAGS} train.py --lr 0.1"),
    (
        "everything",
        {
            "run": {"module": ["m"]},
            "localRank": False,
            "autotune": "run",
            "otherArgs": ["--ssh_port=22"],
        },
        ELASTIC,
        f"{M} {P} --no_local_rank --autotuning=run {ELASTIC_FLAGS} --module --ssh_port=22 m",
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
    waiter = run.argv("python3")
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
    run = s.run()
    sequential = [
        (c.prog, c.argv[:2]) for c in run.calls if not (c.prog == "sshd" and "-D" in c.argv)
    ]
    assert sequential == [
        ("ssh-keygen", ["-A"]),
        ("mkdir", ["-p", "/run/sshd"]),
        ("sshd", ["-t", "-p"]),
        ("python3", [f"{s.dir}/wait_for_peers.py", "--hostfile"]),
        ("deepspeed", [f"--hostfile={s.hostfile}", MASTER]),
    ]
    # worker-0 is in its own hostfile: sshd checked, then in the background, logging to stderr.
    assert [c.argv for c in run.of("sshd")] == [["-t", "-p", "22"], ["-D", "-e", "-p", "22"]]


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
HOSTILE_CASES = [
    (
        "run-python-args",
        {"run": {"python": ["train.py", *HOSTILE]}},
        [MASTER, PORT, "train.py", *HOSTILE],
    ),
    ("run-exec", {"run": {"exec": HOSTILE}}, [MASTER, PORT, "--no_python", *HOSTILE]),
    (
        "other-args",
        {"run": {"python": ["t.py"]}, "otherArgs": HOSTILE},
        [MASTER, PORT, *HOSTILE, "t.py"],
    ),
    ("custom-command", {"customCommand": "exec deepspeed " + shlex.join(HOSTILE)}, None),
]


@pytest.mark.parametrize(
    ("config", "expected"), [r[1:] for r in HOSTILE_CASES], ids=[r[0] for r in HOSTILE_CASES]
)
def test_hostile_arguments_reach_deepspeed_intact(
    tmp_path: Path, bin_dir: Path, config: dict[str, Any], expected: list[str] | None
) -> None:
    s = launch(tmp_path, bin_dir, config)
    (s.cwd / "glob-bait.py").write_text("")  # `*` would expand to this if it reached a shell
    run = s.run()
    assert run.code == 0, run.stderr
    argv = run.argv("deepspeed")
    if expected is None:  # customCommand: its own words, no --hostfile added
        assert argv == HOSTILE
    else:
        assert argv == [f"--hostfile={s.hostfile}", *expected]
    assert not list(tmp_path.rglob("pwned")), "a hostile argument was executed"


# --- the env file ------------------------------------------------------------------------------

ENV = [
    {"name": "PLAIN", "value": "1"},
    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    {"name": "MULTILINE", "value": "a\nb"},
    {"name": "ABSENT", "valueFrom": {"secretKeyRef": {"name": "s", "key": "x", "optional": True}}},
    {"name": "EMPTY", "value": ""},
    {"name": "TRICKY", "value": "x=y 'q' \"d\" $HOME `b` # not a comment"},
    {"name": "UNICODE", "value": "ü ✓"},
]
# What the kubelet would put in the container's environment (ABSENT: optional, missing).
EXPORTED = {
    "PLAIN": "1",
    "FROM_SECRET": "s3cret-from-valueFrom",
    "MULTILINE": "a\nb",
    "EMPTY": "",
    "TRICKY": "x=y 'q' \"d\" $HOME `b` # not a comment",
    "UNICODE": "ü ✓",
    "UNDECLARED": "not in the spec",
}


def test_env_file_forwards_declared_vars_from_the_environment(
    tmp_path: Path, bin_dir: Path
) -> None:
    s = launch(tmp_path, bin_dir, PY, env=ENV)
    run = s.run(env=EXPORTED)
    assert run.code == 0, run.stderr
    text = s.env_file.read_text(encoding="utf-8")
    assert text == (
        "PLAIN=1\nFROM_SECRET=s3cret-from-valueFrom\nEMPTY=\n"
        "TRICKY=x=y 'q' \"d\" $HOME `b` # not a comment\nUNICODE=ü ✓\n"
    )
    assert all(line and not line.startswith("#") and "=" in line for line in text.splitlines())
    assert deepspeed_env(text) == {
        "PLAIN": "1",
        "FROM_SECRET": "s3cret-from-valueFrom",
        "EMPTY": "",
        "TRICKY": "x=y 'q' \"d\" $HOME `b` # not a comment",
        "UNICODE": "ü ✓",
    }
    assert run.stderr.count("flatjob:") == 1
    assert "flatjob: MULTILINE holds a newline; not forwarded to other workers" in run.stderr
    assert run.of("deepspeed"), "the launch goes on after a skipped value"


def test_env_file_is_written_before_the_wait(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY, env=ENV[:1])
    run = s.run(env={"PLAIN": "1", "STUB_EXIT_PYTHON3": "1"})
    assert run.code == 1 and not run.of("deepspeed")
    assert s.env_file.read_text() == "PLAIN=1\n"


def test_env_file_without_declared_env_is_empty(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY)
    s.env_file.write_text("STALE=1\n")
    assert s.run(env={"PLAIN": "1"}).code == 0
    assert s.env_file.read_text() == ""


def test_disable_custom_env_writes_no_file(tmp_path: Path, bin_dir: Path) -> None:
    s = launch(tmp_path, bin_dir, PY, env=ENV, disableCustomEnv=True)
    run = s.run(env=EXPORTED)
    assert run.code == 0, run.stderr
    assert not s.env_file.exists()
    assert "flatjob:" not in run.stderr


def test_deepspeed_env_rule_rejects_blank_and_comment_lines() -> None:
    assert deepspeed_env("A=1\nB=x=y\n") == {"A": "1", "B": "x=y"}
    for bad in ("A=1\n\n", "# comment\nA=1\n"):
        with pytest.raises(ValueError):
            deepspeed_env(bad)


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
