// ds-launch --autotuning tune|run: the job's config and its autotuning block, the space
// (tuning_space.h), each candidate checked by the launcher's own planning before anything runs
// (the config rules, the memory pre-flight: a candidate that cannot fit is never started), the
// order and the stopping from the tuner (tuner.h), each experiment a real launch
// (experiment_runner.h), and the results: results_dir/<experiment>/ (ds_config.json, cmd.txt,
// exp.json, stdout.log, stderr.log, metrics.json, logs/), exps_dir/<experiment>.json,
// results_dir/summary.txt and summary.json, results_dir/ds_config_optimal.json and
// cmd_optimal.txt. `run` then trains with the winner. --dry-run prints the pruned space and the
// predicted order instead.
#pragma once

#include "launcher/launch_options.h"

namespace ds::launcher {

// Returns ds-launch's exit status: 0 when the tuning found a winner (and, with run, the job
// trained), 1 when no candidate ran, 130 when interrupted, 2 for invalid input (thrown).
int runAutotuning(CommandLine& line);

}  // namespace ds::launcher
