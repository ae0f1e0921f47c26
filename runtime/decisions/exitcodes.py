"""What a pod's exit really means, given the launcher that ran in it.

Launchers hide their workers' exit codes: torchrun exits 1 whatever killed its workers
(it prints the worker's code in its failure summary, which reaches the pod's termination
message through terminationMessagePolicy FallbackToLogsOnError), DeepSpeed's runner exits
0 when its child dies by a signal (flatjob's pdsh wrapper turns that into 128+N), a Python
launcher that exits with a negative code shows up as 256-N, and DeepSpeed passes on pdsh's
255, which is ssh's code for a connection lost to a peer (its pod died).  The restart
policy is applied to the effective code this returns.
"""

from __future__ import annotations

import re

from ..model import PodState

RETRYABLE = frozenset({130, 137, 138, 143})  # SIGINT, SIGKILL, user "please restart", SIGTERM (T9k)
LOST = 137  # a released pod that vanished or was evicted: the node or someone killed it
_TORCHRUN_EXIT = re.compile(r"exitcode\s*:\s*(-?[0-9]{1,10})\b")  # ASCII, bounded: int() of the text never raises
# torchrun's agent itself signalled (the kubelet's SIGTERM, `kill 1`): it stops its workers,
# raises SignalException and exits 1 without a summary (torch/distributed/elastic/
# multiprocessing/api.py _terminate_process_handler; agent/server/api.py "Received N death signal").
_TORCHRUN_SIGNAL = re.compile(r"SignalException: Process [0-9]+ got signal: ([0-9]{1,2})\b|Received ([0-9]{1,2}) death signal")
_SIGNAL_EXITS = {256 - n: 128 + n for n in (2, 9, 10, 15)}  # sys.exit(-N) seen as 256-N
SSH_LOST = 255  # ssh: the connection to the peer failed or was lost


def _from_torchrun(message: str | None) -> int | None:
    """The root cause's exit code in torchrun's ChildFailedError summary, as a shell code.

    The summary lists other failures first and the root cause last (under "Root Cause"),
    so the last exitcode line is the one that decides; without a summary, the signal that
    stopped the agent itself (128+N).
    """
    if not message:
        return None
    found = list(_TORCHRUN_EXIT.finditer(message))
    if not found:
        signalled = list(_TORCHRUN_SIGNAL.finditer(message))
        return 128 + int(signalled[-1].group(1) or signalled[-1].group(2)) if signalled else None
    m = found[-1]
    code = int(m.group(1))
    return 128 - code if code < 0 else code


def effective_exit_code(pod: PodState, launcher: str | None) -> int:
    """The exit code the restart policy should see for a finished or lost pod."""
    if pod.exit_code is None or pod.evicted is not None:
        return LOST  # evicted (whatever its program answered SIGTERM), preempted, deleted or node lost before it could finish
    if (pod.reason or "").removeprefix("Init:") == "OOMKilled":  # an init container's too (observe.py names it Init:OOMKilled)
        return 137
    code = pod.exit_code
    if launcher == "torchrun" and code == 1:
        return _from_torchrun(pod.message) or 1
    if launcher in ("torchrun", "deepspeed", "colossalai") and code in _SIGNAL_EXITS:
        return _SIGNAL_EXITS[code]
    if launcher == "deepspeed" and code == SSH_LOST:
        return LOST  # pdsh -S passes on ssh's 255: a peer's pod is gone, as if killed
    return code


def retryable(policy: str, code: int) -> bool:
    """Whether a restart policy restarts a pod that ended with this effective code."""
    return {
        "Never": False,
        "OnFailure": code != 0,
        "Always": True,
        "ExitCode": code in RETRYABLE,
    }[policy]
