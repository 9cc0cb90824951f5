// ds-comm-bench: sizes double from --min to --max; per size, warm-up ops, a barrier, then --iters
// timed ops. Rank 0's time is reported (every rank leaves the last op within one barrier of the
// others). Check values are small integers, so sums are exact in float32.
#include "worker/comm_bench_job.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "runtime/comm/comms_logger.h"
#include "runtime/comm/elementwise_reduce.h"
#include "common/error.h"

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

Buffers buffersFor(const std::string& op, uint64_t bytes, int ranks, DType dtype) {
  Buffers buffers;
  buffers.dtype = dtype;
  const size_t element = dtypeBytes(dtype);
  const size_t total = bytes / element;
  const bool perRank = op == "all_gather" || op == "reduce_scatter";
  buffers.count = perRank ? total / ranks : total;
  buffers.data.resize((op == "reduce_scatter" ? buffers.count * ranks : buffers.count) * element);
  if (op == "all_gather") buffers.out.resize(buffers.count * ranks * element);
  if (op == "reduce_scatter") buffers.out.resize(buffers.count * element);
  return buffers;
}

void fill(Buffers& b, int rank) {
  std::vector<float> values(b.dataCount());
  for (size_t i = 0; i < values.size(); ++i) values[i] = initialValue(rank, i);
  runtime::fromFloat(values.data(), b.data.data(), values.size(), b.dtype);
}

void runOp(const std::string& op, runtime::Communicator& comm, Buffers& b) {
  if (op == "all_reduce")
    comm.allReduce(b.data.data(), b.count, b.dtype);
  else if (op == "all_gather")
    comm.allGather(b.data.data(), b.out.data(), b.count, b.dtype);
  else if (op == "reduce_scatter")
    comm.reduceScatter(b.data.data(), b.out.data(), b.count, b.dtype);
  else
    comm.broadcast(b.data.data(), b.count, b.dtype, 0);
}

// Wrong elements on this rank after one op from initial values. Expected values are rounded to
// the dtype once, as the backends round their fp32 sums.
size_t countErrors(const std::string& op, runtime::Communicator& comm, Buffers& b) {
  const int n = comm.size();
  fill(b, comm.rank());
  runOp(op, comm, b);
  const std::vector<char>& result = op == "all_reduce" || op == "broadcast" ? b.data : b.out;
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
    if (op == "all_reduce")
      errors += got[i] != sumAt(i);
    else if (op == "broadcast")
      errors += got[i] != initialValue(0, i);
    else if (op == "reduce_scatter")
      errors += got[i] != sumAt(comm.rank() * b.count + i);
    else
      for (int r = 0; r < n; ++r) errors += got[r * b.count + i] != initialValue(r, i);
  }
  return errors;
}

}  // namespace

uint64_t parseByteSize(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  uint64_t scale = 1;
  const std::string suffix = end;
  if (end == text.c_str() || text[0] == '-')
    throw Error("ds-comm-bench " + flag + ": \"" + text + "\" is not a size (e.g. 1K, 64M, 1G)");
  if (suffix == "K" || suffix == "k")
    scale = uint64_t{1} << 10;
  else if (suffix == "M" || suffix == "m")
    scale = uint64_t{1} << 20;
  else if (suffix == "G" || suffix == "g")
    scale = uint64_t{1} << 30;
  else if (!suffix.empty())
    throw Error("ds-comm-bench " + flag + ": \"" + text + "\" is not a size (e.g. 1K, 64M, 1G)");
  return value * scale;
}

CommBenchOptions parseCommBenchOptions(const std::vector<std::string>& jobArgs) {
  CommBenchOptions options;
  for (size_t i = 1; i < jobArgs.size(); ++i) {
    const std::string& arg = jobArgs[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= jobArgs.size()) throw Error("ds-comm-bench " + arg + ": missing value");
      return jobArgs[++i];
    };
    if (arg == "--op")
      options.op = value();
    else if (arg == "--dtype")
      options.dtype = value();
    else if (arg == "--min")
      options.minBytes = parseByteSize(arg, value());
    else if (arg == "--max")
      options.maxBytes = parseByteSize(arg, value());
    else if (arg == "--iters")
      options.iters = std::atoi(value().c_str());
    else if (arg == "--warmup")
      options.warmup = std::atoi(value().c_str());
    else if (arg == "--backend")
      options.backend = value();
    else if (arg == "--check")
      options.check = true;
    else if (arg == "--json")
      options.json = true;
    else
      throw Error("ds-comm-bench: unknown argument \"" + arg + "\"");
  }
  if (options.op != "all_reduce" && options.op != "all_gather" && options.op != "broadcast" &&
      options.op != "reduce_scatter")
    throw Error("ds-comm-bench --op " + options.op +
                ": use all_reduce, all_gather, reduce_scatter or broadcast");
  const DType dtype = parseDType(options.dtype, "ds-comm-bench --dtype");
  if (options.minBytes < dtypeBytes(dtype) || options.maxBytes < options.minBytes)
    throw Error("ds-comm-bench: --min " + std::to_string(options.minBytes) + " / --max " +
                std::to_string(options.maxBytes) + ": need one element <= min <= max bytes");
  if (options.backend != "auto" && options.backend != "shm" && options.backend != "hierarchical" &&
      options.backend != "gloo")
    throw Error("ds-comm-bench --backend " + options.backend +
                ": use auto, shm, hierarchical or gloo");
  if (options.iters < 1) throw Error("ds-comm-bench --iters: at least 1");
  return options;
}

bool runCommBench(const CommBenchOptions& options, runtime::Communicator& comm) {
  const int n = comm.size();
  const DType dtype = parseDType(options.dtype, "ds-comm-bench --dtype");
  const bool printing = comm.rank() == 0;
  if (printing && !options.json) {
    std::printf("ds-comm-bench: %s %s, %d ranks, %s, %d iterations\n", options.op.c_str(),
                options.dtype.c_str(), n, comm.backendName().c_str(), options.iters);
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
    const double busbw = algbw * runtime::busBandwidthFactor(options.op, n);
    if (printing && options.json) {
      std::printf(
          "{\"op\": \"%s\", \"dtype\": \"%s\", \"bytes\": %llu, \"ranks\": %d, "
          "\"time_us\": %.1f, \"algbw_GBps\": %.3f, \"busbw_GBps\": %.3f%s}\n",
          options.op.c_str(), options.dtype.c_str(), static_cast<unsigned long long>(bytes), n,
          seconds * 1e6, algbw, busbw,
          options.check ? (check == "ok" ? ", \"check\": true" : ", \"check\": false") : "");
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
