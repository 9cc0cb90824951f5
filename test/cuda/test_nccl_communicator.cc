// NcclCommunicator on the GPU, bootstrapped through a store as the coordinator's is (an in-process
// MemoryStore here: rank 0's NCCL unique id travels through it), one thread per rank, one rank per
// device. For every world size it runs: all_reduce (sum, avg, max), all_gather, reduce_scatter
// (sum) and broadcast on device buffers, fp32 and bf16, counts 0, 1, 4099 (a prime) and 2^24,
// each rank's result read back and compared with values computed on the host.
//
// World sizes: 1 always, and the device count (up to 8) where there are two or more GPUs (NCCL
// refuses two ranks of one communicator on one GPU). A one-rank group's public calls never reach
// NCCL (Communicator short-circuits them: all_reduce and broadcast return, all_gather and
// reduce_scatter are copyLocal, a device-to-device copy), so world size 1 runs twice: through the
// public calls ("api"), and through the backend's own hooks ("nccl"), which issue the NCCL
// collective on the device and wait for it as a larger group would.
//
// A plain program, no test framework, like test_cuda_kernels.cc (scripts/gpu-check builds it on a
// GPU machine with only the CUDA toolkit and NCCL): one line per check, exit 0 when all pass, 1
// when any fails, 77 (CTest: skipped) when no GPU is visible. --json FILE writes the results;
// --world N runs only that world size (N <= the device count).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/half_convert.h"
#include "runtime/comm/memory_store.h"
#include "runtime/comm/nccl_communicator.h"
#include "test/cuda/check_report.h"

namespace {

using ds::DType;
using ds::runtime::MemoryStore;
using ds::runtime::NcclCommunicator;
using ds::runtime::NcclOptions;
using ds::runtime::ReduceOp;
using ds::test::Report;
using ds::test::Result;

constexpr size_t kCounts[] = {0, 1, 4099, size_t{1} << 24};
constexpr int kMaxWorld = 8;

// The backend's hooks, callable: how a one-rank group reaches NCCL.
class DirectNccl : public NcclCommunicator {
 public:
  using NcclCommunicator::doAllGather;
  using NcclCommunicator::doAllReduce;
  using NcclCommunicator::doBarrier;
  using NcclCommunicator::doBroadcast;
  using NcclCommunicator::doReduceScatter;
  using NcclCommunicator::NcclCommunicator;
};

void cudaCheck(cudaError_t error, const std::string& what) {
  if (error != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(error));
}

// Small integers (exact in bf16, and their sums over up to 8 ranks too), negative ones included
// so that max is not the last rank's by construction.
float value(int rank, size_t i) {
  return static_cast<float>(static_cast<int>(i % 7) - 3 + rank % 3);
}

// A device buffer of `count` elements of `dtype` (at least one byte), filled from host floats.
class Buffer {
 public:
  Buffer(const std::vector<float>& values, DType dtype) : dtype_(dtype), count_(values.size()) {
    cudaCheck(cudaMalloc(&data_, std::max<size_t>(bytes(), 1)), "cudaMalloc");
    std::vector<char> host(bytes());
    if (dtype == DType::BF16) {
      auto* bits = reinterpret_cast<uint16_t*>(host.data());
      for (size_t i = 0; i < count_; ++i) bits[i] = ds::kernels::floatToBf16(values[i]);
    } else {
      std::memcpy(host.data(), values.data(), bytes());
    }
    cudaCheck(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "upload");
    // A pageable upload may still be in flight when cudaMemcpy returns, and the communicator's
    // stream does not wait for the null stream: finish it before NCCL reads.
    cudaCheck(cudaDeviceSynchronize(), "upload");
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { cudaFree(data_); }
  void* data() { return data_; }
  size_t bytes() const { return count_ * ds::dtypeBytes(dtype_); }
  std::vector<float> download() const {
    std::vector<char> host(bytes());
    cudaCheck(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), "download");
    std::vector<float> values(count_);
    if (dtype_ == DType::BF16) {
      const auto* bits = reinterpret_cast<const uint16_t*>(host.data());
      for (size_t i = 0; i < count_; ++i) values[i] = ds::kernels::bf16ToFloat(bits[i]);
    } else {
      std::memcpy(values.data(), host.data(), bytes());
    }
    return values;
  }

 private:
  DType dtype_;
  size_t count_;
  void* data_ = nullptr;
};

// One rank's comparison, as Report::close measures it: max |got - want| / (|want| + floor).
struct Compared {
  double error = 0.0;
  bool nan = false;
  size_t bitwise = 0, count = 0;
};

Compared compare(const std::vector<float>& got, const std::vector<float>& want) {
  Compared c;
  c.count = want.size();
  c.nan = got.size() != want.size();
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  const double floor = scale > 0.0 ? 0.01 * scale : 1e-30;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    c.nan = c.nan || std::isnan(d);
    c.error = std::max(c.error, d / (std::fabs(static_cast<double>(want[i])) + floor));
    c.bitwise += std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
  }
  return c;
}

// What every rank measured for one check; merged into one Result.
struct Check {
  std::string name;
  double tolerance;
  std::vector<Compared> ranks;
};

// The operations of one world size and path, on every rank: a fixed list of checks, so that
// ranks fill the same slots.
class Round {
 public:
  Round(int world, bool direct) : world_(world), direct_(direct) {}

  // The check names, in the order run() fills them.
  std::vector<Check> plan() const {
    std::vector<Check> checks;
    for (DType dtype : {DType::F32, DType::BF16})
      for (size_t count : kCounts) {
        if (direct_ && count == 0) continue;  // the hooks are for counts the public calls pass on
        const std::string tail =
            std::string(" ") + ds::dtypeName(dtype) + " n=" + std::to_string(count);
        // NCCL's avg may multiply by 1/world before summing: within the dtype's rounding (fp32 as
        // the kernel test holds fp32 to, bf16 as test_nccl.cc does).
        const double avg = world_ == 1 ? 0.0 : dtype == DType::F32 ? 1e-5 : 1e-2;
        for (auto [op, tolerance] : {std::pair<const char*, double>{"all_reduce sum", 0.0},
                                     {"all_reduce avg", avg},
                                     {"all_reduce max", 0.0},
                                     {"all_gather", 0.0},
                                     {"reduce_scatter sum", 0.0},
                                     {"broadcast", 0.0}})
          checks.push_back({prefix() + op + tail, tolerance, std::vector<Compared>(world_)});
      }
    checks.push_back({prefix() + "bootstrap: unique id through the store, barrier", 0.0,
                      std::vector<Compared>(world_)});
    return checks;
  }

  // Rank `rank`'s part: fills checks[k].ranks[rank] in plan()'s order (a throw leaves the rest
  // unfilled, which runRound counts as failed).
  void run(int rank, MemoryStore& store, std::vector<Check>& checks) const {
    NcclOptions options;
    options.device = rank;
    options.storePrefix =
        "gpu-check/" + std::string(direct_ ? "nccl" : "api") + "/world-" + std::to_string(world_);
    options.timeout = std::chrono::seconds(30);  // a missing rank fails its peers' ops by then
    DirectNccl comm(store, rank, world_, options);
    cudaCheck(cudaSetDevice(rank), "cudaSetDevice");
    size_t slot = 0;
    for (DType dtype : {DType::F32, DType::BF16})
      for (size_t count : kCounts) {
        if (direct_ && count == 0) continue;
        auto record = [&](const std::vector<float>& got, const std::vector<float>& want) {
          checks.at(slot++).ranks[rank] = compare(got, want);
        };
        std::vector<float> mine(count), sum(count), peak(count);
        for (size_t i = 0; i < count; ++i) {
          mine[i] = value(rank, i);
          sum[i] = 0.0f;
          peak[i] = -1e30f;
          for (int s = 0; s < world_; ++s) {
            sum[i] += value(s, i);
            peak[i] = std::max(peak[i], value(s, i));
          }
        }
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
          Buffer data(mine, dtype);
          if (direct_)
            comm.doAllReduce(data.data(), count, dtype, op);
          else
            comm.allReduce(data.data(), count, dtype, op);
          std::vector<float> want = op == ReduceOp::Max ? peak : sum;
          if (op == ReduceOp::Avg)
            for (float& w : want) w /= static_cast<float>(world_);
          record(data.download(), want);
        }
        {  // all_gather: a sentinel-filled output, so that a skipped copy shows
          Buffer in(mine, dtype);
          Buffer out(std::vector<float>(count * world_, -7.0f), dtype);
          if (direct_)
            comm.doAllGather(in.data(), out.data(), count, dtype);
          else
            comm.allGather(in.data(), out.data(), count, dtype);
          std::vector<float> want(count * world_);
          for (int s = 0; s < world_; ++s)
            for (size_t i = 0; i < count; ++i) want[s * count + i] = value(s, i);
          record(out.download(), want);
        }
        {  // reduce_scatter: rank r gets block r of everyone's input, summed
          std::vector<float> blocks(count * world_);
          for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = value(rank, i);
          Buffer in(blocks, dtype);
          Buffer out(std::vector<float>(count, -7.0f), dtype);
          if (direct_)
            comm.doReduceScatter(in.data(), out.data(), count, dtype, ReduceOp::Sum);
          else
            comm.reduceScatter(in.data(), out.data(), count, dtype, ReduceOp::Sum);
          std::vector<float> want(count, 0.0f);
          for (size_t i = 0; i < count; ++i)
            for (int s = 0; s < world_; ++s) want[i] += value(s, rank * count + i);
          record(out.download(), want);
        }
        {  // broadcast from the last rank
          const int root = world_ - 1;
          Buffer data(std::vector<float>(count, rank == root ? 9.0f : -1.0f), dtype);
          if (direct_)
            comm.doBroadcast(data.data(), count, dtype, root);
          else
            comm.broadcast(data.data(), count, dtype, root);
          record(data.download(), std::vector<float>(count, 9.0f));
        }
      }
    // The bootstrap: rank 0's id is in the store under the prefix, NCCL's size, and a barrier
    // (through NCCL on the direct path) completes on every rank.
    const std::string id =
        store.get(options.storePrefix + "/nccl/unique-id", std::chrono::seconds(5));
    if (direct_)
      comm.doBarrier();
    else
      comm.barrier();
    Compared c;
    c.count = 1;
    c.bitwise = id.size() == 128;
    c.error = id.size() == 128 ? 0.0 : 1.0;
    checks.at(slot++).ranks[rank] = c;
  }

  std::string prefix() const {
    return "world " + std::to_string(world_) + (direct_ ? " nccl: " : " api: ");
  }

 private:
  int world_;
  bool direct_;
};

// Runs one round on `world` threads and adds its checks to the report (a rank that threw fails
// every check it had not filled, with its message). Returns the number of checks.
size_t runRound(Report& report, int world, bool direct) {
  const Round round(world, direct);
  std::vector<Check> checks = round.plan();
  for (Check& c : checks)
    for (Compared& r : c.ranks) r.nan = true, r.count = 0;  // unfilled = failed
  std::vector<std::string> rankErrors(world);
  MemoryStore store;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        round.run(r, store, checks);
      } catch (const std::exception& e) {
        rankErrors[r] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string failedRanks;
  for (int r = 0; r < world; ++r)
    if (!rankErrors[r].empty()) {
      std::printf("rank %d of %d (%s) failed: %s\n", r, world, direct ? "nccl" : "api",
                  rankErrors[r].c_str());
      failedRanks +=
          (failedRanks.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": " + rankErrors[r]);
    }
  for (const Check& c : checks) {
    double error = 0.0;
    bool bad = false;
    size_t bitwise = 0, count = 0;
    for (const Compared& r : c.ranks) {
      error = std::max(error, r.error);
      bad = bad || r.nan;
      bitwise += r.bitwise;
      count += r.count;
    }
    std::string note = std::to_string(world) + " ranks, " + std::to_string(bitwise) + "/" +
                       std::to_string(count) + " bitwise";
    if (bad && !failedRanks.empty()) note += "; " + failedRanks;
    report.add({c.name, !bad && error <= c.tolerance, bad ? NAN : error, c.tolerance, note});
  }
  std::printf("world %d %s: %zu checks in %.2f s\n", world, direct ? "nccl" : "api", checks.size(),
              seconds);
  return checks.size();
}

}  // namespace

int main(int argc, char** argv) {
  std::string jsonPath;
  int onlyWorld = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      jsonPath = argv[++i];
    } else if (arg == "--world" && i + 1 < argc) {
      onlyWorld = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--world N]\n", argv[0]);
      return 2;
    }
  }
  int devices = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&devices);
      error != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no GPU visible: %s\n",
                error != cudaSuccess ? cudaGetErrorString(error) : "cudaGetDeviceCount found 0");
    return 77;
  }
  if (onlyWorld < 0 || onlyWorld > devices) {
    std::fprintf(stderr, "--world %d: this machine has %d CUDA devices (one rank each)\n",
                 onlyWorld, devices);
    return 2;
  }
  std::vector<int> worlds;
  if (onlyWorld > 0)
    worlds = {onlyWorld};
  else
    worlds = devices >= 2 ? std::vector<int>{1, std::min(devices, kMaxWorld)} : std::vector<int>{1};
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int ncclVersion = 0;
  ncclGetVersion(&ncclVersion);
  const std::string device = std::string(prop.name) + " x" + std::to_string(devices) + ", NCCL " +
                             std::to_string(ncclVersion);
  std::printf("NcclCommunicator on %s, world sizes:", device.c_str());
  for (int w : worlds) std::printf(" %d", w);
  std::printf("\n");
  const auto start = std::chrono::steady_clock::now();
  Report report;
  size_t checks = 0;
  for (int world : worlds) {
    checks += runRound(report, world, false);
    if (world == 1) checks += runRound(report, world, true);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d of %zu NCCL checks failed (%.1f s)\n", report.failures(), checks, seconds);
  if (!jsonPath.empty()) report.writeJson(jsonPath, device, seconds);
  return report.failures() == 0 ? 0 : 1;
}
