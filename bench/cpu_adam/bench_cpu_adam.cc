// bench_cpu_adam: CPU-Adam (kernels/cpu/cpu_adam.h) parameters per second on a large fp32 model,
// beside two baselines measured in the same run at the same thread counts:
//   roofline  a trivial kernel with the same memory traffic (reads p, g, m, v and writes p, m, v in
//             place: 28 bytes per parameter), vectorised and split over the same threads; "of
//             roofline" is how much of that memory speed Adam reaches (over 100% is noise);
//             with the bf16 working copy written in the same pass the traffic is 30 bytes per
//             parameter: its roofline is the same memory speed over 30 bytes;
//   torch     torch.optim.Adam on one tensor of the same size (/usr/bin/python3, set_num_threads).
// memcpy's rate on one thread is printed too: it shows the roofline kernel is not slow itself.
// Usage: bench_cpu_adam [--params 100000000] [--threads 1,2] [--steps 10] [--json] [--no-torch]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/command_seconds.h"
#include "common/json_line.h"
#include "common/guarded_main.h"
#include "kernels/cpu/cpu_adam.h"
#include "kernels/cpu/kernel_threads.h"

using namespace ds::kernels;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Page-aligned, first touched by the caller's fill.
struct Buffer {
  explicit Buffer(size_t bytes) : data(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)) {}
  ~Buffer() { std::free(data); }
  void* data;
};

__attribute__((target_clones("avx2", "default"))) void rooflineChunk(float* p, const float* g,
                                                                     float* m, float* v, size_t n,
                                                                     float a) {
  for (size_t i = 0; i < n; ++i) {
    p[i] += a * g[i];
    m[i] += g[i];
    v[i] += g[i];
  }
}

// The roofline kernel over [0, n) with the chunking cpuAdamStep uses (edges on 32 elements).
void roofline(float* p, const float* g, float* m, float* v, size_t n, int threads) {
  runOnKernelThreads(threads, [&](int part) {
    auto edge = [&](int k) { return k == threads ? n : n * k / threads / 32 * 32; };
    const size_t begin = edge(part), end = edge(part + 1);
    rooflineChunk(p + begin, g + begin, m + begin, v + begin, end - begin, 1e-6f);
  });
}

// Bytes read plus written per second by one memcpy of `bytes` from src to dst (best of 3).
double memcpyTraffic(void* dst, const void* src, size_t bytes) {
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const double start = now();
    std::memcpy(dst, src, bytes);
    best = std::min(best, now() - start);
  }
  return 2.0 * bytes / best;
}

AdamStepConstants stepConstants(int t) {
  return adamStepConstants(1e-3, 0.9, 0.999, 1e-8, 0.01, true, t);
}

// Seconds per torch.optim.Adam step (best of `steps` after one warm-up), or -1 without torch.
double torchAdamStep(size_t params, int threads, int steps) {
  const char* script =
      "import sys, time, torch\n"
      "n, t, k = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])\n"
      "torch.set_num_threads(t)\n"
      "p = torch.nn.Parameter(torch.zeros(n))\n"
      "p.grad = torch.full((n,), 1e-3)\n"
      "opt = torch.optim.Adam([p], lr=1e-3)\n"
      "opt.step()\n"
      "best = 1e30\n"
      "for _ in range(k):\n"
      "    s = time.perf_counter(); opt.step(); best = min(best, time.perf_counter() - s)\n"
      "print(best)\n";
  const std::string command = "/usr/bin/python3 -c '" + std::string(script) + "' " +
                              std::to_string(params) + " " + std::to_string(threads) + " " +
                              std::to_string(steps);
  return ds::bench::commandSeconds(command);
}

}  // namespace

int run(int argc, char** argv) {
  size_t n = 100'000'000;
  std::vector<int> threadCounts = {1, 2};
  int steps = 10;
  bool json = false;
  CLI::App app{
      "bench_cpu_adam: CPU-Adam parameters per second beside its memory roofline and "
      "torch.optim.Adam"};
  ds::bench::showDefaults(app);
  app.add_option("--params", n, "fp32 parameters")->check(CLI::Range(size_t{1}, size_t{1} << 34));
  app.add_option("--threads", threadCounts, "thread counts (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app.add_option("--steps", steps, "timed steps (the best is kept)")->check(CLI::Range(1, 100000));
  app.add_flag("--json", json, "print one JSON line per thread count");
  bool noTorch = false;
  app.add_flag("--no-torch", noTorch, "skip the torch baseline");
  if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
  const bool withTorch = !noTorch;

  Buffer pBuf(n * 4), gBuf(n * 4), mBuf(n * 4), vBuf(n * 4), halfBuf(n * 2);
  auto* p = static_cast<float*>(pBuf.data);
  auto* g = static_cast<float*>(gBuf.data);
  auto* m = static_cast<float*>(mBuf.data);
  auto* v = static_cast<float*>(vBuf.data);
  auto* half = static_cast<uint16_t*>(halfBuf.data);
  for (size_t i = 0; i < n; ++i) {
    p[i] = 0.01f * static_cast<float>(i % 1000);
    g[i] = 1e-3f * static_cast<float>(i % 7 + 1);
    m[i] = v[i] = 0.0f;
  }
  std::memset(half, 0, n * 2);

  const AdamSimd simd = bestAdamSimd();
  if (!json) {
    const double copyRate = memcpyTraffic(m, g, n * sizeof(float));
    std::memset(m, 0, n * sizeof(float));
    std::printf(
        "bench_cpu_adam: %zu fp32 params, path %s, best of %d steps after a warm-up; memcpy on one "
        "thread moves %.1f GB/s (read + write)\n",
        n, adamSimdName(simd), steps, copyRate / 1e9);
    std::printf("%7s %10s %14s %13s %11s %15s %11s %11s %8s\n", "threads", "adam Mp/s",
                "roofline Mp/s", "roofline GB/s", "of roofline", "adam+bf16 Mp/s", "of roofline",
                "torch Mp/s", "x torch");
  }
  int step = 0;
  for (int threads : threadCounts) {
    roofline(p, g, m, v, n, threads);
    cpuAdamStep(p, g, m, v, n, stepConstants(++step), {}, threads, simd);
    // Interleaved, so a slow spell of this shared machine hits all three alike.
    double adam = 1e30, ceiling = 1e30, withCopy = 1e30;
    for (int s = 0; s < steps; ++s) {
      double start = now();
      roofline(p, g, m, v, n, threads);
      ceiling = std::min(ceiling, now() - start);
      start = now();
      cpuAdamStep(p, g, m, v, n, stepConstants(++step), {}, threads, simd);
      adam = std::min(adam, now() - start);
      start = now();
      cpuAdamStep(p, g, m, v, n, stepConstants(++step), {half, HalfFormat::Bf16}, threads, simd);
      withCopy = std::min(withCopy, now() - start);
    }
    const double torch = withTorch ? torchAdamStep(n, threads, std::max(3, steps / 2)) : -1;
    const double adamRate = n / adam / 1e6, ceilingRate = n / ceiling / 1e6;
    const double torchRate = torch > 0 ? n / torch / 1e6 : -1;
    const double copyRate = n / withCopy / 1e6, copyCeiling = ceilingRate * 28 / 30;
    if (json) {
      using ds::rounded;
      ds::printJsonLine({{"threads", threads},
                                {"params", n},
                                {"mparams_per_s", rounded(adamRate, 1)},
                                {"roofline_mparams_per_s", rounded(ceilingRate, 1)},
                                {"bf16_mparams_per_s", rounded(copyRate, 1)},
                                {"bf16_roofline_mparams_per_s", rounded(copyCeiling, 1)},
                                {"torch_mparams_per_s", rounded(torchRate, 1)}});
    } else if (torch > 0) {
      std::printf("%7d %10.1f %14.1f %13.2f %10.1f%% %15.1f %10.1f%% %11.1f %7.2fx\n", threads,
                  adamRate, ceilingRate, ceilingRate * 28 / 1e3, 100 * adamRate / ceilingRate,
                  copyRate, 100 * copyRate / copyCeiling, torchRate, adamRate / torchRate);
    } else {
      std::printf("%7d %10.1f %14.1f %13.2f %10.1f%% %15.1f %10.1f%% %11s %8s\n", threads,
                  adamRate, ceilingRate, ceilingRate * 28 / 1e3, 100 * adamRate / ceilingRate,
                  copyRate, 100 * copyRate / copyCeiling, "no torch", "-");
    }
    std::fflush(stdout);
  }
  if (!json) std::printf("target: >= 95%% of roofline (with and without the bf16 copy) and >= 5x torch at every thread count\n");
  return 0;
}

int main(int argc, char** argv) {
  return ds::guardedMain("bench_cpu_adam", [&] { return run(argc, argv); });
}
