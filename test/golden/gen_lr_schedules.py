#!/usr/bin/python3
"""Golden values for test/test_lr_schedules.cc: DeepSpeed's own lr_schedules.py, stepped the way
DeepSpeed's engine steps it (optimizer update first, then scheduler.step()), on a dummy torch Adam.

Usage: /usr/bin/python3 test/golden/gen_lr_schedules.py DEEPSPEED_CHECKOUT [OUT_JSON]
  DEEPSPEED_CHECKOUT: a DeepSpeed source tree (only deepspeed/runtime/lr_schedules.py is loaded;
  its `deepspeed.utils.logger` import is stubbed, so DeepSpeed need not be installed).
  OUT_JSON defaults to lr_schedules.json next to this script.

For each case it records the lr (and beta1, when the schedule cycles momentum) that the optimizer
holds at each update 0..steps-1, or "error" when DeepSpeed's constructor raises. Python's json
writes doubles with repr(), so the C++ test can compare them exactly.
"""
import importlib.util
import json
import logging
import os
import subprocess
import sys
import types

import torch

OPTIMIZER_LR = 0.01
OPTIMIZER_BETAS = (0.9, 0.999)

# (name, scheduler block as it appears in ds_config.json, optimizer updates to record)
CASES = [
    # WarmupLR
    ("warmup_lr_defaults_max_is_optimizer_lr", {"type": "WarmupLR", "params": {}}, 6),
    ("warmup_lr_log_10", {"type": "WarmupLR", "params": {
        "warmup_min_lr": 0.001, "warmup_max_lr": 0.011, "warmup_num_steps": 10}}, 14),
    ("warmup_lr_linear_10", {"type": "WarmupLR", "params": {
        "warmup_min_lr": 0.001, "warmup_max_lr": 0.011, "warmup_num_steps": 10,
        "warmup_type": "linear"}}, 14),
    ("warmup_lr_log_1", {"type": "WarmupLR", "params": {
        "warmup_max_lr": 1.0, "warmup_num_steps": 1}}, 5),
    ("warmup_lr_linear_1", {"type": "WarmupLR", "params": {
        "warmup_max_lr": 1.0, "warmup_num_steps": 1, "warmup_type": "linear"}}, 5),
    ("warmup_lr_log_2", {"type": "WarmupLR", "params": {
        "warmup_min_lr": 0.1, "warmup_max_lr": 0.3, "warmup_num_steps": 2}}, 5),
    ("warmup_lr_linear_2", {"type": "WarmupLR", "params": {
        "warmup_min_lr": 0.1, "warmup_max_lr": 0.3, "warmup_num_steps": 2,
        "warmup_type": "linear"}}, 5),
    ("warmup_lr_0_rejected", {"type": "WarmupLR", "params": {"warmup_num_steps": 0}}, 3),
    # last_batch_iteration != -1: the constructor leaves the optimizer's lr alone for update 0.
    ("warmup_lr_from_iteration_5", {"type": "WarmupLR", "params": {
        "warmup_max_lr": 0.02, "warmup_num_steps": 10, "warmup_type": "linear",
        "last_batch_iteration": 5}}, 8),
    # WarmupDecayLR
    ("warmup_decay_log_5_of_20", {"type": "WarmupDecayLR", "params": {
        "total_num_steps": 20, "warmup_min_lr": 0.0005, "warmup_max_lr": 0.005,
        "warmup_num_steps": 5}}, 25),
    ("warmup_decay_linear_10_of_50", {"type": "WarmupDecayLR", "params": {
        "total_num_steps": 50, "warmup_max_lr": 0.003, "warmup_num_steps": 10,
        "warmup_type": "linear"}}, 55),
    ("warmup_decay_total_below_warmup", {"type": "WarmupDecayLR", "params": {
        "total_num_steps": 3, "warmup_max_lr": 0.004, "warmup_num_steps": 5}}, 9),
    ("warmup_decay_warmup_1", {"type": "WarmupDecayLR", "params": {
        "total_num_steps": 10, "warmup_num_steps": 1, "warmup_type": "linear"}}, 12),
    ("warmup_decay_defaults", {"type": "WarmupDecayLR", "params": {"total_num_steps": 1000}}, 6),
    ("warmup_decay_0_rejected", {"type": "WarmupDecayLR", "params": {
        "total_num_steps": 10, "warmup_num_steps": 0}}, 3),
    # WarmupCosineLR (scales the optimizer's own lr)
    ("warmup_cosine_log_5_of_20", {"type": "WarmupCosineLR", "params": {
        "total_num_steps": 20, "warmup_min_ratio": 0.1, "warmup_num_steps": 5,
        "cos_min_ratio": 0.05}}, 25),
    ("warmup_cosine_linear_10_of_40", {"type": "WarmupCosineLR", "params": {
        "total_num_steps": 40, "warmup_num_steps": 10, "warmup_type": "linear"}}, 45),
    ("warmup_cosine_total_equals_warmup", {"type": "WarmupCosineLR", "params": {
        "total_num_steps": 4, "warmup_num_steps": 4, "warmup_type": "linear"}}, 8),
    ("warmup_cosine_warmup_1", {"type": "WarmupCosineLR", "params": {
        "total_num_steps": 6, "warmup_num_steps": 1, "cos_min_ratio": 0.2}}, 9),
    ("warmup_cosine_warmup_2", {"type": "WarmupCosineLR", "params": {
        "total_num_steps": 6, "warmup_num_steps": 2, "warmup_min_ratio": 0.5}}, 9),
    ("warmup_cosine_defaults", {"type": "WarmupCosineLR", "params": {"total_num_steps": 3000}}, 6),
    ("warmup_cosine_0_rejected", {"type": "WarmupCosineLR", "params": {
        "total_num_steps": 10, "warmup_num_steps": 0}}, 3),
    # OneCycle
    ("one_cycle_symmetric_no_decay", {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.001, "cycle_max_lr": 0.01, "cycle_first_step_size": 4}}, 14),
    ("one_cycle_asymmetric_with_decay", {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.002, "cycle_max_lr": 0.02, "cycle_first_step_size": 3,
        "cycle_second_step_size": 5, "decay_step_size": 2, "decay_lr_rate": 0.5,
        "cycle_min_mom": 0.85, "cycle_max_mom": 0.95, "decay_mom_rate": 0.01}}, 20),
    ("one_cycle_decay_lr_only", {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.001, "cycle_max_lr": 0.004, "cycle_first_step_size": 2,
        "decay_step_size": 3, "decay_lr_rate": 0.25}}, 14),
    ("one_cycle_no_momentum", {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.001, "cycle_max_lr": 0.01, "cycle_first_step_size": 5,
        "cycle_second_step_size": 3, "decay_step_size": 1, "decay_lr_rate": 0.1,
        "cycle_momentum": False}}, 14),
    ("one_cycle_stairs", {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.001, "cycle_max_lr": 0.007, "cycle_first_step_size": 4,
        "cycle_second_step_size": 6, "cycle_first_stair_count": 2,
        "cycle_second_stair_count": 3}}, 14),
    ("one_cycle_stairs_second_defaults_to_first", {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.0, "cycle_max_lr": 0.1, "cycle_first_step_size": 6,
        "cycle_first_stair_count": 3}}, 15),
    ("one_cycle_zero_second_half", {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.001, "cycle_max_lr": 0.002, "cycle_first_step_size": 3,
        "cycle_second_step_size": 0, "decay_step_size": 2, "decay_lr_rate": 1.0}}, 8),
    ("one_cycle_first_step_0_rejected", {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.001, "cycle_max_lr": 0.002, "cycle_first_step_size": 0}}, 3),
    # LRRangeTest
    ("lr_range_test_defaults", {"type": "LRRangeTest", "params": {}}, 6),
    ("lr_range_test_continuous", {"type": "LRRangeTest", "params": {
        "lr_range_test_min_lr": 0.002, "lr_range_test_step_size": 3,
        "lr_range_test_step_rate": 0.5}}, 12),
    ("lr_range_test_staircase", {"type": "LRRangeTest", "params": {
        "lr_range_test_min_lr": 0.002, "lr_range_test_step_size": 3,
        "lr_range_test_step_rate": 0.5, "lr_range_test_staircase": True}}, 12),
    ("lr_range_test_step_size_0_rejected", {"type": "LRRangeTest", "params": {
        "lr_range_test_step_size": 0}}, 3),
]


def loadLrSchedules(checkout):
    path = os.path.join(checkout, "deepspeed", "runtime", "lr_schedules.py")
    # The file imports `logger` from deepspeed.utils; stub it so DeepSpeed need not be installed.
    deepspeed = types.ModuleType("deepspeed")
    utils = types.ModuleType("deepspeed.utils")
    utils.logger = logging.getLogger("deepspeed-stub")
    utils.logger.disabled = True
    deepspeed.utils = utils
    sys.modules.setdefault("deepspeed", deepspeed)
    sys.modules.setdefault("deepspeed.utils", utils)
    spec = importlib.util.spec_from_file_location("lr_schedules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def checkoutRevision(checkout):
    try:
        return subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(lr_schedules, block, steps):
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([weight], lr=OPTIMIZER_LR, betas=OPTIMIZER_BETAS)
    # As DeepSpeed's engine._scheduler_from_config: scheduler(optimizer, **params).
    try:
        scheduler = getattr(lr_schedules, block["type"])(optimizer, **block["params"])
    except ValueError as e:
        return {"error": str(e)}
    cycles = bool(getattr(scheduler, "cycle_momentum", False))
    lrs, momentums = [], []
    for _ in range(steps):
        group = optimizer.param_groups[0]
        lrs.append(float(group["lr"]))  # what optimizer update i uses
        momentums.append(float(group["betas"][0]))
        # optimizer.step() would run here; the engine steps the scheduler after it.
        scheduler.step()
    out = {"lr": lrs}
    if cycles:
        out["momentum"] = momentums
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    checkout = sys.argv[1]
    out_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "lr_schedules.json")
    lr_schedules, _ = loadLrSchedules(checkout)
    cases = []
    for name, block, steps in CASES:
        case = {"name": name, "scheduler": block, "optimizer_lr": OPTIMIZER_LR,
                "optimizer_momentum": OPTIMIZER_BETAS[0], "steps": steps}
        case.update(run(lr_schedules, block, steps))
        cases.append(case)
    document = {
        "generator": "test/golden/gen_lr_schedules.py",
        "deepspeed_revision": checkoutRevision(checkout),
        "torch": torch.__version__,
        "cases": cases,
    }
    with open(out_path, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")
    print(f"{out_path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
