// bench_comm: all_reduce of 64 MiB float32 between N processes on this node through the
// shared-memory communicator, beside PyTorch's gloo all_reduce (python3-torch) on the same sizes
// and rank counts in the same run, and this machine's memcpy bandwidth as the roofline.
// Then the Gloo path between two loopback nodes through ds-launch, against the same baseline.
// Bus bandwidth follows nccl-tests: busbw = bytes / time x 2(n-1)/n.
// Roofline: every rank must at least read its buffer and write the result back, i.e. move as much
// memory as one memcpy of it, and the ranks share the memory bus: floor = ranks x bytes / memcpy
// rate. "of floor" is floor / measured time (100% = at the memory roofline). Streaming stores
// for the copy back were tried and did not help here.
// Then bf16 and fp16 against fp32 of the same element count, on shared memory and on the Gloo path
// (16-bit gradients must not cost more than fp32 ones).
// Usage: bench_comm [--ranks 2,4] [--bytes 67108864] [--iters 10] [--chunk BYTES] [--half-only]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/command_seconds.h"
#include "bench/free_port.h"
#include "common/guarded_main.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/comm/shm_communicator.h"

using namespace ds::runtime;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Bytes copied per second by memcpy over a buffer far larger than the caches.
double memcpyBandwidth(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::memcpy(b.data(), a.data(), bytes);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const double start = now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, now() - start);
  }
  return bytes / best;
}

// Seconds per all_reduce of `count` elements of `dtype` on rank 0, ranks as forked processes.
double shmAllReduceOf(int ranks, size_t count, ds::DType dtype, int iters, size_t chunkBytes) {
  ShmOptions options;
  options.chunkBytes = chunkBytes;
  auto segment = std::make_shared<ShmSegment>(
      ShmSegment::create(uniqueShmName("bench"), ShmCommunicator::segmentBytes(ranks, options)));
  const std::string name = segment->name();
  ShmCommunicator rank0(segment, 0, ranks, options);
  std::vector<pid_t> children;
  for (int r = 1; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      ShmCommunicator comm(std::make_shared<ShmSegment>(ShmSegment::open(name)), r, ranks, options);
      std::vector<char> data(count * ds::dtypeBytes(dtype), 0);
      for (int i = 0; i < iters + 3; ++i) comm.allReduce(data.data(), count, dtype);
      comm.barrier();
      _exit(0);
    }
    children.push_back(pid);
  }
  std::vector<char> data(count * ds::dtypeBytes(dtype), 0);
  for (int i = 0; i < 3; ++i) rank0.allReduce(data.data(), count, dtype);  // warm-up, page-in
  const double start = now();
  for (int i = 0; i < iters; ++i) rank0.allReduce(data.data(), count, dtype);
  const double perOp = (now() - start) / iters;
  rank0.barrier();
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  return perOp;
}

double shmAllReduce(int ranks, size_t bytes, int iters, size_t chunkBytes) {
  return shmAllReduceOf(ranks, bytes / sizeof(float), ds::DType::F32, iters, chunkBytes);
}

double torchAllReduce(int ranks, size_t bytes, int iters) {
  const std::string script = std::string(DS_SOURCE_DIR) + "/bench/comm/torch_gloo_allreduce.py";
  const std::string command = "/usr/bin/python3 " + script + " " + std::to_string(ranks) + " " +
                              std::to_string(bytes) + " " + std::to_string(iters) + " " +
                              std::to_string(ds::bench::freeLoopbackPort());
  return ds::bench::commandSeconds(command);
}

// Seconds per all_reduce of `bytes` of `dtype` through the whole product over the Gloo path:
// ds-launch starts the ranks on two loopback "nodes" (127.0.0.1 and 127.0.0.2, the first one
// taking the odd rank out), which run ds-comm-bench with the flat Gloo backend; rank 0's JSON line
// gives the time.
double glooAcrossNodes(int ranks, size_t bytes, int iters, ds::DType dtype = ds::DType::F32) {
  const std::string binDir = std::filesystem::canonical("/proc/self/exe").parent_path().string();
  const std::string dir = "/tmp/bench-comm-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/hostfile")
      << "127.0.0.1 slots=" << (ranks + 1) / 2 << "\n127.0.0.2 slots=" << ranks / 2 << "\n";
  const std::string size = std::to_string(bytes);
  const std::string command =
      "cd " + dir + " && " + binDir + "/ds-launch -H hostfile --master_port " +
      std::to_string(ds::bench::freeLoopbackPort()) +
      " --log_dir logs ds-comm-bench --backend gloo --op all_reduce --dtype " +
      ds::dtypeName(dtype) + " --min " + size + " --max " + size + " --iters " +
      std::to_string(iters) + " --warmup 2 --json >/dev/null 2>&1";
  double seconds = -1;
  if (std::system(command.c_str()) == 0) {
    std::ifstream log(dir + "/logs/rank-0.log");
    std::string line;
    std::getline(log, line);
    const auto result = nlohmann::json::parse(line, nullptr, false);
    if (result.is_object() && result.contains("time_us"))
      seconds = result["time_us"].get<double>() / 1e6;
  }
  std::filesystem::remove_all(dir);
  return seconds;
}

// 16-bit gradients: the same element count as the fp32 run, half the bytes, so the conversions
// and roundings must not cost more than the bytes saved. The kernel path (DS_KERNEL_ISA) is
// printed because the 16-bit combine runs on it. Each figure is the best of `runs`.
using AllReduceSeconds = double (*)(int ranks, size_t count, ds::DType dtype, int iters,
                                    size_t chunkBytes);

void halvesAgainstFp32(const char* path, AllReduceSeconds allReduce, int runs,
                       const std::vector<int>& rankCounts, size_t bytes, int iters,
                       size_t chunkBytes) {
  const size_t count = bytes / sizeof(float);
  std::printf("bf16 and fp16 against fp32, %zu elements (%s, %s kernels)\n", count, path,
              ds::kernels::kernelIsaName(ds::kernels::bestKernelIsa()));
  std::printf("%6s %10s %10s %10s %10s %10s\n", "ranks", "fp32 ms", "bf16 ms", "fp16 ms",
              "bf16/fp32", "fp16/fp32");
  for (int ranks : rankCounts) {
    double best[3] = {1e30, 1e30, 1e30};
    const ds::DType dtypes[3] = {ds::DType::F32, ds::DType::BF16, ds::DType::F16};
    for (int run = 0; run < runs; ++run)
      for (int d = 0; d < 3; ++d) {
        const double t = allReduce(ranks, count, dtypes[d], iters, chunkBytes);
        if (t > 0) best[d] = std::min(best[d], t);
      }
    if (best[0] == 1e30 || best[1] == 1e30 || best[2] == 1e30) {
      std::printf("%6d %10s\n", ranks, "failed");
      continue;
    }
    std::printf("%6d %10.2f %10.2f %10.2f %9.2fx %9.2fx\n", ranks, best[0] * 1e3, best[1] * 1e3,
                best[2] * 1e3, best[1] / best[0], best[2] / best[0]);
  }
  std::printf("target: 16-bit time <= fp32 time per element (ratio <= 1)\n\n");
}

double glooAllReduceOf(int ranks, size_t count, ds::DType dtype, int iters, size_t) {
  return glooAcrossNodes(ranks, count * ds::dtypeBytes(dtype), iters, dtype);
}

void everyHalfComparison(const std::vector<int>& rankCounts, size_t bytes, int iters,
                         size_t chunkBytes) {
  halvesAgainstFp32("shared memory", shmAllReduceOf, 3, rankCounts, bytes, iters, chunkBytes);
  halvesAgainstFp32("gloo over loopback, ds-launch on 2 nodes", glooAllReduceOf, 2, rankCounts,
                    bytes, iters, chunkBytes);
}

}  // namespace

int run(int argc, char** argv) {
  std::vector<int> rankCounts = {2, 4};
  size_t bytes = size_t{64} << 20;
  int iters = 10;
  size_t chunkBytes = ShmOptions{}.chunkBytes;
  CLI::App app{"bench_comm: shared-memory and Gloo all_reduce beside PyTorch gloo's"};
  ds::bench::showDefaults(app);
  app.add_option("--ranks", rankCounts, "rank counts (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--bytes", bytes, "bytes per all_reduce")
      ->check(CLI::Range(size_t{4}, size_t{1} << 34));
  app.add_option("--chunk", chunkBytes, "shared-memory chunk size in bytes")
      ->check(CLI::Range(size_t{4096}, size_t{1} << 30));
  app.add_option("--iters", iters, "timed iterations")->check(CLI::Range(1, 100000));
  bool halfOnly = false;
  app.add_flag("--half-only,--bf16-only", halfOnly,
               "only the bf16 and fp16 against fp32 comparisons, shared memory and Gloo (no "
               "PyTorch; quick per-ISA runs)");
  if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
  if (halfOnly) {
    everyHalfComparison(rankCounts, bytes, iters, chunkBytes);
    return 0;
  }
  const double copy = memcpyBandwidth(size_t{256} << 20);
  std::printf("bench_comm: all_reduce float32, %zu bytes, %d iterations; memcpy %.1f GB/s\n", bytes,
              iters, copy / 1e9);
  std::printf("%6s %14s %14s %14s %14s %9s %12s\n", "ranks", "shm time ms", "shm busbw GB/s",
              "torch time ms", "torch busbw", "speedup", "of floor");
  for (int ranks : rankCounts) {
    const double factor = 2.0 * (ranks - 1) / ranks;
    // Best of a few runs for both sides: this machine is a shared VM and noisy.
    double ours = 1e30, theirs = 1e30;
    for (int run = 0; run < 3; ++run)
      ours = std::min(ours, shmAllReduce(ranks, bytes, iters, chunkBytes));
    for (int run = 0; run < 2; ++run) {
      const double t = torchAllReduce(ranks, bytes, std::max(3, iters / 2));
      if (t > 0) theirs = std::min(theirs, t);
    }
    if (theirs == 1e30) theirs = -1;
    const double ourBus = bytes / ours * factor / 1e9;
    if (theirs > 0) {
      const double theirBus = bytes / theirs * factor / 1e9;
      std::printf("%6d %14.2f %14.2f %14.2f %14.2f %8.1fx %11.0f%%\n", ranks, ours * 1e3, ourBus,
                  theirs * 1e3, theirBus, theirs / ours, 100.0 * ranks * bytes / copy / ours);
    } else {
      std::printf("%6d %14.2f %14.2f %14s %14s %9s %11.0f%%\n", ranks, ours * 1e3, ourBus,
                  "no torch", "-", "-", 100.0 * ranks * bytes / copy / ours);
    }
  }
  std::printf("target: busbw >= 5x PyTorch gloo at 2 and 4 ranks\n\n");

  everyHalfComparison(rankCounts, bytes, iters, chunkBytes);

  // The Gloo path: two ranks on two loopback nodes, against PyTorch gloo's two ranks (which talk
  // TCP over loopback as well).
  double ours = 1e30, theirs = 1e30;
  for (int run = 0; run < 3; ++run) {
    const double t = glooAcrossNodes(2, bytes, iters);
    if (t > 0) ours = std::min(ours, t);
  }
  for (int run = 0; run < 2; ++run) {
    const double t = torchAllReduce(2, bytes, std::max(3, iters / 2));
    if (t > 0) theirs = std::min(theirs, t);
  }
  std::printf(
      "gloo path, 2 ranks on 2 loopback nodes (ds-launch + ds-comm-bench --backend gloo)\n");
  std::printf("%14s %14s %14s %14s %9s\n", "ds time ms", "ds busbw GB/s", "torch time ms",
              "torch busbw", "ratio");
  if (ours < 1e30 && theirs < 1e30)
    std::printf("%14.2f %14.2f %14.2f %14.2f %8.2fx\n", ours * 1e3, bytes / ours / 1e9,
                theirs * 1e3, bytes / theirs / 1e9, theirs / ours);
  else
    std::printf("%14s\n", ours < 1e30 ? "no torch" : "ds-launch run failed");
  std::printf("target: gloo path busbw >= PyTorch gloo's\n");
  return 0;
}

int main(int argc, char** argv) {
  return ds::guardedMain("bench_comm", [&] { return run(argc, argv); });
}
