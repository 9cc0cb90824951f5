#!/usr/bin/python3
"""DeepSpeed's elastic batch computation written in Python from ../shared/DEEPSPEED-SEMANTICS.md
section 14 (Python's own integer, float and floor-division semantics, which the C++ port must
reproduce), for test_elastic_batch: reads one JSON case per line
  {"elasticity": {...}, "world_size": W, "env_world_size": "8" | null}
and prints one JSON line per case: {"final": F, "valid": [...], "micro": M | null} or
{"error": "<kind>"}.
"""
import json
import math
import sys

HCN = [1, 2, 4, 6, 12, 24, 36, 48, 60, 120, 180, 240, 360, 720, 840, 1260, 1680, 2520, 5040,
       7560, 10080, 15120, 20160, 25200, 27720, 45360, 50400, 55440, 83160, 110880, 166320,
       221760, 277200, 332640, 498960, 554400, 665280, 720720]


class Failure(Exception):
    pass


def valid_gpus(bs, micro, min_gpus, max_gpus):
    out = set()
    for mb in micro:
        if bs % mb != 0:
            continue
        q = bs // mb
        if min_gpus <= q <= max_gpus:
            out.add(q)
        for i in range(1, q // 2 + 1):
            if q % i == 0 and min_gpus <= i <= max_gpus:
                out.add(i)
    return sorted(out)


def v01(micro, max_bs, min_gpus, max_gpus, prefer_larger):
    min_gpus = min_gpus or 1
    max_gpus = max_gpus or max_bs // min(micro)
    if any(mb > max_bs for mb in micro):
        raise Failure("micro > max")
    lcm = 1
    for mb in micro:
        lcm = lcm * mb // math.gcd(lcm, mb)
    candidates = set()
    for base in list(micro) + [lcm]:
        if base > max_bs:
            continue
        if base == max_bs:
            candidates.add(base)
        else:
            v = max_bs // base
            h = 720720 if v >= 720720 else max(x for x in HCN if x <= v)
            candidates.add(h * base)
    best = (0, min(micro), None)
    for bs in candidates:
        vg = valid_gpus(bs, micro, min_gpus, max_gpus)
        if len(vg) > best[0] or (len(vg) == best[0] and
                                 (bs > best[1] if prefer_larger else bs < best[1])):
            best = (len(vg), bs, vg)
    return best[1], best[2]


def compute(e, world_size, env):
    if not e.get("enabled"):
        raise Failure("disabled")
    micro = e["micro_batch_sizes"]
    max_bs = e["max_train_batch_size"]
    min_gpus, max_gpus = e.get("min_gpus", 1), e.get("max_gpus", 10000)
    prefer = e.get("prefer_larger_batch", True)
    version = float(e.get("version", 0.2))
    ngpn, mp = e.get("num_gpus_per_node", 1), e.get("model_parallel_size", 1)
    if version == 0.1:
        fbs, valid = v01(micro, max_bs, min_gpus, max_gpus, prefer)
    else:
        if ngpn % mp != 0:
            raise Failure("ngpn % mp")
        if world_size != 0:
            current = world_size
        elif env is not None and env.isnumeric():
            current = int(env)
        else:
            raise Failure("needs WORLD_SIZE")
        dp_per_node = ngpn // mp
        fbs, valid_nodes = v01(micro, int(max_bs / dp_per_node), int(min_gpus / ngpn),
                               int(max_gpus / ngpn), prefer)
        if valid_nodes is None:
            raise Failure("None valid")
        fbs = int(fbs) * dp_per_node
        valid = [n * dp_per_node for n in valid_nodes]
        if current // mp not in valid:
            cur_dp = (current / ngpn) * dp_per_node
            cands = [math.floor(max_bs / (mb * cur_dp)) * (mb * cur_dp) for mb in micro]
            fbs = max(cands) if prefer else min(cands)
            valid = [int(cur_dp)]
    fbs = int(fbs)
    if world_size > 0:
        if valid is None:
            raise Failure("None valid")
        if world_size not in valid:
            raise Failure("incompatible world size")
        for mb in sorted(set(micro), reverse=True):
            if (fbs // world_size) % mb == 0:
                return fbs, valid, mb
        raise Failure("no divisible micro")
    return fbs, valid, None


def main():
    for line in sys.stdin:
        case = json.loads(line)
        try:
            fbs, valid, micro = compute(case["elasticity"], case["world_size"],
                                        case.get("env_world_size"))
            print(json.dumps({"final": fbs, "valid": valid, "micro": micro}))
        except Failure as f:
            print(json.dumps({"error": str(f)}))


if __name__ == "__main__":
    main()
