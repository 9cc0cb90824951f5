// The built-in `ds-comm-bench` job, like nccl-tests: one collective over a range of message sizes,
// timed on every rank; rank 0 prints size, time, algorithm and bus bandwidth (nccl-tests'
// convention: all_reduce x 2(n-1)/n, all_gather and reduce_scatter x (n-1)/n, broadcast x 1), or
// one JSON object per size with --json, and with --check verifies every rank's result.
//   ds-launch [flags] ds-comm-bench --op all_reduce --min 1K --max 256M [--dtype fp32|bf16|fp16]
//             [--iters N] [--check]
// Its options are parsed with the other jobs' (contract/job_args.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract/job_args.h"
#include "runtime/comm/communicator.h"

namespace ds::worker {

// Runs the sweep; returns false when --check found a wrong result on any rank.
bool runCommBench(const CommBenchOptions& options, runtime::Communicator& comm);

}  // namespace ds::worker
