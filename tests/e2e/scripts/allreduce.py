"""gloo all-reduce for run-local's end-to-end tests: every rank adds rank + 1.

Writes what it saw (its rank, the world size, the sum, the pod it ran in) to
$E2E_OUT/rank-<rank>.json, so the test can check the process group torchrun or the plain
DDP environment formed.  Optional: $E2E_STEPS all-reduces in a row (default 1).
"""

import json
import os
import time

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = None
    for _ in range(int(os.environ.get("E2E_STEPS", "1"))):
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)
        total = t.item()
        time.sleep(float(os.environ.get("E2E_STEP_SECONDS", "0")))
    seen = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "MASTER_ADDR", "POD_NAME", "POD_IP", "HOSTNAME", "FLATJOB_ATTEMPT")}
    out = os.path.join(os.environ["E2E_OUT"], f"rank-{rank}.json")
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"rank": rank, "world_size": world, "sum": total, "env": seen}, f)
    os.replace(out + ".tmp", out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
