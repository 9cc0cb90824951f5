// bench_zero: step time and per-rank memory of the ZeRO engine for stages 0-3 at 1, 2 and 4 ranks
// on an MLP of ~46M parameters (ranks are threads over the in-process shared-memory
// communicator, so the numbers are the engine's own, not the network's). For each stage the
// run with overlap_comm is printed beside the same run without it, and beside the sum of its
// compute and communication time: overlap shows as a step shorter than that sum.
//   bench_zero [--steps N] [--ranks LIST] [--hidden H]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/bench_training.h"
#include "common/guarded_main.h"
#include "runtime/comm/comms_logger.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/mlp.h"
#include "runtime/config/model_state_estimate.h"

using namespace ds::runtime;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  double stepMs = 0, commMs = 0;
  MemoryUsage memory;
};

Result run(int world, int stage, bool overlap, int steps, int hidden) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true},
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
      "zero_optimization": {"stage": )" +
                           std::to_string(stage) + R"(, "overlap_comm": )" +
                           (overlap ? "true" : "false") +
                           R"(, "reduce_bucket_size": 5000000, "allgather_bucket_size": 50000000,
      "stage3_param_persistence_threshold": 10000}})";
  auto group = ShmCommunicator::inProcessGroup(world);
  std::vector<Result> results(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      const auto config = parseDeepSpeedConfig(json, world, "bench");
      CommsLoggerConfig logConfig;
      logConfig.enabled = true;
      CommsLogger logger(logConfig, nullptr);
      LoggingCommunicator comm(group[r], logger);
      Mlp model({1024, hidden, hidden, hidden, 1024});
      TeacherTask task(1024, 1024, 1);
      Engine engine(model, config, comm, 1);
      const auto batch = task.batch(r * 2, 2);
      double best = 1e30;
      ds::bench::StepProbe probe;
      probe.afterStep = [&](const ds::bench::StepTiming& step) {
        if (step.step > 0) best = std::min(best, step.seconds * 1e3);  // step 0 warms up
      };
      // The loop's stop vote goes over the unlogged communicator: it is not the engine's traffic.
      ds::bench::trainSteps(engine, group[r], batch, steps + 1, probe);
      double commSeconds = 0;
      for (const auto& stat : logger.summary()) commSeconds += stat.totalSeconds;
      results[r] = {best, commSeconds * 1e3 / (steps + 1), engine.memory()};
    });
  for (auto& t : threads) t.join();
  return results[0];
}

}  // namespace

int run(int argc, char** argv) {
  int steps = 3, hidden = 4096;
  std::vector<int> worlds = {1, 2, 4};
  CLI::App app{
      "bench_zero: step time and per-rank memory of ZeRO stages 0-3, with and without "
      "overlap_comm"};
  ds::bench::showDefaults(app);
  app.add_option("--steps", steps, "timed steps (the best is kept)")->check(CLI::Range(1, 1000));
  app.add_option("--ranks", worlds, "world sizes (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--hidden", hidden, "MLP hidden width")->check(CLI::Range(1, 1 << 16));
  if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
  const double psi = Mlp({1024, hidden, hidden, hidden, 1024}).parameterCount();
  std::printf(
      "bench_zero: MLP 1024-%d-%d-%d-1024 = %.1fM parameters, bf16, AdamW, micro-batch 2,"
      " best of %d steps; %u hardware threads\n",
      hidden, hidden, hidden, psi / 1e6, steps, std::thread::hardware_concurrency());
  std::printf("%5s %5s | %10s %10s %10s %10s | %12s %12s %8s\n", "ranks", "stage", "step ms",
              "comm ms", "overlap ms", "saved", "state MiB", "formula MiB", "buffers");
  for (int world : worlds)
    for (int stage = 0; stage <= 3; ++stage) {
      const Result plain = run(world, stage, false, steps, hidden);
      const Result overlapped = world > 1 ? run(world, stage, true, steps, hidden) : plain;
      const double formula =
          estimateModelState(stage, ds::DType::BF16, ds::DType::BF16, psi, world, 8).total();
      // saved: how much of the communication time the overlapped step hid.
      const double saved = plain.stepMs - overlapped.stepMs;
      std::printf("%5d %5d | %10.1f %10.1f %10.1f %9.0f%% | %12.1f %12.1f %8.1f\n", world, stage,
                  plain.stepMs, plain.commMs, overlapped.stepMs,
                  plain.commMs > 0 ? 100.0 * saved / plain.commMs : 0.0,
                  plain.memory.modelState() / 1048576.0, formula / 1048576.0,
                  plain.memory.buffers / 1048576.0);
      std::fflush(stdout);
    }
  return 0;
}

int main(int argc, char** argv) {
  return ds::guardedMain("bench_zero", [&] { return run(argc, argv); });
}
