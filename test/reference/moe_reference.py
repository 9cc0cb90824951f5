#!/usr/bin/python3
"""Mixture-of-experts routing written independently in PyTorch (float64), for test_moe and the
GPT reference (gpt_reference.py imports it):
- NeoX's dropless routers (megatron/model/router.py): topk (softmax, the k largest) and sinkhorn
  (training: the k largest of sinkhorn(exp(logits)), at most 3 iterations, tolerance 1e-4,
  weighted by sigmoid (k = 1) or softmax (k > 1) of the logits; evaluation: the k largest of
  those weights);
- DeepSpeed-MoE's top1gating and top2gating (deepspeed/moe/sharded_moe.py): capacity, the
  load-balancing loss l_aux, random token selection, RSample and top-2's sampled second expert.
Random draws come from the caller (the C++ side's RoutingNoise), so both sides route alike.
Without random token selection, top-1 keeps each expert's first tokens (DeepSpeed's topk over a
0/1 mask leaves the choice open; the C++ side keeps the first).
Usage as a script: moe_reference.py IN.json OUT.json, for one routing and its logits' gradient.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F


def sinkhorn(cost, tol=1e-4, max_iter=3):
    cost = torch.exp(cost)
    d0 = torch.ones(cost.size(0), dtype=cost.dtype)
    d1 = 1 / (cost.size(1) * torch.sum(cost, 0))
    eps = 1e-8
    d1_old = d1
    for _ in range(max_iter):
        d0 = (1 / d0.size(0)) * 1 / (torch.sum(d1 * cost, 1) + eps)
        d1 = (1 / d1.size(0)) * 1 / (torch.sum(d0.unsqueeze(1) * cost, 0) + eps)
        error = torch.mean(torch.abs(d1_old - d1))
        d1_old = d1
        if error < tol:
            break
    return d1 * cost * d0.unsqueeze(1)


def route_dropless(logits, k, router, training):
    """(weights [T, k], experts [T, k])"""
    if router == "sinkhorn":
        act = torch.sigmoid(logits) if k == 1 else torch.softmax(logits, dim=-1)
        if training:
            with torch.no_grad():
                _, idx = torch.topk(sinkhorn(logits.detach()), k=k, dim=1)
            return torch.gather(act, 1, idx), idx
        return torch.topk(act, k=k, dim=1)
    probs = torch.softmax(logits, dim=-1)
    return torch.topk(probs, k=k, dim=1)


def capacity(tokens, experts, factor, min_capacity):
    return max(int(math.ceil(tokens / experts * factor)), min_capacity)


def gate_deepspeed(logits, k, factor, min_capacity, drop, rts=None, rsample=None, second=None):
    """dict: weights [T, k] (0 where dropped), experts [T, k] (-1 where dropped), l_aux,
    capacity, counts, dropped. rts, rsample, second: [T, E] draws (uniform, Gumbel, Gumbel) or
    None."""
    T, E = logits.shape
    gates = torch.softmax(logits, dim=1)
    me = gates.mean(0)
    if k == 1:
        pick = logits + rsample if rsample is not None else gates
        idx1 = torch.argmax(pick, dim=1)
        mask1 = F.one_hot(idx1, E).double()
        counts = mask1.sum(0)
        l_aux = (me * mask1.mean(0)).sum() * E
        C = capacity(T, E, factor, min_capacity) if drop else min(int(counts.max()), T)
        order = rts if rts is not None else (T - torch.arange(T, dtype=torch.float64))[:, None]
        score = mask1 * order
        keep = torch.zeros_like(mask1)
        for e in range(E):
            chosen = torch.nonzero(mask1[:, e]).flatten()
            best = chosen[torch.argsort(-score[chosen, e], stable=True)][:C]
            keep[best, e] = 1.0
        mask1 = mask1 * keep
        kept = mask1.sum(1) > 0
        weights = (gates * mask1).sum(1, keepdim=True)
        experts = torch.where(kept, idx1, torch.full_like(idx1, -1))[:, None]
        dropped = int(T - kept.sum())
        return dict(weights=weights, experts=experts, l_aux=l_aux, capacity=C,
                    counts=counts, dropped=dropped)
    idx1 = torch.argmax(gates, dim=1)
    mask1 = F.one_hot(idx1, E).double()
    noisy = logits + second if second is not None else logits
    idx2 = torch.argmax(noisy.masked_fill(mask1.bool(), float("-inf")), dim=1)
    mask2 = F.one_hot(idx2, E).double()
    loc1 = torch.cumsum(mask1, 0) - 1
    loc2 = torch.cumsum(mask2, 0) - 1 + mask1.sum(0, keepdim=True)
    l_aux = torch.mean(me * mask1.mean(0)) * E * E
    counts = (mask1 + mask2).sum(0)
    if drop:
        C = capacity(T, E, 2 * factor, min_capacity)
        mask1 = mask1 * (loc1 < C).double()
        mask2 = mask2 * (loc2 < C).double()
    else:
        C = int(counts.max())
    g1 = (gates * mask1).sum(1)
    g2 = (gates * mask2).sum(1)
    denom = torch.clamp(g1 + g2, min=torch.finfo(torch.float32).eps)
    weights = torch.stack([g1 / denom, g2 / denom], dim=1)
    k1, k2 = mask1.sum(1) > 0, mask2.sum(1) > 0
    experts = torch.stack([torch.where(k1, idx1, torch.full_like(idx1, -1)),
                           torch.where(k2, idx2, torch.full_like(idx2, -1))], dim=1)
    dropped = int(2 * T - k1.sum() - k2.sum())
    return dict(weights=weights, experts=experts, l_aux=l_aux, capacity=C, counts=counts,
                dropped=dropped)


def draws(spec, name, T, E):
    return torch.tensor(spec[name], dtype=torch.float64).view(T, E) if name in spec else None


def main():
    spec = json.load(open(sys.argv[1]))
    T, E, k = spec["tokens"], spec["experts"], spec["k"]
    logits = torch.tensor(spec["logits"], dtype=torch.float64).view(T, E).requires_grad_(True)
    dweight = torch.tensor(spec["dweight"], dtype=torch.float64).view(T, k)
    out = {}
    if spec["kind"] == "dropless":
        weights, experts = route_dropless(logits, k, spec["router"], spec["training"])
        loss = (weights * dweight).sum()
        out["capacity"], out["dropped"], out["l_aux"] = 0, 0, 0.0
        out["counts"] = torch.bincount(experts.flatten(), minlength=E).tolist()
    else:
        g = gate_deepspeed(logits, k, spec["capacity_factor"], spec["min_capacity"],
                           spec["drop_tokens"], draws(spec, "rts", T, E),
                           draws(spec, "rsample", T, E), draws(spec, "second", T, E))
        weights, experts = g["weights"], g["experts"]
        loss = (weights * dweight).sum() + spec["aux_grad"] * g["l_aux"]
        out["capacity"], out["dropped"], out["l_aux"] = g["capacity"], g["dropped"], g["l_aux"].item()
        out["counts"] = [int(v) for v in g["counts"].tolist()]
    loss.backward()
    out["experts"] = experts.flatten().tolist()
    out["weights"] = weights.detach().flatten().tolist()
    out["dlogits"] = logits.grad.flatten().tolist()
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
