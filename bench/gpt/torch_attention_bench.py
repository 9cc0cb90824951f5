#!/usr/bin/python3
"""bench_attention's baseline: PyTorch's best causal attention on this machine, forward and
backward, fp32: scaled_dot_product_attention(is_causal=True) where PyTorch has it (>= 2.0), else the
unfused matmul, masked softmax, matmul. Usage: torch_attention_bench.py SEQ HEADS HEAD_DIM BATCH
THREADS REPS. Prints one JSON line: {"seconds": best forward + backward, "kernel": ...}, or
{"seconds": null, "why": ...} where the [T, T] tensors the unfused path needs do not fit in the
memory available."""
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F


def available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    seq, heads, head_dim, batch, threads, reps = (int(a) for a in sys.argv[1:7])
    torch.set_num_threads(threads)
    fused = hasattr(F, "scaled_dot_product_attention")
    # Unfused: the scores, the masked scores, the probabilities and their gradients, each [B, H, T, T].
    need = 0 if fused else 5 * batch * heads * seq * seq * 4
    if need > 0.8 * available_bytes():
        print(json.dumps({"seconds": None, "why": "the unfused attention needs %.1f GB of [T, T] tensors"
                          % (need / 1e9)}))
        return
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(batch, heads, seq, head_dim, generator=g, requires_grad=True)
               for _ in range(3))
    dout = torch.randn(batch, heads, seq, head_dim, generator=g)
    mask = None if fused else torch.ones(seq, seq, dtype=torch.bool).triu(1)
    scale = 1.0 / math.sqrt(head_dim)

    def attention():
        if fused:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        scores = (q @ k.transpose(-2, -1)) * scale
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v

    best = math.inf
    for _ in range(reps):
        start = time.perf_counter()
        attention().backward(dout)
        best = min(best, time.perf_counter() - start)
        q.grad = k.grad = v.grad = None
    print(json.dumps({"seconds": best, "kernel": "sdpa" if fused else "unfused",
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
