// Communicator: the collectives the runtime needs, over a fixed group of ranks. The first backend
// is Gloo over TCP; shared memory and NCCL come with the collectives issue. Ops are blocking and
// every one is bounded by the communicator's timeout (a dead peer fails the op, never hangs it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace ds::runtime {

enum class ReduceOp { Sum, Avg, Max };
const char* reduceOpName(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: data[i] = sum (average, maximum) over ranks of data[i]. Every rank gets
  // bitwise-identical results.
  virtual void allReduce(float* data, size_t count, ReduceOp op) = 0;
  void allReduceSum(float* data, size_t count) { allReduce(data, count, ReduceOp::Sum); }
  // out holds size() * countPerRank elements; rank r's `in` lands at out + r * countPerRank.
  virtual void allGather(const float* in, float* out, size_t countPerRank) = 0;
  // in holds size() * countPerRank elements; out (countPerRank) gets the sum over ranks of block
  // rank() of everyone's `in`.
  virtual void reduceScatterSum(const float* in, float* out, size_t countPerRank) = 0;
  virtual void broadcast(float* data, size_t count, int root) = 0;
  virtual void barrier() = 0;
};

// Reduce-scatter as an all_reduce of a copy of `in`, keeping this rank's block: correct, at twice
// the traffic of a real reduce-scatter. `scratch` is the caller's, so a backend that caches
// per-buffer state (Gloo's algorithms) keeps one buffer per size.
inline void reduceScatterByAllReduce(Communicator& comm, const float* in, float* out,
                                     size_t countPerRank, std::vector<float>& scratch) {
  scratch.assign(in, in + countPerRank * comm.size());
  comm.allReduceSum(scratch.data(), scratch.size());
  std::copy_n(scratch.begin() + static_cast<size_t>(comm.rank()) * countPerRank, countPerRank, out);
}

}  // namespace ds::runtime
