// CoordinatorClient over gRPC. Blocking KV calls get a gRPC deadline a little past the store
// timeout, so a vanished coordinator surfaces as an error instead of a hang.
#include "worker/coordinator_client.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "coordinator.grpc.pb.h"
#include "grpc_process.h"

namespace ds::worker {
namespace {

constexpr auto kRpcTimeout = std::chrono::seconds(10);
constexpr auto kDeadlineSlack = std::chrono::seconds(5);

std::chrono::system_clock::time_point deadlineIn(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

proto::WorkerState toProto(RankState state) {
  switch (state) {
    case RankState::Starting:
      return proto::WORKER_STATE_STARTING;
    case RankState::Rendezvous:
      return proto::WORKER_STATE_RENDEZVOUS;
    case RankState::Training:
      return proto::WORKER_STATE_TRAINING;
    case RankState::Finished:
      return proto::WORKER_STATE_FINISHED;
    case RankState::Failed:
      return proto::WORKER_STATE_FAILED;
    case RankState::Waiting:  // never sent: a rank that runs has joined
      break;
  }
  return proto::WORKER_STATE_UNSPECIFIED;
}

}  // namespace

struct CoordinatorClient::Impl {
  std::string address;
  std::string token;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<proto::Coordinator::Stub> stub;

  void fill(proto::JobAuth* auth, uint64_t epoch) const {
    auth->set_token(token);
    auth->set_epoch(epoch);
  }

  // One unary call: auth filled in, a deadline set, a failure thrown as ds::Error/TimeoutError.
  template <typename Request, typename Invoke>
  void call(Request& request, uint64_t epoch, std::chrono::milliseconds deadline,
            const std::string& what, Invoke invoke) const {
    fill(request.mutable_auth(), epoch);
    grpc::ClientContext context;
    context.set_deadline(deadlineIn(deadline));
    check(invoke(&context), what);
  }

  void check(const grpc::Status& status, const std::string& what) const {
    if (status.ok()) return;
    const std::string message =
        "coordinator " + address + ": " + what + ": " + status.error_message();
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) throw TimeoutError(message);
    throw Error(message);
  }
};

CoordinatorClient::CoordinatorClient(const std::string& address, std::string token,
                                     const TlsFiles& tls)
    : impl_(std::make_unique<Impl>()) {
  impl_->address = address;
  impl_->token = std::move(token);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!tls.certPem.empty() || !tls.caPem.empty()) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = tls.caPem;
    options.pem_private_key = tls.keyPem;
    options.pem_cert_chain = tls.certPem;
    credentials = grpc::SslCredentials(options);
  }
  // Keepalive: a frozen or unreachable coordinator breaks the channel (and the Watch stream)
  // within about 10 s even when no call is in flight, instead of never.
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  prepareGrpcProcess();
  impl_->channel = grpc::CreateCustomChannel(address, credentials, arguments);
  impl_->stub = proto::Coordinator::NewStub(impl_->channel);
}

CoordinatorClient::~CoordinatorClient() = default;

JoinResult CoordinatorClient::join(const JoinIdentity& identity,
                                   std::chrono::milliseconds timeout) {
  proto::JoinRequest request;
  impl_->fill(request.mutable_auth(), 0);
  request.set_host(identity.host);
  request.set_local_slot(identity.slot);
  request.set_by_rank(identity.rank >= 0);
  request.set_rank(identity.rank);
  char nodeName[256] = {};
  gethostname(nodeName, sizeof(nodeName) - 1);
  request.set_node_name(nodeName);
  request.set_pid(static_cast<int32_t>(::getpid()));
  proto::JoinReply reply;
  grpc::ClientContext context;
  // wait_for_ready: the coordinator may still be starting; queue the call until it listens.
  context.set_wait_for_ready(true);
  context.set_deadline(deadlineIn(timeout));
  impl_->check(impl_->stub->Join(&context, request, &reply), "join as " + identity.describe());
  JoinResult result;
  result.rank = reply.rank();
  result.worldSize = reply.world_size();
  result.localRank = reply.local_rank();
  result.localSize = reply.local_size();
  result.configJson = reply.config_json();
  result.jobArgs.assign(reply.job_args().begin(), reply.job_args().end());
  result.epoch = reply.epoch();
  result.heartbeatInterval = std::chrono::milliseconds(reply.heartbeat_interval_ms());
  if (reply.heartbeat_timeout_ms() > 0)
    result.heartbeatTimeout = std::chrono::milliseconds(reply.heartbeat_timeout_ms());
  result.host = reply.host();
  result.slot = reply.slot();
  result.nodeRank = reply.node_rank();
  result.nodeCount = reply.node_count();
  result.nodeSlots.assign(reply.node_slots().begin(), reply.node_slots().end());
  result.nodeSizes.assign(reply.node_sizes().begin(), reply.node_sizes().end());
  result.programModule = reply.program().module();
  result.programNoPython = reply.program().no_python();
  result.programNoLocalRank = reply.program().no_local_rank();
  result.python = reply.program().python();
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
  impl_->call(request, epoch_, kRpcTimeout, "set \"" + key + "\"",
              [&](auto* context) { return impl_->stub->KvSet(context, request, &reply); });
}

std::string CoordinatorClient::kvGet(const std::string& key, std::chrono::milliseconds timeout) {
  proto::KvGetRequest request;
  request.set_key(key);
  request.set_timeout_ms(static_cast<uint32_t>(timeout.count()));
  proto::KvGetReply reply;
  impl_->call(request, epoch_, timeout + kDeadlineSlack, "get \"" + key + "\"",
              [&](auto* context) { return impl_->stub->KvGet(context, request, &reply); });
  return reply.value();
}

void CoordinatorClient::kvWait(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  proto::KvWaitRequest request;
  for (const auto& key : keys) request.add_keys(key);
  request.set_timeout_ms(static_cast<uint32_t>(timeout.count()));
  proto::KvWaitReply reply;
  impl_->call(request, epoch_, timeout + kDeadlineSlack, "wait",
              [&](auto* context) { return impl_->stub->KvWait(context, request, &reply); });
}

int64_t CoordinatorClient::kvAdd(const std::string& key, int64_t delta) {
  proto::KvAddRequest request;
  request.set_key(key);
  request.set_delta(delta);
  proto::KvAddReply reply;
  impl_->call(request, epoch_, kRpcTimeout, "add \"" + key + "\"",
              [&](auto* context) { return impl_->stub->KvAdd(context, request, &reply); });
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
  impl_->call(request, epoch_, kRpcTimeout,
              "set " + std::to_string(entries.size()) + " keys",
              [&](auto* context) { return impl_->stub->KvMultiSet(context, request, &reply); });
}

std::vector<std::string> CoordinatorClient::kvMultiGet(const std::vector<std::string>& keys,
                                                       std::chrono::milliseconds timeout) {
  proto::KvMultiGetRequest request;
  for (const auto& key : keys) request.add_keys(key);
  request.set_timeout_ms(static_cast<uint32_t>(timeout.count()));
  proto::KvMultiGetReply reply;
  impl_->call(request, epoch_, timeout + kDeadlineSlack,
              "get " + std::to_string(keys.size()) + " keys",
              [&](auto* context) { return impl_->stub->KvMultiGet(context, request, &reply); });
  if (reply.values_size() != static_cast<int>(keys.size()))
    throw Error("coordinator: get of " + std::to_string(keys.size()) + " keys returned " +
                std::to_string(reply.values_size()) + " values");
  return {reply.values().begin(), reply.values().end()};
}

bool CoordinatorClient::heartbeat(const Progress& progress) {
  proto::HeartbeatRequest request;
  impl_->fill(request.mutable_auth(), epoch_);
  request.set_rank(rank_);
  request.set_state(toProto(progress.state));
  request.set_step(progress.step);
  request.set_loss(progress.loss);
  request.set_samples_per_sec(progress.samplesPerSecond);
  request.set_resident_bytes(progress.residentBytes);
  request.set_phase(progress.phase);
  proto::HeartbeatReply reply;
  grpc::ClientContext context;
  context.set_deadline(deadlineIn(heartbeatDeadline_));
  return impl_->stub->Heartbeat(&context, request, &reply).ok();
}

void CoordinatorClient::report(const RankReport& report) {
  proto::ReportRequest request;
  request.set_rank(rank_);
  request.set_exit_status(report.exitStatus);
  request.set_error(report.error);
  request.set_steps(report.steps);
  request.set_last_loss(report.lastLoss);
  request.set_wall_seconds(report.wallSeconds);
  for (const auto& [name, value] : report.metrics) (*request.mutable_metrics())[name] = value;
  for (const auto& stat : report.commStats) {
    auto* row = request.add_comm_stats();
    row->set_op(stat.op);
    row->set_bytes(stat.bytes);
    row->set_count(stat.count);
    row->set_total_seconds(stat.totalSeconds);
    row->set_min_seconds(stat.minSeconds);
    row->set_max_seconds(stat.maxSeconds);
  }
  proto::ReportReply reply;
  impl_->call(request, epoch_, kRpcTimeout, "report",
              [&](auto* context) { return impl_->stub->Report(context, request, &reply); });
}

std::pair<bool, std::string> CoordinatorClient::offer(const std::string& host, int slots) {
  proto::OfferRequest request;
  request.set_host(host);
  request.set_slots(slots);
  proto::OfferReply reply;
  impl_->call(request, 0, kRpcTimeout, "offer",
              [&](auto* context) { return impl_->stub->Offer(context, request, &reply); });
  return {reply.accepted(), reply.message()};
}

void CoordinatorClient::watch(
    const std::function<void(CommandKind, const std::string&)>& onCommand) {
  proto::WatchRequest request;
  impl_->fill(request.mutable_auth(), epoch_);
  request.set_rank(rank_);
  grpc::ClientContext context;
  auto reader = impl_->stub->Watch(&context, request);
  proto::Command command;
  while (reader->Read(&command)) {
    if (command.kind() == proto::Command::STOP) onCommand(CommandKind::Stop, command.reason());
    if (command.kind() == proto::Command::ABORT) onCommand(CommandKind::Abort, command.reason());
  }
  const grpc::Status status = reader->Finish();
  onCommand(CommandKind::CoordinatorGone,
            status.ok() ? "the coordinator closed the command stream" : status.error_message());
}

}  // namespace ds::worker
