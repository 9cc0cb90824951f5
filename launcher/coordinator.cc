// Coordinator: the gRPC service, its admission and membership calls (join, heartbeat, report,
// offer) and its lifetime. The store calls are in coordinator_store_rpcs.cc, the command streams in
// coordinator_streams.cc; the state they share in coordinator_state.h.
//
// Threading model: the service runs on gRPC's callback API. Every handler runs on one of gRPC's few
// callback threads (about one per core, whatever the number of ranks) and returns without
// blocking. Unary calls finish at once. KvGet, KvWait and KvMultiGet park a callback in the
// MemoryStore (runtime/comm/memory_store.h), completed by the set that adds their last key, by the
// store's timer thread at the deadline, by the client's cancellation or by shutdown(). Each Watch
// stream, and each node relay's NodeSession, is a reactor that holds no thread: broadcast() queues
// a command and starts a write on every open stream, and a stream that breaks marks its ranks lost
// at once. A NodeSession reads its relay's messages (attached ranks, batched heartbeats, lost
// ranks) one at a time in OnReadDone. So parked reads and open streams cost memory, not threads,
// and nothing polls.
// Locks: `mutex` guards the job's state shared with ds-launch's threads (ranks, commands, offers);
// `streamsMutex` the set of open streams; each stream its own write state (and a NodeSession its
// attached ranks). Order: streamsMutex,
// then a stream's lock, then mutex. gRPC runs OnWriteDone and OnDone of a stream on its own
// threads, never inside our StartWrite or Finish, so holding streamsMutex across those is safe.
#include "launcher/coordinator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <mutex>

#include "common/allocator_policy.h"
#include "common/constant_time.h"
#include "common/error.h"
#include "grpc_process.h"
#include "launcher/coordinator_state.h"
#include "launcher/hostfile.h"
#include "proto/contract_conversion.h"

namespace ds::launcher {
namespace {

// A node has at most this many ranks (slot ids are below 65536 too).
constexpr int kMaxJoinsPerBatch = 65536;

// Text from a client, fit for one log line: at most 120 bytes, control bytes as '?'.
std::string oneLogLine(const std::string& text) {
  std::string out = text.substr(0, 120);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return text.size() > 120 ? out + "..." : out;
}

}  // namespace

void Coordinator::State::logRefusal(grpc::CallbackServerContext* context, const std::string& rpc,
                                    const std::string& why) {
  std::lock_guard lock(refusalMutex);
  const auto now = std::chrono::steady_clock::now();
  if (now - refusalWindow >= std::chrono::seconds(1)) {
    refusalWindow = now;
    refusalsInWindow = 0;
  }
  if (++refusalsInWindow > kRefusalsPerSecond) {
    ++refusalsSuppressed;
    return;
  }
  std::cerr << "ds-launch: coordinator refused " << rpc << " from " << oneLogLine(context->peer())
            << ": " << oneLogLine(why);
  if (refusalsSuppressed > 0)
    std::cerr << " (" << refusalsSuppressed << " more refusals not shown)";
  std::cerr << '\n';
  refusalsSuppressed = 0;
}

grpc::Status Coordinator::State::admit(grpc::CallbackServerContext* context,
                                       const proto::JobAuth& auth, const char* rpc, bool anyEpoch) {
  if (!constantTimeEquals(auth.token(), options.token)) {
    logRefusal(context, rpc, "wrong job token");
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "wrong job token");
  }
  if (!(anyEpoch && auth.epoch() == 0) && auth.epoch() != options.epoch) {
    logRefusal(context, rpc,
               "stale epoch " + std::to_string(auth.epoch()) + " (current " +
                   std::to_string(options.epoch) + ")");
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "stale membership epoch " + std::to_string(auth.epoch()) + ", current is " +
                            std::to_string(options.epoch));
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* Coordinator::State::finished(grpc::CallbackServerContext* context,
                                                       const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

void Coordinator::State::markLost(int rank) {
  std::lock_guard lock(mutex);
  if (validRank(rank) && !shuttingDown && !ranks[rank].report && !ranks[rank].lost) {
    ranks[rank].lost = true;
    ranks[rank].lostAt = std::chrono::steady_clock::now();
  }
}

grpc::ServerUnaryReactor* Coordinator::State::Join(grpc::CallbackServerContext* context,
                                                   const proto::JoinRequest* request,
                                                   proto::JoinReply* reply) {
  return finished(context, join(context, request, reply));
}

grpc::Status Coordinator::State::join(grpc::CallbackServerContext* context,
                                      const proto::JoinRequest* request, proto::JoinReply* reply) {
  if (auto status = admit(context, request->auth(), "Join", true); !status.ok()) return status;
  const RankPlacement* slot = nullptr;
  if (request->by_rank()) {
    if (request->rank() >= 0 && request->rank() < static_cast<int>(options.ranks.size()))
      slot = &options.ranks[request->rank()];
  } else if (auto it = slotOf.find({request->host(), request->local_slot()}); it != slotOf.end()) {
    slot = it->second;
  }
  if (slot == nullptr && request->by_rank()) {
    logRefusal(context, "Join",
               "rank " + std::to_string(request->rank()) + " is not in the plan (world size " +
                   std::to_string(options.ranks.size()) + ")");
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "rank " + std::to_string(request->rank()) +
                            " is not part of this job (world size " +
                            std::to_string(options.ranks.size()) +
                            "): does mpirun/srun start more ranks than the hostfile has slots?");
  }
  if (slot == nullptr) {
    logRefusal(context, "Join",
               "host " + request->host() + " slot " + std::to_string(request->local_slot()) +
                   " is not in the plan");
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "host " + oneLogLine(request->host()) + " slot " +
                            std::to_string(request->local_slot()) + " is not part of this job");
  }
  {
    std::lock_guard lock(mutex);
    auto& status = ranks[slot->rank];
    if (status.joined) {
      logRefusal(context, "Join",
                 "rank " + std::to_string(slot->rank) + " already joined (pid " +
                     std::to_string(status.pid) + ")");
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                          "rank " + std::to_string(slot->rank) + " has already joined");
    }
    status.joined = true;
    status.pid = request->pid();
    status.nodeName = request->node_name();
    status.progress.state = RankState::Starting;
    status.joinedAt = status.lastHeartbeat = status.lastProgress = std::chrono::steady_clock::now();
  }
  toProto(*slot, reply);
  reply->set_config_json(options.configJson);
  for (const auto& arg : options.jobArgs) reply->add_job_args(arg);
  reply->set_epoch(options.epoch);
  reply->set_heartbeat_interval_ms(static_cast<uint32_t>(options.heartbeatInterval.count()));
  reply->set_heartbeat_timeout_ms(static_cast<uint32_t>(options.heartbeatTimeout.count()));
  for (int id : hostSlots.at(slot->host)) reply->add_node_slots(id);
  for (int size : nodeSizes) reply->add_node_sizes(size);
  toProto(options.program, reply->mutable_program());
  return grpc::Status::OK;
}

// A relay's batch of joins: each one admitted and answered on its own.
grpc::ServerUnaryReactor* Coordinator::State::NodeJoin(grpc::CallbackServerContext* context,
                                                       const proto::NodeJoinRequest* request,
                                                       proto::NodeJoinReply* reply) {
  if (request->joins_size() > kMaxJoinsPerBatch)
    return finished(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                          "a NodeJoin carries at most " +
                                              std::to_string(kMaxJoinsPerBatch) + " joins"));
  for (const auto& one : request->joins()) {
    proto::NodeJoinResult* result = reply->add_results();
    const grpc::Status status = join(context, &one, result->mutable_reply());
    result->set_code(status.error_code());
    result->set_message(status.error_message());
    if (!status.ok()) result->clear_reply();
  }
  return finished(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* Coordinator::State::Heartbeat(grpc::CallbackServerContext* context,
                                                        const proto::HeartbeatRequest* request,
                                                        proto::HeartbeatReply*) {
  if (auto status = admit(context, request->auth(), "Heartbeat"); !status.ok())
    return finished(context, status);
  if (!recordHeartbeat(*request))
    return finished(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown rank"));
  return finished(context, grpc::Status::OK);
}

bool Coordinator::State::recordHeartbeat(const proto::HeartbeatRequest& beat) {
  std::lock_guard lock(mutex);
  if (!validRank(beat.rank())) return false;
  auto& status = ranks[beat.rank()];
  // The report is a rank's last word: a relay holds heartbeats up to an interval, so an older one
  // can arrive after it (on the relay's stream, while the report went up on its own call).
  if (status.report) return true;
  // When the rank sent it: a relay holds heartbeats up to an interval before passing them on.
  const auto now = std::chrono::steady_clock::now() -
                   std::chrono::milliseconds(std::min<uint32_t>(beat.age_ms(), 3600 * 1000));
  Progress progress = fromProto(beat, now);
  if (progress.step != status.progress.step) status.lastProgress = now;
  if (progress.state == RankState::Training && !status.trainingAt) status.trainingAt = now;
  if (progress.step > 0 && !status.firstStepAt) status.firstStepAt = now;
  status.progress = std::move(progress);
  status.lastHeartbeat = std::max(status.lastHeartbeat, now);
  return true;
}

grpc::ServerUnaryReactor* Coordinator::State::Report(grpc::CallbackServerContext* context,
                                                     const proto::ReportRequest* request,
                                                     proto::ReportReply*) {
  if (auto status = admit(context, request->auth(), "Report"); !status.ok())
    return finished(context, status);
  std::lock_guard lock(mutex);
  if (!validRank(request->rank()))
    return finished(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown rank"));
  RankReport report = fromProto(*request);
  auto& status = ranks[request->rank()];
  status.progress.state = report.exitStatus == 0 ? RankState::Finished : RankState::Failed;
  status.progress.step = report.steps;
  status.progress.loss = report.lastLoss;
  status.report = std::move(report);
  return finished(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* Coordinator::State::Offer(grpc::CallbackServerContext* context,
                                                    const proto::OfferRequest* request,
                                                    proto::OfferReply* reply) {
  return finished(context, offer(context, request, reply));
}

grpc::Status Coordinator::State::offer(grpc::CallbackServerContext* context,
                                       const proto::OfferRequest* request,
                                       proto::OfferReply* reply) {
  if (auto status = admit(context, request->auth(), "Offer", true); !status.ok()) return status;
  const std::string host = request->host();
  const int slots = request->slots();
  std::string refusal;
  // A joining node's name reaches the same command lines as the hostfile's names: the same rules.
  if (const std::string problem = hostNameProblem(host); !problem.empty())
    refusal = "host " + oneLogLine(host) + ": " + problem;
  else if (slots < 1 || slots > 65536)
    refusal = "an offer needs 1..65536 slots, not " + std::to_string(slots);
  else if (!options.admitOffer)
    refusal = "this job is not elastic (ds-launch --elastic_training takes nodes that join)";
  else
    refusal = options.admitOffer(host, slots);
  if (!refusal.empty()) {
    logRefusal(context, "Offer", refusal);
    reply->set_accepted(false);
    reply->set_message(refusal);
    return grpc::Status::OK;
  }
  std::lock_guard lock(mutex);
  for (const NodeOffer& o : offers)
    if (o.host == host) {
      reply->set_accepted(false);
      reply->set_message(host + " has offered itself already; it joins at the next checkpoint");
      return grpc::Status::OK;
    }
  offers.push_back({host, slots});
  std::cerr << "ds-launch: elastic: " << oneLogLine(host) << " offers " << slots
            << " slots; it joins at the next checkpoint\n";
  reply->set_accepted(true);
  reply->set_message("accepted: ds-launch starts " + std::to_string(slots) + " ranks on " + host +
                     " at the next checkpoint");
  return grpc::Status::OK;
}

Coordinator::Coordinator(CoordinatorOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->ranks.resize(state_->options.ranks.size());
  for (auto& rank : state_->options.ranks) {
    rank.worldSize = static_cast<int>(state_->options.ranks.size());  // the plan is the world
    if (rank.nodeRank >= static_cast<int>(state_->nodeSizes.size()))
      state_->nodeSizes.resize(rank.nodeRank + 1, 0);
    ++state_->nodeSizes[rank.nodeRank];
    state_->slotOf[{rank.host, rank.slot}] = &rank;
    state_->hostSlots[rank.host].push_back(rank.slot);
  }
  prepareGrpcProcess();
  // Thousands of calls allocate and free the same sizes: keep freed memory for reuse rather than
  // trimming and growing the heaps again (sysmalloc was 9% of a 8192-rank start-up).
  ds::keepFreedMemoryForReuse();
  const std::string listen =
      state_->options.bindAddress + ":" + std::to_string(state_->options.port);
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second job on the same port would then bind "successfully"
  // and its workers would reach the first job's coordinator. Refuse the port instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Keepalive both ways: the server pings idle workers so a vanished node's Watch stream breaks,
  // and accepts the workers' own pings (worker/coordinator_client.cc) however often they come.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // No bandwidth-delay probing: control messages are small, and each probe is a ping and a timer
  // per burst of data received (it took 1024 relays' heartbeats from 4% to 7-10% of a core).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // Each open stream costs its call's state (about 70 KB measured) until it ends, even one refused
  // at once: bound how many one connection may have in flight, so a client opening streams in a
  // burst waits for earlier ones to end instead of growing the launcher (20,000 streams took it
  // from 18 to 313 MB). The busiest legitimate connection is a node relay's, with a few calls per
  // rank of its node in flight (parked store waits among them: a bound below that would hold back
  // the calls that release them); a worker's own connection can park hundreds of reads.
  const auto& sizes = state_->nodeSizes;
  const int largestNode = sizes.empty() ? 1 : *std::max_element(sizes.begin(), sizes.end());
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, std::max(512, 4 * largestNode + 64));
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!state_->options.tls.certPem.empty()) {
    grpc::SslServerCredentialsOptions tls(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = state_->options.tls.caPem;
    tls.pem_key_cert_pairs.push_back({state_->options.tls.keyPem, state_->options.tls.certPem});
    credentials = grpc::SslServerCredentials(tls);
  }
  builder.AddListeningPort(listen, credentials, &state_->port);
  builder.RegisterService(state_.get());
  state_->server = builder.BuildAndStart();
  if (!state_->server || state_->port == 0)
    throw Error("coordinator: cannot listen on " + listen + ": " +
                whyListenFailed(state_->options.bindAddress, state_->options.port,
                                !state_->options.tls.certPem.empty()));
}

Coordinator::~Coordinator() { shutdown(); }

// gRPC reports only that the server did not start; a plain bind of the same address tells a port
// in use or a foreign address apart from a certificate or key that gRPC refused.
std::string whyListenFailed(const std::string& address, int port, bool tls) {
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &where.sin_addr) == 1) {
    const int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const int bound = bind(probe, reinterpret_cast<sockaddr*>(&where), sizeof(where));
    const int error = errno;
    close(probe);
    if (bound != 0 && error == EADDRINUSE)
      return "port " + std::to_string(port) + " is in use; choose another with --master_port";
    if (bound != 0 && error == EADDRNOTAVAIL)
      return address + " is not an address of this machine; fix --master_addr";
  }
  if (tls)
    return "gRPC refused the TLS certificate or key (check that --tls-cert and --tls-key are PEM "
           "files of one key pair)";
  return "address not local or port in use; choose another with --master_addr/--master_port";
}

int Coordinator::port() const { return state_->port; }

std::string Coordinator::address() const {
  return state_->options.bindAddress + ":" + std::to_string(state_->port);
}

bool Coordinator::hasOffers() const {
  std::lock_guard lock(state_->mutex);
  return !state_->offers.empty();
}

std::vector<NodeOffer> Coordinator::takeOffers() {
  std::lock_guard lock(state_->mutex);
  return std::exchange(state_->offers, {});
}

std::vector<RankStatus> Coordinator::snapshot() const {
  std::lock_guard lock(state_->mutex);
  return state_->ranks;
}

void Coordinator::shutdown() {
  {
    std::lock_guard lock(state_->mutex);
    if (state_->shuttingDown) return;
    state_->shuttingDown = true;
  }
  state_->store.close("the job has ended");  // fails every parked read
  {
    // Streams end with OK: a worker reads that as "the coordinator is gone" and exits.
    std::lock_guard lock(state_->streamsMutex);
    for (auto* stream : state_->streams) stream->end(grpc::Status::OK);
  }
  state_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  state_->server->Wait();
}

}  // namespace ds::launcher
