// A trainer's side of DeepSpeed's autotuning contract: with autotuning.metric_path set (the
// autotuner sets it in each experiment's config) the job runs end_profile_step steps, no
// evaluation, checkpoint or sample, times the steps after start_profile_step, and rank 0 writes
// the metric file DeepSpeed's engine writes (_autotuning_exit): latency in microseconds per step,
// throughput in samples/s, FLOPS_per_gpu, rank; and beside them the step in seconds and the
// largest peak resident memory of any rank, which the autotuner sets against its prediction.
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/config/ds_config.h"
#include "runtime/train/train_result.h"
#include "runtime/train/training_loop.h"

namespace ds::runtime {

inline bool profilingForAutotuner(const DeepSpeedConfig& config) {
  return !config.autotuning.metricPath.empty();
}

// The loop of a profile run: end_profile_step steps, the steps after start_profile_step timed,
// nothing evaluated, saved or loaded.
void applyAutotuningProfile(const AutotuningConfig& autotuning, LoopSettings& settings);

// Collective (every rank: the peak memory is the largest of any rank's); rank 0 writes the file
// atomically. flopsPerSample: the model's training flops for one sample, all of the model.
void writeAutotuningMetrics(Communicator& world, const DeepSpeedConfig& config,
                            const TrainResult& result, double flopsPerSample);

}  // namespace ds::runtime
