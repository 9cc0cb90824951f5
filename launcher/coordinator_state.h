// Coordinator::State: the job's state behind the coordinator and the gRPC service that serves it.
// Private to launcher/coordinator*.cc (it brings gRPC's headers). The service is split by job:
// coordinator.cc (threading model; membership: join, heartbeat, report, offer),
// coordinator_store_rpcs.cc (the key-value store's calls) and coordinator_streams.cc (commands
// down Watch and NodeSession streams, a relay's messages up).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator.grpc.pb.h"
#include "launcher/coordinator.h"
#include "runtime/comm/memory_store.h"

namespace ds::launcher {

struct Coordinator::State final : proto::Coordinator::CallbackService {
  // Where broadcast() sends commands: a rank's Watch stream or a relay's NodeSession.
  class CommandSink {
   public:
    virtual ~CommandSink() = default;
    virtual void pump() = 0;                        // starts writing the next queued command
    virtual void end(const grpc::Status& why) = 0;  // finishes the stream once
  };
  template <class Reactor>
  class CommandWriter;
  class WatchStream;
  class NodeSessionStream;
  class RefusedWatch;
  class RefusedSession;

  CoordinatorOptions options;
  runtime::MemoryStore store;
  mutable std::mutex mutex;
  std::vector<RankStatus> ranks;
  std::vector<int> nodeSizes;  // ranks per node, by node rank: the same in every JoinReply
  std::map<std::pair<std::string, int>, const RankPlacement*> slotOf;  // (host, slot) -> plan entry
  std::map<std::string, std::vector<int>> hostSlots;  // every slot id of each host, in plan order
  std::vector<std::pair<CommandKind, std::string>> commands;  // every worker receives all, in order
  std::vector<NodeOffer> offers;                              // accepted, not yet taken
  bool shuttingDown = false;
  std::mutex streamsMutex;
  std::set<CommandSink*> streams;
  size_t openStreams = 0;  // reserved by reserveStream, given back when a stream is done
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  // Refusals are logged at most kRefusalsPerSecond a second: a flood of bad requests must not
  // flood the launcher's stderr (the rest are counted and reported with the next line).
  static constexpr int kRefusalsPerSecond = 10;
  std::mutex refusalMutex;
  std::chrono::steady_clock::time_point refusalWindow{};
  int refusalsInWindow = 0, refusalsSuppressed = 0;

  // Admission and its log (coordinator.cc).
  void logRefusal(grpc::CallbackServerContext* context, const std::string& rpc,
                  const std::string& why);
  // Checks token and epoch; logs and returns the refusal otherwise.
  grpc::Status admit(grpc::CallbackServerContext* context, const proto::JobAuth& auth,
                     const char* rpc, bool anyEpoch = false);
  static grpc::ServerUnaryReactor* finished(grpc::CallbackServerContext* context,
                                            const grpc::Status& status);

  // Membership (coordinator.cc).
  bool validRank(int rank) const { return rank >= 0 && rank < static_cast<int>(ranks.size()); }
  void markLost(int rank);
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const proto::JoinRequest* request,
                                 proto::JoinReply* reply) override;
  grpc::Status join(grpc::CallbackServerContext* context, const proto::JoinRequest* request,
                    proto::JoinReply* reply);
  grpc::ServerUnaryReactor* NodeJoin(grpc::CallbackServerContext* context,
                                     const proto::NodeJoinRequest* request,
                                     proto::NodeJoinReply* reply) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const proto::HeartbeatRequest* request,
                                      proto::HeartbeatReply*) override;
  // A rank's heartbeat, sent by itself or batched by its node's relay. False for an unknown rank.
  bool recordHeartbeat(const proto::HeartbeatRequest& beat);
  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* context,
                                   const proto::ReportRequest* request,
                                   proto::ReportReply*) override;
  grpc::ServerUnaryReactor* Offer(grpc::CallbackServerContext* context,
                                  const proto::OfferRequest* request,
                                  proto::OfferReply* reply) override;
  grpc::Status offer(grpc::CallbackServerContext* context, const proto::OfferRequest* request,
                     proto::OfferReply* reply);

  // The key-value store (coordinator_store_rpcs.cc).
  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context,
                                  const proto::KvSetRequest* request, proto::KvSetReply*) override;
  grpc::ServerUnaryReactor* KvMultiSet(grpc::CallbackServerContext* context,
                                       const proto::KvMultiSetRequest* request,
                                       proto::KvMultiSetReply*) override;
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const proto::KvGetRequest* request,
                                  proto::KvGetReply* reply) override;
  grpc::ServerUnaryReactor* KvMultiGet(grpc::CallbackServerContext* context,
                                       const proto::KvMultiGetRequest* request,
                                       proto::KvMultiGetReply* reply) override;
  grpc::ServerUnaryReactor* KvWait(grpc::CallbackServerContext* context,
                                   const proto::KvWaitRequest* request,
                                   proto::KvWaitReply*) override;
  grpc::ServerUnaryReactor* KvAdd(grpc::CallbackServerContext* context,
                                  const proto::KvAddRequest* request,
                                  proto::KvAddReply* reply) override;
  // Admission, then a store operation that does not block; its ds::Error becomes the status.
  template <typename Request, typename Operation>
  grpc::ServerUnaryReactor* storeCall(grpc::CallbackServerContext* context, const Request* request,
                                      const char* rpc, Operation operation);
  // Admission, then a wait for `keys` parked in the store; `fill` writes their values into the
  // reply when they all exist.
  template <typename Request, typename Fill>
  grpc::ServerUnaryReactor* storeWait(grpc::CallbackServerContext* context, const Request* request,
                                      const char* rpc, std::vector<std::string> keys, Fill fill);

  // Command streams (coordinator_streams.cc).
  grpc::ServerWriteReactor<proto::Command>* Watch(grpc::CallbackServerContext* context,
                                                  const proto::WatchRequest* request) override;
  grpc::ServerBidiReactor<proto::NodeUp, proto::Command>* NodeSession(
      grpc::CallbackServerContext* context) override;
  // Registers a stream admitted to receive commands: it gets every command queued so far, or
  // ends at once when shutdown() has already ended the others.
  void openStream(CommandSink* stream);
  // Takes one of the job's bounded command-stream places (given back in the stream's OnDone), or
  // says why not.
  grpc::Status reserveStream(grpc::CallbackServerContext* context, const char* rpc);
};

}  // namespace ds::launcher
