// Coordinator: the job's gRPC server. Assigns ranks to joining workers from the launch plan, serves
// the key-value store, records heartbeats and final reports, and pushes commands (stop, abort) to
// every worker's open Watch stream. gRPC stays in coordinator*.cc.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "contract/rank_contract.h"
#include "common/comm_stat.h"

namespace ds::launcher {

struct RankSlot {
  int rank = 0;
  std::string host;
  int slot = 0;  // slot index on the host, from the hostfile's slot numbering
  int localRank = 0;
  int localSize = 0;
  int nodeRank = 0;  // CROSS_RANK: the host's index in the plan
  int nodeCount = 1;
};

struct CoordinatorOptions {
  std::string bindAddress;
  int port = 0;  // 0: any free port
  std::string token;
  std::string configJson;
  std::vector<std::string> jobArgs;
  std::vector<RankSlot> ranks;
  std::chrono::milliseconds heartbeatInterval{1000};
  std::chrono::milliseconds heartbeatTimeout{10000};
  // How external programs are started (ignored by the built-in job).
  bool programModule = false;
  bool programNoPython = false;
  bool programNoLocalRank = false;
  std::string python = "python3";
  // Mutual TLS when all three are set: PEM file contents, not paths.
  TlsFiles tls;
  // The membership epoch: every request must carry it (a worker learns it when it joins); an
  // elastic job starts each new membership with the next epoch, so a worker of an earlier one is
  // refused and told why.
  uint64_t epoch = 1;
  // Elastic jobs: decides on a node offered by `ds-worker --join` ("" takes it, otherwise the
  // reason it is refused). Unset: every offer is refused (the job is not elastic).
  std::function<std::string(const std::string& host, int slots)> admitOffer;
};

struct NodeOffer {
  std::string host;
  int slots = 0;
};

struct RankStatus {
  bool joined = false;
  int pid = 0;
  RankState state = RankState::Waiting;
  int64_t step = 0;
  double loss = 0.0;
  double samplesPerSecond = 0.0;
  int64_t residentBytes = 0;
  std::string phase;
  std::string nodeName;  // the worker's own host name
  bool hostsRelay = false;  // its process hosts its node's relay: the node goes silent with it
  bool lost = false;     // its command stream broke before it reported: the process is gone
  std::chrono::steady_clock::time_point lostAt{};
  std::chrono::steady_clock::time_point lastHeartbeat{};
  std::chrono::steady_clock::time_point lastProgress{};  // when `step` last changed
  std::chrono::steady_clock::time_point joinedAt{};
  std::optional<std::chrono::steady_clock::time_point> trainingAt;   // first heartbeat in Training
  std::optional<std::chrono::steady_clock::time_point> firstStepAt;  // first heartbeat past step 0
  std::optional<RankReport> report;
  std::optional<CollectiveWait> collective;  // from its last heartbeat, as Progress carries it
};

class Coordinator {
 public:
  // Starts listening on bindAddress:port; throws ds::Error naming the address when it cannot.
  explicit Coordinator(CoordinatorOptions options);
  ~Coordinator();

  int port() const;
  std::string address() const;  // host:port workers connect to
  std::vector<RankStatus> snapshot() const;
  // Sent to every worker whose Watch stream is open now or opens later.
  void broadcast(CommandKind command, const std::string& reason);
  // Ends every stream, fails every blocked store call, stops the server.
  void shutdown();
  // Nodes accepted through Offer since the last call.
  bool hasOffers() const;
  std::vector<NodeOffer> takeOffers();

 private:
  struct State;  // the gRPC service and the job's state, in coordinator.cc
  std::unique_ptr<State> state_;
};

// Why the coordinator could not listen on address:port (for the error message).
std::string whyListenFailed(const std::string& address, int port, bool tls);

}  // namespace ds::launcher
