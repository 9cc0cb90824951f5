// ds-comm-bench: sizes double from --min to --max; per size, warm-up ops, a barrier, then --iters
// timed ops. Rank 0's time is reported (every rank leaves the last op within one barrier of the
// others). Check values are small integers, so sums are exact in float32.
#include "worker/comm_bench_job.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"
#include "common/comm_stat.h"
#include "common/json_line.h"
#include "runtime/comm/elementwise_reduce.h"

namespace ds::worker {
namespace {

float initialValue(int rank, size_t i) { return static_cast<float>(rank + 1 + i % 7); }

// One op on buffers sized for `bytes` (all_gather: `bytes` is the gathered output, as nccl-tests).
struct Buffers {
  DType dtype = DType::F32;
  std::vector<char> data, out;
  size_t count = 0;  // elements per rank's contribution
  size_t dataCount() const { return data.size() / dtypeBytes(dtype); }
};

Buffers buffersFor(CollectiveOp op, uint64_t bytes, int ranks, DType dtype) {
  Buffers buffers;
  buffers.dtype = dtype;
  const size_t element = dtypeBytes(dtype);
  const size_t total = bytes / element;
  const bool perRank = op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter;
  buffers.count = perRank ? total / ranks : total;
  buffers.data.resize((op == CollectiveOp::ReduceScatter ? buffers.count * ranks : buffers.count) *
                      element);
  if (op == CollectiveOp::AllGather) buffers.out.resize(buffers.count * ranks * element);
  if (op == CollectiveOp::ReduceScatter) buffers.out.resize(buffers.count * element);
  return buffers;
}

void fill(Buffers& b, int rank) {
  std::vector<float> values(b.dataCount());
  for (size_t i = 0; i < values.size(); ++i) values[i] = initialValue(rank, i);
  runtime::fromFloat(values.data(), b.data.data(), values.size(), b.dtype);
}

void runOp(CollectiveOp op, runtime::Communicator& comm, Buffers& b) {
  switch (op) {
    case CollectiveOp::AllReduce:
      comm.allReduce(b.data.data(), b.count, b.dtype);
      break;
    case CollectiveOp::AllGather:
      comm.allGather(b.data.data(), b.out.data(), b.count, b.dtype);
      break;
    case CollectiveOp::ReduceScatter:
      comm.reduceScatter(b.data.data(), b.out.data(), b.count, b.dtype);
      break;
    case CollectiveOp::Broadcast:
      comm.broadcast(b.data.data(), b.count, b.dtype, 0);
      break;
    case CollectiveOp::Send:
    case CollectiveOp::Recv:
    case CollectiveOp::Barrier:  // parseJobArgs takes only the four above
    case CollectiveOp::AllToAll:
      throw Error(std::string("ds-comm-bench: ") + collectiveOpName(op) + " is not a bench op");
  }
}

// Wrong elements on this rank after one op from initial values. Expected values are rounded to
// the dtype once, as the backends round their fp32 sums.
size_t countErrors(CollectiveOp op, runtime::Communicator& comm, Buffers& b) {
  const int n = comm.size();
  fill(b, comm.rank());
  runOp(op, comm, b);
  const std::vector<char>& result =
      op == CollectiveOp::AllReduce || op == CollectiveOp::Broadcast ? b.data : b.out;
  std::vector<float> got(result.size() / dtypeBytes(b.dtype));
  runtime::toFloat(result.data(), got.data(), got.size(), b.dtype);
  auto rounded = [&](float value) {
    std::vector<char> bits(dtypeBytes(b.dtype));
    runtime::fromFloat(&value, bits.data(), 1, b.dtype);
    runtime::toFloat(bits.data(), &value, 1, b.dtype);
    return value;
  };
  const auto sumAt = [&](size_t i) {
    return rounded(static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7)));
  };
  size_t errors = 0;
  for (size_t i = 0; i < b.count; ++i) {
    if (op == CollectiveOp::AllReduce)
      errors += got[i] != sumAt(i);
    else if (op == CollectiveOp::Broadcast)
      errors += got[i] != initialValue(0, i);
    else if (op == CollectiveOp::ReduceScatter)
      errors += got[i] != sumAt(comm.rank() * b.count + i);
    else
      for (int r = 0; r < n; ++r) errors += got[r * b.count + i] != initialValue(r, i);
  }
  return errors;
}

}  // namespace

bool runCommBench(const CommBenchOptions& options, runtime::Communicator& comm) {
  const int n = comm.size();
  const DType dtype = options.dtype;
  const char* opName = collectiveOpName(options.op);
  const bool printing = comm.rank() == 0;
  if (printing && !options.json) {
    std::printf("ds-comm-bench: %s %s, %d ranks, %s, %d iterations\n", opName, dtypeName(dtype), n,
                comm.backendName().c_str(), options.iters);
    std::printf("%14s %12s %12s %12s %12s %8s\n", "bytes", "count", "time us", "algbw GB/s",
                "busbw GB/s", options.check ? "check" : "");
  }
  bool allCorrect = true;
  for (uint64_t bytes = options.minBytes; bytes <= options.maxBytes; bytes *= 2) {
    Buffers buffers = buffersFor(options.op, bytes, n, dtype);
    fill(buffers, comm.rank());
    for (int i = 0; i < options.warmup; ++i) runOp(options.op, comm, buffers);
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.iters; ++i) runOp(options.op, comm, buffers);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
        options.iters;
    std::string check;
    if (options.check) {
      float errors[1] = {static_cast<float>(countErrors(options.op, comm, buffers))};
      comm.allReduce(errors, 1);
      check = errors[0] == 0.0f ? "ok" : "FAILED";
      allCorrect = allCorrect && errors[0] == 0.0f;
    }
    const double algbw = bytes / seconds / 1e9;
    const double busbw = algbw * busBandwidthFactor(options.op, n);
    if (printing && options.json) {
      JsonLine line = {{"op", opName},
                       {"dtype", dtypeName(dtype)},
                       {"bytes", bytes},
                       {"ranks", n},
                       {"time_us", rounded(seconds * 1e6, 1)},
                       {"algbw_GBps", rounded(algbw, 3)},
                       {"busbw_GBps", rounded(busbw, 3)}};
      if (options.check) line["check"] = check == "ok";
      printJsonLine(line);
    } else if (printing) {
      std::printf("%14llu %12zu %12.1f %12.3f %12.3f %8s\n", static_cast<unsigned long long>(bytes),
                  buffers.count, seconds * 1e6, algbw, busbw, check.c_str());
    }
    std::fflush(stdout);
    if (bytes > options.maxBytes / 2) break;  // no overflow past the top
  }
  return allCorrect;
}

}  // namespace ds::worker
