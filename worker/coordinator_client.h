// CoordinatorClient: the worker's side of proto/coordinator.proto. Every request carries the job
// token and the epoch. gRPC stays behind the pimpl so this header is cheap to include.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "contract/program_options.h"
#include "contract/rank_contract.h"
#include "contract/rank_placement.h"

namespace ds::worker {

// What a rank learns when it joins: where it runs (its placement, which it extends: the rank's
// code reads join.rank, join.worldSize), the job, and how to start an external program.
struct JoinResult : RankPlacement {
  std::string configJson;
  std::vector<std::string> jobArgs;
  uint64_t epoch = 0;
  std::chrono::milliseconds heartbeatInterval{1000};
  std::chrono::milliseconds heartbeatTimeout{10000};
  std::vector<int> nodeSlots;  // every slot id of this rank's node (CUDA_VISIBLE_DEVICES)
  std::vector<int> nodeSizes;  // ranks per node, by node rank
  ProgramOptions program;
};

// Who a worker is when it joins: a host and slot (started by ds-launch or a node agent), or a
// global rank (started by mpirun or srun).
struct JoinIdentity {
  std::string host;
  int slot = -1;
  int rank = -1;  // >= 0: join by rank
  std::string describe() const {
    return rank >= 0 ? "rank " + std::to_string(rank) : host + " slot " + std::to_string(slot);
  }
};

// The route to the coordinator through the node's relay (worker/node_relay.h): the relay's socket,
// relaySocketName(...).
struct ViaRelay {
  std::string socketName;
};

class CoordinatorClient {
 public:
  // Straight to the coordinator over gRPC.
  CoordinatorClient(const std::string& address, std::string token, const TlsFiles& tls = {});
  // Through the node's relay; `address` (the coordinator's) only names it in messages.
  CoordinatorClient(const std::string& address, std::string token, const ViaRelay& relay);
  ~CoordinatorClient();

  // Retries until `timeout` while the coordinator is not reachable yet; a refusal throws at once.
  JoinResult join(const JoinIdentity& identity, std::chrono::milliseconds timeout);

  void kvSet(const std::string& key, const std::string& value);
  std::string kvGet(const std::string& key, std::chrono::milliseconds timeout);
  void kvWait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  int64_t kvAdd(const std::string& key, int64_t delta);
  // One round trip each: every entry set; every key's value once all exist.
  void kvMultiSet(const std::vector<std::pair<std::string, std::string>>& entries);
  std::vector<std::string> kvMultiGet(const std::vector<std::string>& keys,
                                      std::chrono::milliseconds timeout);

  // `ds-worker --join`: offers this node's slots to a running elastic job. Returns whether the
  // job takes it and the coordinator's words.
  std::pair<bool, std::string> offer(const std::string& host, int slots);

  // Returns false when the coordinator could not be reached.
  bool heartbeat(const Progress& progress);
  void report(const RankReport& report);

  // Blocks reading the command stream; calls onCommand for each command and once with
  // CoordinatorGone when the stream ends or breaks. Run it on its own thread.
  void watch(const std::function<void(CommandKind, const std::string& reason)>& onCommand);

  int rank() const { return rank_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = -1;
  uint64_t epoch_ = 0;
  // A heartbeat waits no longer than the job's heartbeat timeout (a frozen coordinator must not
  // hold the heartbeat thread past the point where it should give up).
  std::chrono::milliseconds heartbeatDeadline_{10000};
};

}  // namespace ds::worker
