// DeepSpeed's `aio` block as typed values: how the offload I/O engine reads and writes. Parsed by
// runtime/config/ds_config.cc; kept beside the engine, in a header of its own, so the config layer
// needs none of the engine.
#pragma once

#include <cstdint>

namespace ds::runtime {

// DeepSpeed's `aio` block, with its defaults.
struct AioConfig {
  int64_t blockSize = 1 << 20;
  int64_t queueDepth = 8;
  int64_t threadCount = 1;
  bool singleSubmit = false;   // one io_submit per request instead of a batch per refill
  bool overlapEvents = true;   // refill the queue as completions arrive, not when it drains
  bool useGds = false;         // GPU direct storage: not here (no GPU)
  void validate() const;       // throws ds::Error naming the aio key
};

}  // namespace ds::runtime
