// bench_offload: the optimizer step with offload_optimizer on NVMe against its I/O lower bound,
// and with offload to CPU against no offload, for an MLP of a few hundred million parameters on
// one rank (fp32, AdamW, ZeRO 1, the state streamed in sub-groups through buffer_count slots). The
// bound is the bytes the step moves (each sub-group read, unless still in its slot, and written
// once; counted by the swapper) over fio's read and write bandwidth on the same directory,
// measured in the same run. Then parameter offload: a whole iteration (forward,
// backward, step) at ZeRO 3 with overlap_comm, with offload_param nvme against without and against
// its I/O: the bytes its swapper moved in that iteration at fio's bandwidth. The optimizer step
// with offload nvme is also timed with the swap file's checksums off, to show what they cost.
// Usage: bench_offload [--dir DIR] [--width N] [--layers N] [--sub-group N] [--steps N]
//                      [--zero3-only]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/bench_training.h"
#include "bench/fio_baseline.h"
#include "common/guarded_main.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/engine/engine.h"
#include "runtime/model/mlp.h"
#include "runtime/offload/swap_file.h"

namespace {

struct Options {
  std::string dir = std::filesystem::temp_directory_path().string();
  long width = 6144, layers = 6, subGroup = 25'000'000, steps = 3;
  bool zero3Only = false;
};

struct Timing {
  double stepMs = 1e300, iterationMs = 1e300;        // best of the steps
  double readBytes = 0, writtenBytes = 0;            // offload_optimizer nvme: the best step's I/O
  double paramReadBytes = 0, paramWrittenBytes = 0;  // offload_param nvme: the best iteration's
  ds::runtime::StepTimes parts;                      // the best iteration's, and its update's
  ds::runtime::OptimizerTimes update;
};

// Timings over `steps` iterations at `stage` with the given zero_optimization keys.
Timing measure(const Options& o, int stage, const std::string& offload, size_t& params,
               size_t& swapBytes) {
  std::vector<int> sizes(static_cast<size_t>(o.layers) + 1, static_cast<int>(o.width));
  ds::runtime::Mlp model(sizes);
  const std::string json =
      R"({"train_batch_size": 1, "wall_clock_breakdown": true, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
          "zero_optimization": {"stage": )" +
      std::to_string(stage) + R"(, "overlap_comm": true, "sub_group_size": )" +
      std::to_string(o.subGroup) + (offload.empty() ? "" : ", " + offload) + "}}";
  const auto config = ds::runtime::parseDeepSpeedConfig(json, 1, "bench_offload");
  auto group = ds::runtime::ShmCommunicator::inProcessGroup(1);
  ds::runtime::Engine engine(model, config, group[0], 1);
  params = engine.parameterCount();
  swapBytes = engine.optimizerSwapBytes() + engine.parameterSwapBytes();
  ds::runtime::Batch batch;
  batch.size = 1;
  batch.inputs.assign(static_cast<size_t>(o.width), 0.1f);
  batch.targets.assign(static_cast<size_t>(o.width), 0.2f);
  Timing best;
  ds::runtime::Engine::SwapTraffic before;
  ds::runtime::ZeroStage::OffloadStats paramsBefore;
  ds::bench::StepProbe probe;
  probe.beforeStep = [&](int64_t) {
    before = engine.optimizerSwapTraffic();
    paramsBefore = engine.parameterOffloadStats();
  };
  probe.afterStep = [&](const ds::bench::StepTiming& step) {
    const double ms = step.seconds * 1e3;
    if (ms < best.iterationMs) {
      best.iterationMs = ms;
      const ds::runtime::ZeroStage::OffloadStats paramsAfter = engine.parameterOffloadStats();
      best.paramReadBytes = static_cast<double>(paramsAfter.bytesRead - paramsBefore.bytesRead);
      best.paramWrittenBytes =
          static_cast<double>(paramsAfter.bytesWritten - paramsBefore.bytesWritten);
      best.parts = engine.lastStepTimes();
      best.update = engine.lastOptimizerTimes();
    }
    if (engine.lastStepTimes().stepMs < best.stepMs) {
      best.stepMs = engine.lastStepTimes().stepMs;
      const ds::runtime::Engine::SwapTraffic after = engine.optimizerSwapTraffic();
      best.readBytes = static_cast<double>(after.read - before.read);
      best.writtenBytes = static_cast<double>(after.written - before.written);
    }
  };
  ds::bench::trainSteps(engine, group[0], batch, o.steps, probe);
  return best;
}

// The ZeRO-3 rows: a whole iteration with overlap_comm, without and with offload_param nvme. The
// offload's I/O is what its swapper really moved in the best iteration (each layer's shard read
// by a gather unless still in a buffer, read for the fp32 update unless still in a buffer, written
// once after it), at fio's bandwidth.
void runZero3(const Options& o, double fioRead, double fioWrite) {
  size_t params = 0, paramSwapBytes = 0;
  const Timing stage3 = measure(o, 3, "", params, paramSwapBytes);
  const Timing offloaded = measure(
      o, 3,
      R"("offload_param": {"device": "nvme", "max_in_cpu": 0, "nvme_path": ")" + o.dir + R"("})",
      params, paramSwapBytes);
  std::printf("  iteration, ZeRO 3                      %9.1f ms\n", stage3.iterationMs);
  const auto where = [](const Timing& t) {
    std::printf(
        "      forward %.1f, backward %.1f, step %.1f ms (parameter swap in %.1f, out %.1f "
        "ms)\n",
        t.parts.forwardMs, t.parts.backwardMs, t.parts.stepMs, t.update.paramSwapInMs,
        t.update.paramSwapOutMs);
  };
  where(stage3);
  if (fioRead <= 0 || fioWrite <= 0) {
    std::printf("  iteration, ZeRO 3 + offload_param nvme %9.1f ms\n", offloaded.iterationMs);
    where(offloaded);
    return;
  }
  const double read = offloaded.paramReadBytes, written = offloaded.paramWrittenBytes;
  const double io = (read / fioRead + written / fioWrite) / 1e9 * 1e3;
  const double bound = std::max(stage3.iterationMs, io);
  std::printf(
      "  iteration, ZeRO 3 + offload_param nvme %9.1f ms   +%.1f ms over ZeRO 3; its I/O "
      "(%.2f GB read, %.2f GB written of a %.2f GB swap file) takes %.1f ms at fio's "
      "speed: %.2fx of max(ZeRO 3, I/O) (target <= 1.3x), the added time %.2fx of the "
      "I/O\n",
      offloaded.iterationMs, offloaded.iterationMs - stage3.iterationMs, read / 1e9, written / 1e9,
      paramSwapBytes / 1e9, io, offloaded.iterationMs / bound,
      (offloaded.iterationMs - stage3.iterationMs) / io);
  where(offloaded);
}

int run(const Options& o) {
  size_t params = 0, swapBytes = 0, unused = 0;
  double none = 0, cpu = 0, unchecked = 0;
  Timing nvmeTiming;
  if (!o.zero3Only) {
    none = measure(o, 1, "", params, unused).stepMs;
    cpu = measure(o, 1, R"("offload_optimizer": {"device": "cpu"})", params, unused).stepMs;
    const std::string nvmeKeys =
        R"("offload_optimizer": {"device": "nvme", "nvme_path": ")" + o.dir + R"("})";
    // The swap file's checksums (swap_file.h) against none, each the best of its steps.
    ds::runtime::setSwapChecksums(false);
    unchecked = measure(o, 1, nvmeKeys, params, swapBytes).stepMs;
    ds::runtime::setSwapChecksums(true);
    nvmeTiming = measure(o, 1, nvmeKeys, params, swapBytes);
  } else {
    std::vector<int> sizes(static_cast<size_t>(o.layers) + 1, static_cast<int>(o.width));
    params = ds::runtime::Mlp(sizes).parameterCount();
    swapBytes = params * sizeof(float);
  }
  const double nvme = nvmeTiming.stepMs;
  const size_t probe =
      std::min<size_t>(std::max<size_t>(swapBytes, size_t{1} << 28), size_t{1} << 30);
  const std::string probeFile = o.dir + "/bench-offload-fio-" + std::to_string(getpid());
  const double fioWrite = ds::fioBandwidthGBps(probeFile, true, 1 << 20, 8, probe);
  const double fioRead = ds::fioBandwidthGBps(probeFile, false, 1 << 20, 8, probe);
  std::filesystem::remove(probeFile);
  std::printf(
      "bench_offload: MLP %ld x %ld = %.0fM parameters, fp32 AdamW, ZeRO 1, sub-groups of "
      "%ldM, best of %ld steps, swap in %s\n",
      o.layers, o.width, params / 1e6, o.subGroup / 1000000, o.steps, o.dir.c_str());
  if (!o.zero3Only) {
    std::printf("  step, no offload        %9.1f ms\n", none);
    std::printf("  step, offload cpu       %9.1f ms   %.2fx of no offload (target <= 1.1x)\n", cpu,
                cpu / none);
    if (fioRead > 0 && fioWrite > 0) {
      const double read = nvmeTiming.readBytes, written = nvmeTiming.writtenBytes;
      const double bound = (read / fioRead + written / fioWrite) / 1e9 * 1e3;
      std::printf(
          "  step, offload nvme      %9.1f ms   I/O bound %.1f ms (%.2f GB read, %.2f GB "
          "written of a %.2f GB swap file, at fio's %.2f read / %.2f write GB/s): %.2fx "
          "(target <= 1.2x)\n",
          nvme, bound, read / 1e9, written / 1e9, swapBytes / 1e9, fioRead, fioWrite, nvme / bound);
    } else {
      std::printf("  step, offload nvme      %9.1f ms   (no fio: no I/O bound)\n", nvme);
    }
    std::printf(
        "  step, offload nvme without swap checksums %9.1f ms: the checksums cost %+.1f%% of "
        "the step (target <= 5%%)\n",
        unchecked, (nvme / unchecked - 1) * 100);
  } else if (fioRead > 0 && fioWrite > 0) {
    std::printf("  fio on the same directory: %.2f read / %.2f write GB/s\n", fioRead, fioWrite);
  }
  runZero3(o, fioRead, fioWrite);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_offload", [&] {
    Options o;
    CLI::App app{
        "bench_offload: the optimizer step with offload to NVMe against its I/O bound, "
        "and to CPU against none"};
    ds::bench::showDefaults(app);
    app.add_option("--dir", o.dir, "directory for the swap files");
    app.add_option("--width", o.width, "MLP width")->check(CLI::Range(16L, 1L << 16));
    app.add_option("--layers", o.layers, "MLP layers")->check(CLI::Range(1L, 1024L));
    app.add_option("--sub-group", o.subGroup, "sub_group_size in parameters")
        ->check(CLI::Range(1L, 1L << 40));
    app.add_option("--steps", o.steps, "timed steps (the best is kept)")
        ->check(CLI::Range(1L, 1000L));
    app.add_flag("--zero3-only", o.zero3Only, "only the ZeRO-3 rows (offload_param)");
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(o);
  });
}
