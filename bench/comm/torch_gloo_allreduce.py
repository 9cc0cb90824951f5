# Baseline for bench_comm: PyTorch's gloo all_reduce between N local processes.
# Usage: python3 torch_gloo_allreduce.py RANKS BYTES ITERS PORT -> prints seconds per op (rank 0).
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, count, iters, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    data = torch.ones(count, dtype=torch.float32)
    for _ in range(2):
        dist.all_reduce(data)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(data)
    elapsed = (time.perf_counter() - start) / iters
    if rank == 0:
        print(f"{elapsed:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    world, size, iters, port = (int(a) for a in sys.argv[1:5])
    mp.spawn(run, args=(world, size // 4, iters, port), nprocs=world)
