// bench_offload: the optimizer step with offload_optimizer on NVMe against its I/O lower bound,
// and with offload to CPU against no offload, for an MLP of a few hundred million parameters on
// one rank (fp32, AdamW, ZeRO 1, the state streamed in sub-groups). The bound is the bytes a step
// moves (every optimizer state read and written once) over fio's read and write bandwidth on the
// same directory, measured in the same run.
// Usage: bench_offload [--dir DIR] [--width N] [--layers N] [--sub-group N] [--steps N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "common/guarded_main.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/engine/engine.h"
#include "runtime/model/mlp.h"
#include "runtime/offload/fio_baseline.h"

namespace {

struct Options {
  std::string dir = std::filesystem::temp_directory_path().string();
  long width = 6144, layers = 6, subGroup = 25'000'000, steps = 3;
};

// Best optimizer-step milliseconds over `steps` steps with the given offload block.
double stepMs(const Options& o, const std::string& offload, size_t& params, size_t& swapBytes) {
  std::vector<int> sizes(static_cast<size_t>(o.layers) + 1, static_cast<int>(o.width));
  ds::runtime::Mlp model(sizes);
  const std::string json =
      R"({"train_batch_size": 1, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
          "zero_optimization": {"stage": 1, "sub_group_size": )" +
      std::to_string(o.subGroup) + (offload.empty() ? "" : ", " + offload) + "}}";
  const auto config = ds::runtime::parseDeepSpeedConfig(json, 1, "bench_offload");
  auto group = ds::runtime::ShmCommunicator::inProcessGroup(1);
  ds::runtime::Engine engine(model, config, group[0], 1);
  params = engine.parameterCount();
  swapBytes = engine.optimizerSwapBytes();
  ds::runtime::Batch batch;
  batch.size = 1;
  batch.inputs.assign(static_cast<size_t>(o.width), 0.1f);
  batch.targets.assign(static_cast<size_t>(o.width), 0.2f);
  double best = 1e300;
  for (long s = 0; s < o.steps; ++s) {
    engine.forwardBackward(batch);
    engine.step();
    best = std::min(best, engine.lastStepTimes().stepMs);
  }
  return best;
}

int run(const Options& o) {
  size_t params = 0, swapBytes = 0, unused = 0;
  const double none = stepMs(o, "", params, unused);
  const double cpu = stepMs(o, R"("offload_optimizer": {"device": "cpu"})", params, unused);
  const double nvme = stepMs(
      o, R"("offload_optimizer": {"device": "nvme", "nvme_path": ")" + o.dir + R"("})", params, swapBytes);
  const size_t probe = std::min<size_t>(swapBytes, size_t{1} << 30);
  const std::string probeFile = o.dir + "/bench-offload-fio-" + std::to_string(getpid());
  const double fioWrite = ds::runtime::fioBandwidthGBps(probeFile, true, 1 << 20, 8, probe);
  const double fioRead = ds::runtime::fioBandwidthGBps(probeFile, false, 1 << 20, 8, probe);
  std::filesystem::remove(probeFile);
  std::printf("bench_offload: MLP %ld x %ld = %.0fM parameters, fp32 AdamW, ZeRO 1, sub-groups of "
              "%ldM, best of %ld steps, swap in %s\n",
              o.layers, o.width, params / 1e6, o.subGroup / 1000000, o.steps, o.dir.c_str());
  std::printf("  step, no offload        %9.1f ms\n", none);
  std::printf("  step, offload cpu       %9.1f ms   %.2fx of no offload (target <= 1.1x)\n", cpu,
              cpu / none);
  if (fioRead > 0 && fioWrite > 0) {
    const double bound = (swapBytes / fioRead + swapBytes / fioWrite) / 1e9 * 1e3;
    std::printf("  step, offload nvme      %9.1f ms   I/O bound %.1f ms (%.2f GB each way at fio's "
                "%.2f read / %.2f write GB/s): %.2fx (target <= 1.2x)\n",
                nvme, bound, swapBytes / 1e9, fioRead, fioWrite, nvme / bound);
  } else {
    std::printf("  step, offload nvme      %9.1f ms   (no fio: no I/O bound)\n", nvme);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_offload", [&] {
    Options o;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (i + 1 >= argc) throw ds::Error(a + ": unknown flag or missing value");
      const std::string v = argv[++i];
      using ds::bench::flagNumber;
      if (a == "--dir") o.dir = v;
      else if (a == "--width") o.width = flagNumber(a, v, 16, 1 << 16);
      else if (a == "--layers") o.layers = flagNumber(a, v, 1, 1024);
      else if (a == "--sub-group") o.subGroup = flagNumber(a, v, 1, 1L << 40);
      else if (a == "--steps") o.steps = flagNumber(a, v, 1, 1000);
      else throw ds::Error(a + ": unknown flag (see the usage at the top of bench_offload.cc)");
    }
    return run(o);
  });
}
