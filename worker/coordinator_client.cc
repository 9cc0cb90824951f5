// CoordinatorClient: requests built here, carried by a transport (gRPC, or the node relay).
// Blocking KV calls get a deadline a little past the store timeout, so a vanished coordinator
// surfaces as an error instead of a hang.
#include "worker/coordinator_client.h"

#include <grpcpp/support/status_code_enum.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "proto/contract_conversion.h"
#include "worker/coordinator_transport.h"
#include "worker/grpc_entry.h"
#include "worker/local_address.h"

namespace ds::worker {
namespace {

constexpr auto kRpcTimeout = std::chrono::seconds(10);
constexpr auto kDeadlineSlack = std::chrono::seconds(5);

}  // namespace

struct CoordinatorClient::Impl {
  std::string address;
  std::string token;
  std::unique_ptr<CoordinatorTransport> transport;

  void fill(proto::JobAuth* auth, uint64_t epoch) const {
    auth->set_token(token);
    auth->set_epoch(epoch);
  }

  // One unary call: auth filled in, a deadline set, a failure thrown as ds::Error/TimeoutError.
  template <typename Request>
  void call(CoordinatorMethod method, Request& request, google::protobuf::Message* reply,
            uint64_t epoch, std::chrono::milliseconds deadline, const std::string& what,
            bool waitForReady = false) const {
    fill(request.mutable_auth(), epoch);
    check(transport->call(method, request, reply, deadline, waitForReady), what);
  }

  void check(const TransportStatus& status, const std::string& what) const {
    if (status.ok()) return;
    const std::string message = "coordinator " + address + ": " + what + ": " + status.message;
    if (status.code == static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED))
      throw TimeoutError(message);
    throw Error(message);
  }
};

CoordinatorClient::CoordinatorClient(const std::string& address, std::string token,
                                     const TlsFiles& tls)
    : impl_(std::make_unique<Impl>()) {
  impl_->address = address;
  impl_->token = std::move(token);
  impl_->transport = grpcEntryPoints().makeGrpcTransport(address, tls);
}

CoordinatorClient::CoordinatorClient(const std::string& address, std::string token,
                                     const ViaRelay& relay)
    : impl_(std::make_unique<Impl>()) {
  impl_->address = address;
  impl_->token = std::move(token);
  impl_->transport = makeRelayTransport(relay.socketName);
}

CoordinatorClient::~CoordinatorClient() = default;

JoinResult CoordinatorClient::join(const JoinIdentity& identity,
                                   std::chrono::milliseconds timeout) {
  proto::JoinRequest request;
  request.set_host(identity.host);
  request.set_local_slot(identity.slot);
  request.set_by_rank(identity.rank >= 0);
  request.set_rank(identity.rank);
  request.set_node_name(machineName());
  request.set_pid(static_cast<int32_t>(::getpid()));
  proto::JoinReply reply;
  // Wait for ready: the coordinator (or the node's relay) may still be starting.
  impl_->call(CoordinatorMethod::Join, request, &reply, 0, timeout,
              "join as " + identity.describe(), true);
  JoinResult result;
  static_cast<RankPlacement&>(result) = placementFromProto(reply);
  result.configJson = reply.config_json();
  result.jobArgs.assign(reply.job_args().begin(), reply.job_args().end());
  result.epoch = reply.epoch();
  result.heartbeatInterval = std::chrono::milliseconds(reply.heartbeat_interval_ms());
  if (reply.heartbeat_timeout_ms() > 0)
    result.heartbeatTimeout = std::chrono::milliseconds(reply.heartbeat_timeout_ms());
  result.nodeSlots.assign(reply.node_slots().begin(), reply.node_slots().end());
  result.nodeSizes.assign(reply.node_sizes().begin(), reply.node_sizes().end());
  result.program = fromProto(reply.program());
  rank_ = result.rank;
  epoch_ = result.epoch;
  heartbeatDeadline_ = std::min<std::chrono::milliseconds>(kRpcTimeout, result.heartbeatTimeout);
  return result;
}

void CoordinatorClient::kvSet(const std::string& key, const std::string& value) {
  proto::KvSetRequest request;
  request.set_key(key);
  request.set_value(value);
  proto::KvSetReply reply;
  impl_->call(CoordinatorMethod::KvSet, request, &reply, epoch_, kRpcTimeout,
              "set \"" + key + "\"");
}

std::string CoordinatorClient::kvGet(const std::string& key, std::chrono::milliseconds timeout) {
  proto::KvGetRequest request;
  request.set_key(key);
  request.set_timeout_ms(static_cast<uint32_t>(timeout.count()));
  proto::KvGetReply reply;
  impl_->call(CoordinatorMethod::KvGet, request, &reply, epoch_, timeout + kDeadlineSlack,
              "get \"" + key + "\"");
  return reply.value();
}

void CoordinatorClient::kvWait(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  proto::KvWaitRequest request;
  for (const auto& key : keys) request.add_keys(key);
  request.set_timeout_ms(static_cast<uint32_t>(timeout.count()));
  proto::KvWaitReply reply;
  impl_->call(CoordinatorMethod::KvWait, request, &reply, epoch_, timeout + kDeadlineSlack,
              "wait");
}

int64_t CoordinatorClient::kvAdd(const std::string& key, int64_t delta) {
  proto::KvAddRequest request;
  request.set_key(key);
  request.set_delta(delta);
  proto::KvAddReply reply;
  impl_->call(CoordinatorMethod::KvAdd, request, &reply, epoch_, kRpcTimeout,
              "add \"" + key + "\"");
  return reply.value();
}

void CoordinatorClient::kvMultiSet(
    const std::vector<std::pair<std::string, std::string>>& entries) {
  proto::KvMultiSetRequest request;
  for (const auto& [key, value] : entries) {
    proto::KvEntry* entry = request.add_entries();
    entry->set_key(key);
    entry->set_value(value);
  }
  proto::KvMultiSetReply reply;
  impl_->call(CoordinatorMethod::KvMultiSet, request, &reply, epoch_, kRpcTimeout,
              "set " + std::to_string(entries.size()) + " keys");
}

std::vector<std::string> CoordinatorClient::kvMultiGet(const std::vector<std::string>& keys,
                                                       std::chrono::milliseconds timeout) {
  proto::KvMultiGetRequest request;
  for (const auto& key : keys) request.add_keys(key);
  request.set_timeout_ms(static_cast<uint32_t>(timeout.count()));
  proto::KvMultiGetReply reply;
  impl_->call(CoordinatorMethod::KvMultiGet, request, &reply, epoch_, timeout + kDeadlineSlack,
              "get " + std::to_string(keys.size()) + " keys");
  if (reply.values_size() != static_cast<int>(keys.size()))
    throw Error("coordinator: get of " + std::to_string(keys.size()) + " keys returned " +
                std::to_string(reply.values_size()) + " values");
  return {reply.values().begin(), reply.values().end()};
}

bool CoordinatorClient::heartbeat(const Progress& progress) {
  proto::HeartbeatRequest request;
  impl_->fill(request.mutable_auth(), epoch_);
  request.set_rank(rank_);
  toProto(progress, &request);
  proto::HeartbeatReply reply;
  return impl_->transport
      ->call(CoordinatorMethod::Heartbeat, request, &reply, heartbeatDeadline_, false)
      .ok();
}

void CoordinatorClient::report(const RankReport& report) {
  proto::ReportRequest request;
  request.set_rank(rank_);
  toProto(report, &request);
  proto::ReportReply reply;
  impl_->call(CoordinatorMethod::Report, request, &reply, epoch_, kRpcTimeout,
              "report");
}

std::pair<bool, std::string> CoordinatorClient::offer(const std::string& host, int slots) {
  proto::OfferRequest request;
  request.set_host(host);
  request.set_slots(slots);
  proto::OfferReply reply;
  impl_->call(CoordinatorMethod::Offer, request, &reply, 0, kRpcTimeout,
              "offer");
  return {reply.accepted(), reply.message()};
}

void CoordinatorClient::watch(
    const std::function<void(CommandKind, const std::string&)>& onCommand) {
  proto::WatchRequest request;
  impl_->fill(request.mutable_auth(), epoch_);
  request.set_rank(rank_);
  const TransportStatus status =
      impl_->transport->watch(request, [&](const proto::Command& command) {
        if (const std::optional<CommandKind> kind = fromProto(command.kind()))
          onCommand(*kind, command.reason());
      });
  onCommand(CommandKind::CoordinatorGone,
            status.ok() ? "the coordinator closed the command stream" : status.message);
}

}  // namespace ds::worker
