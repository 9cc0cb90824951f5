#!/usr/bin/env python3
# PyTorch reference for test/test_optimizers.cc: runs torch.optim.Adam / AdamW / SGD on
# deterministic parameters and gradients and prints everything the C++ side needs as one JSON
# object on stdout. Input: the path of a JSON file {"cases": [case, ...]}, each case
#   {"name", "optimizer": "Adam"|"AdamW"|"SGD", "kwargs": {torch constructor args except lr and
#    weight_decay}, "weight_decay", "tensors": [{"numel", "decay"}], "seed",
#    "lr": [lr of each step], "momentum": [beta1 / SGD momentum of each step, or null]}
# Tensors marked decay go into a param group with the case's weight_decay, the others into a group
# with weight_decay 0 (how DeepSpeed users exclude biases). Output per case: the flat initial
# params, the flat gradients of each step and the flat final params, in tensor order.
# Run with the interpreter that has torch (here /usr/bin/python3, torch 1.13).
import json
import sys

import torch


def run_case(case):
    gen = torch.Generator().manual_seed(case["seed"])
    tensors = [torch.randn(t["numel"], generator=gen, dtype=torch.float32) for t in case["tensors"]]
    params = [torch.nn.Parameter(t.clone()) for t in tensors]
    decay = [p for p, t in zip(params, case["tensors"]) if t["decay"]]
    no_decay = [p for p, t in zip(params, case["tensors"]) if not t["decay"]]
    groups = [{"params": decay, "weight_decay": case["weight_decay"]},
              {"params": no_decay, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    cls = {"Adam": torch.optim.Adam, "AdamW": torch.optim.AdamW, "SGD": torch.optim.SGD}
    opt = cls[case["optimizer"]](groups, lr=case["lr"][0], **case["kwargs"])
    initial = torch.cat([p.detach().clone() for p in params]).tolist()
    grads = []
    for step, lr in enumerate(case["lr"]):
        momentum = case["momentum"][step] if case.get("momentum") else None
        for g in opt.param_groups:
            g["lr"] = lr
            if momentum is not None:
                # What DeepSpeed's OneCycle writes when it cycles momentum.
                if "betas" in g:
                    g["betas"] = (momentum, g["betas"][1])
                else:
                    g["momentum"] = momentum
        flat = []
        for p in params:
            p.grad = torch.randn(p.numel(), generator=gen, dtype=torch.float32) * 0.5
            flat.append(p.grad.clone())
        grads.append(torch.cat(flat).tolist())
        opt.step()
    final = torch.cat([p.detach().clone() for p in params]).tolist()
    return {"name": case["name"], "initial": initial, "grads": grads, "final": final}


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)["cases"]
    torch.set_num_threads(1)
    out = {"torch": torch.__version__, "cases": [run_case(c) for c in cases]}
    # repr of a float32 value widened to double round-trips exactly through JSON.
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
