"""A CPU smoke test for `flatjob run-local` (torchrun and the SSH-launched kinds): one gloo all-reduce.

Every rank adds rank + 1 and prints `rank=R world=W allreduce=<sum>`; the sum is
W * (W + 1) / 2 when every rank joined.  deepspeed passes --local_rank, which is accepted.
"""

import argparse

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=None)  # deepspeed's launcher adds it
parser.parse_known_args()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
# One write per line: the ranks of a node share the launcher's pipe, and print() writes the
# text and its newline separately, so two ranks' lines could interleave.
print(f"rank={rank} world={world} allreduce={t.item():g}\n", end="", flush=True)
dist.destroy_process_group()
