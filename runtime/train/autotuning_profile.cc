#include "runtime/train/autotuning_profile.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/process_memory.h"
#include "runtime/checkpoint/checkpoint_files.h"

namespace ds::runtime {

void applyAutotuningProfile(const AutotuningConfig& autotuning, LoopSettings& settings) {
  settings.lastStep = autotuning.endProfileStep;
  settings.profileFrom = autotuning.startProfileStep;
  settings.profileTo = autotuning.endProfileStep;
  settings.evalInterval = 0;
  settings.saveInterval = 0;
  settings.saveAt = nullptr;
  settings.saveDir.clear();
  settings.exitInterval = 0;
}

void writeAutotuningMetrics(Communicator& world, const DeepSpeedConfig& config,
                            const TrainResult& result, double flopsPerSample) {
  // MiB in a float: exact enough for a memory figure, and one element to reduce.
  float peakMiB = static_cast<float>(static_cast<double>(processMemory().peakRssBytes) / 1048576.0);
  world.allReduce(&peakMiB, 1, ReduceOp::Max);
  if (world.rank() != 0) return;
  const AutotuningConfig& a = config.autotuning;
  if (!(result.profiledStepSeconds > 0))
    throw Error("autotuning: the job ended after " + std::to_string(result.steps) +
                " steps, before the profile steps " + std::to_string(a.startProfileStep + 1) +
                ".." + std::to_string(a.endProfileStep) + " were timed");
  const double seconds = result.profiledStepSeconds;
  const double samples = static_cast<double>(config.batch.trainBatchSize);
  const nlohmann::ordered_json metrics = {
      {"latency", seconds * 1e6},
      {"throughput", samples / seconds},
      {"FLOPS_per_gpu", flopsPerSample * samples / seconds / world.size()},
      {"rank", 0},
      {"step_seconds", seconds},
      {"peak_rss_bytes", static_cast<double>(peakMiB) * 1048576.0}};
  writeTextAtomically(a.metricPath, metrics.dump(2) + "\n");
  std::printf(
      "autotuning: steps %lld-%lld took %.4f s each (%.2f samples/s); metrics written "
      "to %s\n",
      static_cast<long long>(a.startProfileStep + 1), static_cast<long long>(a.endProfileStep),
      seconds, samples / seconds, a.metricPath.c_str());
}

}  // namespace ds::runtime
