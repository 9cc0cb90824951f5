// GlooCommunicator: Communicator over Gloo's TCP transport, rendezvous through a ds Store.
// All-reduce uses Gloo's ring-chunked algorithm object, built once per (buffer, count) and reused:
// the options-style gloo::allreduce stalls ~40 ms per call on loopback (BUILD-NOTES.md).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/store.h"

namespace gloo {
class Context;
class Algorithm;
}  // namespace gloo

namespace ds::runtime {

struct GlooOptions {
  std::string bindAddress;  // the address this rank's transport listens on (its host)
  std::string storePrefix;  // unique per membership epoch and group
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(Store& store, int rank, int size, const GlooOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allReduce(float* data, size_t count, ReduceOp op) override;
  void allGather(const float* in, float* out, size_t countPerRank) override;
  void reduceScatterSum(const float* in, float* out, size_t countPerRank) override;
  void broadcast(float* data, size_t count, int root) override;
  void barrier() override;

 private:
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
  std::map<std::tuple<float*, size_t, bool>, std::unique_ptr<gloo::Algorithm>> allReduces_;
  // Per size, so the all-reduce built for it is reused.
  std::map<size_t, std::vector<float>> reduceScatterScratch_;
  uint32_t nextTag_ = 0;
};

}  // namespace ds::runtime
