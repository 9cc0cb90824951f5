#!/usr/bin/python3
"""bench_cuda_adam's baseline: torch.optim.AdamW(fused=True) stepping one fp32 tensor of N
parameters (default 100M) on the GPU, the best of 10 steps after two warm-ups, timed with CUDA
events, as bench_cuda_adam times ours. Usage: torch_adam_bench.py [N [JSON_FILE]]. Prints one
JSON line, also written to JSON_FILE: {"torch": "...", "params": N, "fused_ms": X}; exits 77
without a GPU."""
import json
import sys

try:
    import torch
except ImportError:
    torch = None


def main():
    if torch is None or not torch.cuda.is_available():
        print("SKIPPED: torch sees no GPU")
        sys.exit(77)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000_000
    param = torch.zeros(n, device="cuda", requires_grad=True)
    param.grad = torch.full((n,), 1e-3, device="cuda")
    opt = torch.optim.AdamW([param], lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            fused=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for rep in range(12):
        start.record()
        opt.step()
        end.record()
        end.synchronize()
        if rep >= 2:
            best = min(best, start.elapsed_time(end))
    line = json.dumps({"torch": torch.__version__, "params": n, "fused_ms": round(best, 3)})
    print(line)
    if len(sys.argv) > 2:
        open(sys.argv[2], "w").write(line + "\n")


if __name__ == "__main__":
    main()
