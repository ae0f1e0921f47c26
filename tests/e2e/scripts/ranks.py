"""A rank for the SSH kinds' end-to-end tests, started by deepspeed or `colossalai run`.

Writes what it saw to $E2E_OUT/attempt-<FLATJOB_ATTEMPT>-rank-<RANK>.json: its rank, the
world size, the gloo all-reduce sum (every rank adds rank + 1), its arguments and the env
the test looks at.  Options by env:
- E2E_KILL_RANK=N: in attempt 1, rank N kills itself with SIGKILL once the group has formed
  (then the others' all-reduce fails at once; a rank dying before it joins would leave them
  waiting out gloo's 30-minute timeout, in a cluster as here);
- E2E_SLEEP=1: every rank just sleeps (no torch), for tests that stop the job from outside.
"""

import os
import signal
import sys
import time

from outbox import record  # beside this script, which Python puts first on sys.path

SEEN = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "POD_NAME", "POD_IP", "HOSTNAME", "HOSTILE",
        "FROM_LAUNCHER", "FLATJOB_ATTEMPT", "FLATJOB_RESTART_COUNT", "FLATJOB_RESUMING")


def main() -> None:
    rank, attempt = os.environ.get("RANK", "?"), os.environ.get("FLATJOB_ATTEMPT", "?")
    env = {k: os.environ.get(k) for k in SEEN}
    if os.environ.get("E2E_SLEEP") == "1":
        record(f"sleeping-{attempt}-{rank}.json", {"env": env, "pid": os.getpid()})
        while True:
            time.sleep(1)
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    if attempt == "1" and os.environ.get("E2E_KILL_RANK") == rank:
        record(f"killed-{attempt}-{rank}.json", {"env": env})
        os.kill(os.getpid(), signal.SIGKILL)
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    seen = {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "sum": t.item(), "argv": sys.argv[1:], "env": env}
    record(f"attempt-{attempt}-rank-{dist.get_rank()}.json", seen)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
