"""An elastic torchrun worker for run-local's end-to-end tests: one node is lost partway.

Every round of the rendezvous records its world size in $E2E_OUT/round-<restart>-rank-<rank>.json.
In the first round, the worker on the pod named by $E2E_LOSE kills its own torchrun agent
(SIGKILL, as when a node disappears) after a few all-reduces; the survivors' collective
fails, their agents re-form the group without it, and the job finishes with fewer nodes.
"""

import os
import signal
import time

import torch
import torch.distributed as dist
from outbox import record  # beside this script, which Python puts first on sys.path

STEPS = 4


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    pod = os.environ.get("POD_NAME", "")
    record(f"round-{restart}-rank-{rank}.json", {"world_size": world, "pod": pod})
    doomed = restart == 0 and pod == os.environ.get("E2E_LOSE")
    total = 0.0
    for step in range(STEPS):
        if doomed and step == 2:
            os.kill(os.getppid(), signal.SIGKILL)  # the node's agent dies, as with a lost node
            os._exit(137)
        t = torch.tensor([1.0])
        dist.all_reduce(t)
        total += t.item()
        time.sleep(0.2)
    record(f"done-rank-{rank}.json", {"world_size": world, "restart": restart, "pod": pod, "total": total})
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
