// The built-in `ds-comm-bench` job, like nccl-tests: one collective over a range of message sizes,
// timed on every rank; rank 0 prints size, time, algorithm and bus bandwidth (nccl-tests'
// convention: all_reduce x 2(n-1)/n, all_gather and reduce_scatter x (n-1)/n, broadcast x 1), or
// one JSON object per size with --json, and with --check verifies every rank's result.
//   ds-launch [flags] ds-comm-bench --op all_reduce --min 1K --max 256M [--dtype fp32|bf16|fp16]
//             [--iters N] [--check]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"

namespace ds::worker {

struct CommBenchOptions {
  std::string op = "all_reduce";
  std::string dtype = "fp32";
  std::string backend = "auto";  // as the config's comm_backend
  uint64_t minBytes = 1024;
  uint64_t maxBytes = uint64_t{64} << 20;
  int iters = 20;
  int warmup = 5;
  bool check = false;
  bool json = false;
};

// Parses the job's arguments (jobArgs[0] is "ds-comm-bench"); throws ds::Error naming the flag.
CommBenchOptions parseCommBenchOptions(const std::vector<std::string>& jobArgs);

// "64M" -> 67108864 (K, M, G are powers of 1024); throws ds::Error for anything else.
uint64_t parseByteSize(const std::string& flag, const std::string& text);

// Runs the sweep; returns false when --check found a wrong result on any rank.
bool runCommBench(const CommBenchOptions& options, runtime::Communicator& comm);

}  // namespace ds::worker
