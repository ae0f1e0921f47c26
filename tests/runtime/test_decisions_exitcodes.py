"""Exit codes: which codes each restart policy retries, and what a launcher's exit really means.

Covers runtime.decisions.exitcodes:
- retryable(policy, code) for every policy x a set of codes, the table written out in full;
- effective_exit_code(pod, launcher) for every launcher x the exits a pod can show, each
  row with the reason it is what it is (../shared/research/launchers.md).
"""

from __future__ import annotations

import pytest

from flatjob.runtime.decisions.exitcodes import LOST, RETRYABLE, effective_exit_code, retryable

from .builders import pod

POLICIES = ("Never", "OnFailure", "Always", "ExitCode")

# code: (Never, OnFailure, Always, ExitCode).  T9k: ExitCode retries only 130, 137, 138, 143.
RETRY_TABLE: dict[int, tuple[bool, bool, bool, bool]] = {
    0: (False, False, True, False),  # success: only Always runs it again
    1: (False, True, True, False),  # a program error: permanent under ExitCode
    2: (False, True, True, False),  # usage error
    126: (False, True, True, False),  # command not executable
    127: (False, True, True, False),  # command not found
    130: (False, True, True, True),  # SIGINT
    137: (False, True, True, True),  # SIGKILL (OOM killer, eviction, node loss)
    138: (False, True, True, True),  # SIGUSR1: T9k's "please restart me"
    139: (False, True, True, False),  # SIGSEGV: a crash, not retried by ExitCode
    143: (False, True, True, True),  # SIGTERM
    255: (False, True, True, False),  # exit(-1) / ssh failure
    247: (False, True, True, False),  # raw sys.exit(-9): translated before the policy sees it
    254: (False, True, True, False),  # raw sys.exit(-2)
    241: (False, True, True, False),  # raw sys.exit(-15)
}

RETRY_CASES = [
    pytest.param(policy, code, row[i], id=f"{policy}-{code}")
    for code, row in RETRY_TABLE.items()
    for i, policy in enumerate(POLICIES)
]


@pytest.mark.parametrize(("policy", "code", "expected"), RETRY_CASES)
def test_retryable(policy: str, code: int, expected: bool) -> None:
    assert retryable(policy, code) is expected


def test_exit_code_policy_retries_exactly_t9k_codes() -> None:
    assert frozenset({130, 137, 138, 143}) == RETRYABLE
    assert {c for c in range(256) if retryable("ExitCode", c)} == {130, 137, 138, 143}


def test_unknown_policy_is_an_error_not_a_silent_no() -> None:
    with pytest.raises(KeyError):
        retryable("Sometimes", 1)


# --- effective exit codes -------------------------------------------------------------------

# What torchrun's ChildFailedError prints (torch/distributed/elastic/multiprocessing/errors):
# other failures first, then the root cause.  It reaches the pod's termination message through
# terminationMessagePolicy FallbackToLogsOnError (the log tail).
TORCHRUN_SUMMARY = """\
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-01_10:11:12
  host      : j-worker-0.j.default.svc
  rank      : 3 (local_rank: 1)
  exitcode  : {code} (pid: 1234)
  error_file: <N/A>
  traceback : {traceback}
============================================================"""

SIGKILL_SUMMARY = TORCHRUN_SUMMARY.format(code=-9, traceback="Signal 9 (SIGKILL) received by PID 1234")
SIGTERM_SUMMARY = TORCHRUN_SUMMARY.format(code=-15, traceback="Signal 15 (SIGTERM) received by PID 1234")
ERROR_SUMMARY = TORCHRUN_SUMMARY.format(code=1, traceback="To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")

# Two workers failed in one monitor interval: rank 1 was OOM-killed first (the root cause),
# rank 0 then died of the NCCL error that followed (listed under "Failures").
CASCADE_SUMMARY = """\
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2024-05-01_10:11:13
  host      : j-worker-0.j.default.svc
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 1233)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-01_10:11:12
  host      : j-worker-0.j.default.svc
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 1234)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 1234
============================================================"""

# torchrun's agent itself got SIGTERM (a real torch 2.13 run under run-local, review of round 12):
# it stops its workers and exits 1 with this tail, and no summary.
AGENT_SIGTERM = """\
W1127 02:44:04.783000 7379 torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal, shutting down workers
W1127 02:44:04.784000 7379 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 7438 closing signal SIGTERM
Traceback (most recent call last):
  File "/work/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/work/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 86, in _terminate_process_handler
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 7379 got signal: 15
"""

LAUNCHERS = (None, "torchrun", "deepspeed", "colossalai")

# (exit, reason, message): expected per launcher (None, torchrun, deepspeed, colossalai), why.
EFFECTIVE_TABLE = [
    ("exit-0", (0, None, None), (0, 0, 0, 0),
     "success; DeepSpeed's runner also exits 0 when pdsh dies by a signal (runner.py only "
     "propagates codes > 0), which cannot be told apart here: flatjob's pdsh wrapper and "
     "launch.sh turn it into 128+N before the pod ends (compiler/plan/pdsh.py)"),
    ("exit-1-no-message", (1, None, None), (1, 1, 1, 1),
     "a plain error; torchrun exits 1 for any worker failure, and without its summary 1 is all we know"),
    ("exit-1-torchrun-sigkill", (1, None, SIGKILL_SUMMARY), (1, 137, 1, 1),
     "torchrun exits 1 (uncaught ChildFailedError) but its summary says the worker got "
     "exitcode -9: SIGKILL, i.e. 137; only torchrun prints that summary of its own workers"),
    ("exit-1-torchrun-sigterm", (1, None, SIGTERM_SUMMARY), (1, 143, 1, 1),
     "exitcode -15 in the summary: the worker got SIGTERM, 143"),
    ("exit-1-torchrun-agent-sigterm", (1, None, AGENT_SIGTERM), (1, 143, 1, 1),
     "torchrun's agent itself got SIGTERM (a drain's kubelet, `kill 1`): SignalException, exit 1, no summary; "
     "143 as any other program, retryable under ExitCode"),
    ("exit-1-torchrun-agent-last-words", (1, None, AGENT_SIGTERM.splitlines()[0]), (1, 143, 1, 1),
     "only the agent's first warning left in the tail: the signal it names"),
    ("exit-1-torchrun-error", (1, None, ERROR_SUMMARY), (1, 1, 1, 1),
     "exitcode 1 in the summary: a real program error, permanent under ExitCode"),
    ("exit-247", (247, None, None), (247, 137, 137, 137),
     "Python launchers sys.exit(returncode) with a negative code (-9) and the shell sees "
     "256-9 = 247: for a launcher that means its child was SIGKILLed; without a launcher "
     "247 is the program's own choice"),
    ("exit-254", (254, None, None), (254, 130, 130, 130), "256-2: the launcher's child got SIGINT"),
    ("exit-241", (241, None, None), (241, 143, 143, 143), "256-15: the launcher's child got SIGTERM"),
    ("exit-255", (255, None, None), (255, 255, LOST, 255),
     "ssh exits 255 when the connection to a peer fails or is lost (the peer's pod died): "
     "`pdsh -S` passes the largest remote code on and deepspeed exits with it, so for "
     "DeepSpeed it means a lost peer, like a killed pod (137, retried by ExitCode); colossalai "
     "run exits 1 for any failed node, and elsewhere 255 is the program's own exit(-1)"),
    ("exit-137-oomkilled", (137, "OOMKilled", None), (137, 137, 137, 137),
     "the kubelet OOM-killed the container: SIGKILL whatever the launcher"),
    ("exit-1-init-oomkilled", (1, "Init:OOMKilled", None), (137, 137, 137, 137),
     "an init container the OOM killer hit (observe.py's Init:<reason>; exit 1 where only a "
     "child was killed: cgroup v1, or singleProcessOOMKill) is a kill as a regular container's is"),
    ("evicted-no-exit", (None, "Evicted", None), (LOST, LOST, LOST, LOST),
     "no container exit code (evicted, preempted, node lost): treated as killed, 137"),
]

EFFECTIVE_CASES = [
    pytest.param(launcher, exit_, reason, message, expected[i], id=f"{launcher or 'none'}-{row_id}")
    for row_id, (exit_, reason, message), expected, _why in EFFECTIVE_TABLE
    for i, launcher in enumerate(LAUNCHERS)
]


@pytest.mark.parametrize(("launcher", "exit_", "reason", "message", "expected"), EFFECTIVE_CASES)
def test_effective_exit_code(launcher: str | None, exit_: int | None, reason: str | None, message: str | None, expected: int) -> None:
    state = pod("j-worker-0", "Succeeded" if exit_ == 0 else "Failed", exit=exit_, reason=reason, message=message)
    assert effective_exit_code(state, launcher) == expected


def test_oom_reason_wins_over_the_exit_code() -> None:
    # A torchrun pod OOM-killed while its summary said exit 1 is still a SIGKILL.
    state = pod("j-worker-0", "Failed", exit=1, reason="OOMKilled", message=ERROR_SUMMARY)
    assert effective_exit_code(state, "torchrun") == 137


def test_torchrun_root_cause_decides_when_several_workers_failed() -> None:
    state = pod("j-worker-0", "Failed", exit=1, message=CASCADE_SUMMARY)
    assert effective_exit_code(state, "torchrun") == 137  # the root cause: SIGKILL, retryable


def test_torchrun_summary_cut_to_its_tail_still_names_the_root_cause() -> None:
    # FallbackToLogsOnError keeps only the last 2048 bytes / 80 lines of the log.
    tail = SIGKILL_SUMMARY[-300:]
    assert "exitcode" in tail
    state = pod("j-worker-0", "Failed", exit=1, message=tail)
    assert effective_exit_code(state, "torchrun") == 137


def test_torchruns_root_cause_survives_the_runtimes_trim() -> None:
    """torchrun's summary lists other failures first and the root cause last: the cache keeps a
    termination message's end (a 1 KiB head read an OOM kill, -9, as a peer's exit 1)."""
    from flatjob.runtime import trim
    from flatjob.runtime.observe import pod_state

    other = "[{i}]:\n  host      : j-worker-0\n  rank      : {i} (local_rank: {i})\n  exitcode  : 1 (pid: 12{i}3)\n  error_file: <N/A>\n"
    message = (
        "Traceback ... RuntimeError: NCCL communicator was aborted\n" * 3 + "train.py FAILED\nFailures:\n"
        + "".join(other.format(i=i) for i in range(1, 9))
        + "Root Cause (first observed failure):\n[0]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : -9 (pid: 1234)\n"
    )
    assert len(message) > 1024
    obj = {"metadata": {"name": "j-worker-0", "uid": "u"}, "spec": {}, "status": {"phase": "Failed", "containerStatuses": [
        {"name": "main", "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}}}]}}
    assert effective_exit_code(pod_state(trim.pod(obj), "main"), "torchrun") == effective_exit_code(pod_state(obj, "main"), "torchrun") == 137
