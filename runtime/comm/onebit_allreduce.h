// DeepSpeed's 1-bit compressed all-reduce with error feedback (the momentum exchange of 1-bit
// Adam, 0/1 Adam and 1-bit LAMB: deepspeed/runtime/comm/nccl.py's compressed_allreduce), as an
// operation over any Communicator. Each rank adds its worker error to its buffer, sends the
// signs of the sum (one bit each, +1 for zero) and one scale (||buffer|| / sqrt(n)), and keeps
// what that compression lost as its new worker error. Rank j of the group is the "server" of
// chunk j: it averages every rank's scaled signs of its chunk, adds its server error,
// compresses the result the same way (keeping the loss as its server error) and every rank
// gathers every chunk's signs and scale. So a rank sends about 2 bits per element instead of an
// all-reduce's 64 (fp32), and the errors carry what was lost into the next call, which is what
// makes the compressed steps converge (Tang et al., 2021).
//
// The buffer is padded with zeros to oneBitPaddedCount elements: each rank's chunk a whole number
// of 16-bit words of signs, which travel through the 16-bit collectives unchanged. (DeepSpeed pads
// to a multiple of lcm(size, 8) for its byte-packed signs; the padding only shifts where the
// chunks end.)
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/comm/communicator.h"

namespace ds::runtime {

// The padded element count for `count` elements over `ranks` ranks: a multiple of 16 x ranks.
size_t oneBitPaddedCount(size_t count, int ranks);

// The error feedback of one buffer, kept across calls (and saved with the optimizer's state):
// the worker error over the padded buffer and the server error over this rank's chunk of it.
struct OneBitErrors {
  std::vector<float> worker, server;
  // Zeroed and sized for `count` elements over `ranks` ranks.
  void reset(size_t count, int ranks);
};

// In place over data[0, count): the group's compressed average of data (its error feedback in
// `errors`, sized by reset for this count and group). Collective: every rank of `comm` calls it
// with the same count.
void oneBitAllReduce(Communicator& comm, float* data, size_t count, OneBitErrors& errors);

}  // namespace ds::runtime
