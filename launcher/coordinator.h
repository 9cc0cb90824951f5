// Coordinator: the job's gRPC server. Assigns ranks to joining workers from the launch plan, serves
// the key-value store, records heartbeats and final reports, and pushes commands (stop, abort) to
// every worker's open Watch stream. gRPC stays in coordinator*.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/comm_stat.h"
#include "contract/program_options.h"
#include "contract/rank_contract.h"
#include "contract/rank_placement.h"

namespace ds::launcher {

struct CoordinatorOptions {
  std::string bindAddress;
  int port = 0;  // 0: any free port
  std::string token;
  std::string configJson;
  std::vector<std::string> jobArgs;
  std::vector<RankPlacement> ranks;  // the plan, by rank; its size is the world size
  std::chrono::milliseconds heartbeatInterval{1000};
  std::chrono::milliseconds heartbeatTimeout{10000};
  ProgramOptions program;  // how external programs are started (ignored by the built-in job)
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
  RankStatus() { progress.state = RankState::Waiting; }  // until the rank joins
  bool joined = false;
  int pid = 0;
  Progress progress;     // the latest heartbeat's, or the report's
  std::string nodeName;  // the worker's own host name
  bool hostsRelay = false;  // its process hosts its node's relay: the node goes silent with it
  bool lost = false;     // its command stream broke before it reported: the process is gone
  std::chrono::steady_clock::time_point lostAt{};
  std::chrono::steady_clock::time_point lastHeartbeat{};
  std::chrono::steady_clock::time_point lastProgress{};  // when progress.step last changed
  std::chrono::steady_clock::time_point joinedAt{};
  std::optional<std::chrono::steady_clock::time_point> trainingAt;   // first heartbeat in Training
  std::optional<std::chrono::steady_clock::time_point> firstStepAt;  // first heartbeat past step 0
  std::optional<RankReport> report;
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
