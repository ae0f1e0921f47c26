"""A CPU smoke test for `flatjob run-local`: every rank adds rank + 1 with gloo and prints the sum."""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank {rank}/{world} on {os.environ.get('HOSTNAME')}: sum {t.item():g} (expected {world * (world + 1) // 2})")
dist.destroy_process_group()
