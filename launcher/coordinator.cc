// Coordinator: the gRPC service implementation.
//
// Threading model: the service runs on gRPC's callback API. Every handler runs on one of gRPC's few
// callback threads (about one per core, whatever the number of ranks) and returns without
// blocking. Unary calls finish at once. KvGet, KvWait and KvMultiGet park a callback in the
// MemoryStore (runtime/comm/memory_store.h), completed by the set that adds their last key, by the
// store's timer thread at the deadline, by the client's cancellation or by shutdown(). Each Watch
// stream, and each node relay's NodeSession, is a reactor that holds no thread: broadcast() queues a
// command and starts a write on every open stream, and a stream that breaks marks its ranks lost
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
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "common/constant_time.h"
#include "common/error.h"
#include "coordinator.grpc.pb.h"
#include "grpc_process.h"
#include "runtime/comm/memory_store.h"
#include "runtime/common/allocator_policy.h"

namespace ds::launcher {
namespace {

// Bounds any single blocking store call, whatever the client asks for.
constexpr uint32_t kMaxStoreWaitMs = 10 * 60 * 1000;
// A node has at most this many ranks (slot ids are below 65536 too).
constexpr int kMaxJoinsPerBatch = 65536;

RankState fromProto(proto::WorkerState state) {
  switch (state) {
    case proto::WORKER_STATE_STARTING:
      return RankState::Starting;
    case proto::WORKER_STATE_RENDEZVOUS:
      return RankState::Rendezvous;
    case proto::WORKER_STATE_TRAINING:
      return RankState::Training;
    case proto::WORKER_STATE_FINISHED:
      return RankState::Finished;
    case proto::WORKER_STATE_FAILED:
      return RankState::Failed;
    default:
      return RankState::Starting;
  }
}

// Text from a client, fit for one log line: at most 120 bytes, control bytes as '?'.
std::string printable(const std::string& text) {
  std::string out = text.substr(0, 120);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return text.size() > 120 ? out + "..." : out;
}

grpc::Status storeError(const Error& e) {
  if (dynamic_cast<const TimeoutError*>(&e))
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, e.what());
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, e.what());
}

}  // namespace

// A KvGet, KvWait or KvMultiGet parked in the store until its keys exist.
class StoreWait final : public grpc::ServerUnaryReactor {
 public:
  explicit StoreWait(runtime::MemoryStore& store) : store_(store) {}
  // The store's wait id, shared with the handler that learns it after this may be gone.
  std::shared_ptr<std::atomic<uint64_t>> id = std::make_shared<std::atomic<uint64_t>>(0);
  void OnCancel() override { store_.cancelWait(id->load()); }  // completes it with an error
  void OnDone() override { delete this; }

 private:
  runtime::MemoryStore& store_;
};

struct Coordinator::State final : proto::Coordinator::CallbackService {
  // Where broadcast() sends commands: a rank's Watch stream or a relay's NodeSession.
  class CommandSink {
   public:
    virtual ~CommandSink() = default;
    virtual void pump() = 0;                        // starts writing the next queued command
    virtual void end(const grpc::Status& why) = 0;  // finishes the stream once
  };

  // The write half both kinds of stream share: commands are written one at a time, in order, as
  // broadcast() queues them; the stream ends with OK at shutdown, and one that breaks loses the
  // ranks it carries.
  template <class Reactor>
  class CommandWriter : public Reactor, public CommandSink {
   public:
    explicit CommandWriter(State& state) : state_(state) {}
    void pump() override;
    void end(const grpc::Status& why) override;
    void OnWriteDone(bool ok) override;
    void OnCancel() override { broke(); }
    void OnDone() override;

   protected:
    virtual void loseRanks() = 0;  // the worker or the node behind the stream is gone
    void broke() {
      loseRanks();
      end(grpc::Status::CANCELLED);
    }
    State& state_;

   private:
    std::mutex mutex_;
    bool writing_ = false, finished_ = false;
    std::optional<grpc::Status> finishAfterWrite_;
    size_t sent_ = 0;
    proto::Command command_;
  };

  // One rank's Watch stream.
  class CommandStream final : public CommandWriter<grpc::ServerWriteReactor<proto::Command>> {
   public:
    CommandStream(State& state, int rank) : CommandWriter(state), rank_(rank) {}

   private:
    // A stream that breaks before the rank reported means its process is gone (killed, crashed,
    // its node lost): on every backend this is how an exit is seen at once.
    void loseRanks() override { state_.markLost(rank_); }
    const int rank_;
  };

  // A node relay's stream: commands down for every rank it attached, heartbeats and losses up.
  class NodeSession final
      : public CommandWriter<grpc::ServerBidiReactor<proto::NodeUp, proto::Command>> {
   public:
    NodeSession(State& state, grpc::CallbackServerContext* context)
        : CommandWriter(state), context_(context) {
      StartRead(&up_);
    }
    void OnReadDone(bool ok) override;

   private:
    void loseRanks() override;
    grpc::CallbackServerContext* const context_;
    bool admitted_ = false;  // read and written only by OnReadDone, one at a time
    proto::NodeUp up_;
    std::mutex attachedMutex_;
    std::vector<int> attached_;
    int hostRank_ = -1;  // the rank whose process hosts the relay, if one does
  };

  CoordinatorOptions options;
  runtime::MemoryStore store;
  mutable std::mutex mutex;
  std::vector<RankStatus> ranks;
  std::vector<int> nodeSizes;  // ranks per node, by node rank: the same in every JoinReply
  std::map<std::pair<std::string, int>, const RankSlot*> slotOf;  // (host, slot) -> plan entry
  std::map<std::string, std::vector<int>> hostSlots;  // every slot id of each host, in plan order
  std::vector<std::pair<CommandKind, std::string>> commands;  // every worker receives all, in order
  bool shuttingDown = false;
  std::mutex streamsMutex;
  std::set<CommandSink*> streams;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  // Refusals are logged at most kRefusalsPerSecond a second: a flood of bad requests must not
  // flood the launcher's stderr (the rest are counted and reported with the next line).
  static constexpr int kRefusalsPerSecond = 10;
  std::mutex refusalMutex;
  std::chrono::steady_clock::time_point refusalWindow{};
  int refusalsInWindow = 0, refusalsSuppressed = 0;

  void logRefusal(grpc::CallbackServerContext* context, const std::string& rpc,
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
    std::cerr << "ds-launch: coordinator refused " << rpc << " from " << printable(context->peer())
              << ": " << printable(why);
    if (refusalsSuppressed > 0)
      std::cerr << " (" << refusalsSuppressed << " more refusals not shown)";
    std::cerr << '\n';
    refusalsSuppressed = 0;
  }

  // Checks token and epoch; logs and returns the refusal otherwise.
  grpc::Status admit(grpc::CallbackServerContext* context, const proto::JobAuth& auth,
                     const char* rpc, bool anyEpoch = false) {
    if (!constantTimeEquals(auth.token(), options.token)) {
      logRefusal(context, rpc, "wrong job token");
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "wrong job token");
    }
    if (!(anyEpoch && auth.epoch() == 0) && auth.epoch() != options.epoch) {
      logRefusal(context, rpc,
                 "stale epoch " + std::to_string(auth.epoch()) + " (current " +
                     std::to_string(options.epoch) + ")");
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "stale membership epoch " + std::to_string(auth.epoch()) +
                              ", current is " + std::to_string(options.epoch));
    }
    return grpc::Status::OK;
  }

  static grpc::ServerUnaryReactor* finished(grpc::CallbackServerContext* context,
                                            const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  // Admission, then a store operation that does not block; its ds::Error becomes the status.
  template <typename Request, typename Operation>
  grpc::ServerUnaryReactor* storeCall(grpc::CallbackServerContext* context,
                                      const Request* request, const char* rpc,
                                      Operation operation) {
    if (auto status = admit(context, request->auth(), rpc); !status.ok())
      return finished(context, status);
    try {
      operation();
    } catch (const Error& e) {
      return finished(context, storeError(e));
    }
    return finished(context, grpc::Status::OK);
  }

  // Admission, then a wait for `keys` parked in the store; `fill` writes their values into the
  // reply when they all exist.
  template <typename Request, typename Fill>
  grpc::ServerUnaryReactor* storeWait(grpc::CallbackServerContext* context,
                                      const Request* request, const char* rpc,
                                      std::vector<std::string> keys, Fill fill) {
    if (auto status = admit(context, request->auth(), rpc); !status.ok())
      return finished(context, status);
    auto* wait = new StoreWait(store);
    const std::shared_ptr<std::atomic<uint64_t>> id = wait->id;
    try {
      // `wait` may be finished and deleted before waitAsync returns: only `id` is touched after.
      id->store(store.waitAsync(std::move(keys), storeTimeout(request->timeout_ms()),
                                [wait, fill](std::exception_ptr error,
                                             std::vector<std::string> values) {
                                  grpc::Status status = grpc::Status::OK;
                                  try {
                                    if (error) std::rethrow_exception(error);
                                    fill(values);
                                  } catch (const Error& e) {
                                    status = storeError(e);
                                  }
                                  wait->Finish(status);
                                }));
    } catch (const Error& e) {  // refused before anything was parked (too many keys)
      delete wait;
      return finished(context, storeError(e));
    }
    return wait;
  }

  static std::chrono::milliseconds storeTimeout(uint32_t requestedMs) {
    return std::chrono::milliseconds(std::min(requestedMs, kMaxStoreWaitMs));
  }

  bool validRank(int rank) const { return rank >= 0 && rank < static_cast<int>(ranks.size()); }

  void markLost(int rank) {
    std::lock_guard lock(mutex);
    if (validRank(rank) && !shuttingDown && !ranks[rank].report && !ranks[rank].lost) {
      ranks[rank].lost = true;
      ranks[rank].lostAt = std::chrono::steady_clock::now();
    }
  }

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const proto::JoinRequest* request,
                                 proto::JoinReply* reply) override {
    return finished(context, join(context, request, reply));
  }

  grpc::Status join(grpc::CallbackServerContext* context, const proto::JoinRequest* request,
                    proto::JoinReply* reply) {
    if (auto status = admit(context, request->auth(), "Join", true); !status.ok()) return status;
    const RankSlot* slot = nullptr;
    if (request->by_rank()) {
      if (request->rank() >= 0 && request->rank() < static_cast<int>(options.ranks.size()))
        slot = &options.ranks[request->rank()];
    } else if (auto it = slotOf.find({request->host(), request->local_slot()});
               it != slotOf.end()) {
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
                          "host " + printable(request->host()) + " slot " +
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
      status.state = RankState::Starting;
      status.lastHeartbeat = status.lastProgress = std::chrono::steady_clock::now();
    }
    reply->set_rank(slot->rank);
    reply->set_world_size(static_cast<int>(options.ranks.size()));
    reply->set_local_rank(slot->localRank);
    reply->set_local_size(slot->localSize);
    reply->set_config_json(options.configJson);
    for (const auto& arg : options.jobArgs) reply->add_job_args(arg);
    reply->set_epoch(options.epoch);
    reply->set_heartbeat_interval_ms(static_cast<uint32_t>(options.heartbeatInterval.count()));
    reply->set_heartbeat_timeout_ms(static_cast<uint32_t>(options.heartbeatTimeout.count()));
    reply->set_host(slot->host);
    reply->set_slot(slot->slot);
    reply->set_node_rank(slot->nodeRank);
    reply->set_node_count(slot->nodeCount);
    for (int id : hostSlots.at(slot->host)) reply->add_node_slots(id);
    for (int size : nodeSizes) reply->add_node_sizes(size);
    auto* program = reply->mutable_program();
    program->set_module(options.programModule);
    program->set_no_python(options.programNoPython);
    program->set_no_local_rank(options.programNoLocalRank);
    program->set_python(options.python);
    return grpc::Status::OK;
  }

  // A relay's batch of joins: each one admitted and answered on its own.
  grpc::ServerUnaryReactor* NodeJoin(grpc::CallbackServerContext* context,
                                     const proto::NodeJoinRequest* request,
                                     proto::NodeJoinReply* reply) override {
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

  grpc::ServerWriteReactor<proto::Command>* Watch(grpc::CallbackServerContext* context,
                                                  const proto::WatchRequest* request) override {
    auto* stream = new CommandStream(*this, request->rank());
    if (auto status = admit(context, request->auth(), "Watch"); !status.ok()) {
      stream->end(status);
      return stream;
    }
    openStream(stream);
    return stream;
  }

  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context,
                                  const proto::KvSetRequest* request,
                                  proto::KvSetReply*) override {
    return storeCall(context, request, "KvSet",
                     [&] { store.set(request->key(), request->value()); });
  }

  grpc::ServerUnaryReactor* KvMultiSet(grpc::CallbackServerContext* context,
                                       const proto::KvMultiSetRequest* request,
                                       proto::KvMultiSetReply*) override {
    return storeCall(context, request, "KvMultiSet", [&] {
      std::vector<std::pair<std::string, std::string>> entries;
      entries.reserve(request->entries_size());
      for (const auto& entry : request->entries()) entries.emplace_back(entry.key(), entry.value());
      store.multiSet(entries);
    });
  }

  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const proto::KvGetRequest* request,
                                  proto::KvGetReply* reply) override {
    return storeWait(context, request, "KvGet", {request->key()},
                     [reply](std::vector<std::string>& values) {
                       reply->set_value(std::move(values.front()));
                     });
  }

  grpc::ServerUnaryReactor* KvMultiGet(grpc::CallbackServerContext* context,
                                       const proto::KvMultiGetRequest* request,
                                       proto::KvMultiGetReply* reply) override {
    return storeWait(context, request, "KvMultiGet",
                     {request->keys().begin(), request->keys().end()},
                     [reply](std::vector<std::string>& values) {
                       for (auto& value : values) reply->add_values(std::move(value));
                     });
  }

  grpc::ServerUnaryReactor* KvWait(grpc::CallbackServerContext* context,
                                   const proto::KvWaitRequest* request,
                                   proto::KvWaitReply*) override {
    return storeWait(context, request, "KvWait", {request->keys().begin(), request->keys().end()},
                     [](std::vector<std::string>&) {});
  }

  grpc::ServerUnaryReactor* KvAdd(grpc::CallbackServerContext* context,
                                  const proto::KvAddRequest* request,
                                  proto::KvAddReply* reply) override {
    return storeCall(context, request, "KvAdd",
                     [&] { reply->set_value(store.add(request->key(), request->delta())); });
  }

  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const proto::HeartbeatRequest* request,
                                      proto::HeartbeatReply*) override {
    if (auto status = admit(context, request->auth(), "Heartbeat"); !status.ok())
      return finished(context, status);
    if (!recordHeartbeat(*request))
      return finished(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown rank"));
    return finished(context, grpc::Status::OK);
  }

  // A rank's heartbeat, sent by itself or batched by its node's relay. False for an unknown rank.
  bool recordHeartbeat(const proto::HeartbeatRequest& beat) {
    std::lock_guard lock(mutex);
    if (!validRank(beat.rank())) return false;
    auto& status = ranks[beat.rank()];
    status.state = fromProto(beat.state());
    // When the rank sent it: a relay holds heartbeats up to an interval before passing them on.
    const auto now = std::chrono::steady_clock::now() -
                     std::chrono::milliseconds(std::min<uint32_t>(beat.age_ms(), 3600 * 1000));
    if (beat.step() != status.step) status.lastProgress = now;
    if (beat.step() > 0 && !status.firstStepAt) status.firstStepAt = now;
    status.phase = beat.phase();
    status.step = beat.step();
    status.loss = beat.loss();
    status.samplesPerSecond = beat.samples_per_sec();
    status.residentBytes = beat.resident_bytes();
    status.lastHeartbeat = std::max(status.lastHeartbeat, now);
    return true;
  }

  grpc::ServerBidiReactor<proto::NodeUp, proto::Command>* NodeSession(
      grpc::CallbackServerContext* context) override {
    return new class NodeSession(*this, context);
  }

  // Registers a stream admitted to receive commands: it gets every command queued so far, or
  // ends at once when shutdown() has already ended the others.
  void openStream(CommandSink* stream) {
    {
      std::lock_guard lock(streamsMutex);
      streams.insert(stream);
    }
    bool ending = false;
    {
      std::lock_guard lock(mutex);
      ending = shuttingDown;
    }
    if (ending)
      stream->end(grpc::Status::OK);
    else
      stream->pump();
  }

  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* context,
                                   const proto::ReportRequest* request,
                                   proto::ReportReply*) override {
    if (auto status = admit(context, request->auth(), "Report"); !status.ok())
      return finished(context, status);
    std::lock_guard lock(mutex);
    if (!validRank(request->rank()))
      return finished(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown rank"));
    RankReport report;
    report.exitStatus = request->exit_status();
    report.error = request->error();
    report.steps = request->steps();
    report.lastLoss = request->last_loss();
    report.wallSeconds = request->wall_seconds();
    report.metrics.insert(request->metrics().begin(), request->metrics().end());
    for (const auto& row : request->comm_stats())
      report.commStats.push_back({row.op(), row.bytes(), row.count(), row.total_seconds(),
                                  row.min_seconds(), row.max_seconds()});
    auto& status = ranks[request->rank()];
    status.state = report.exitStatus == 0 ? RankState::Finished : RankState::Failed;
    status.step = report.steps;
    status.loss = report.lastLoss;
    status.report = std::move(report);
    return finished(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* Offer(grpc::CallbackServerContext* context,
                                  const proto::OfferRequest* request,
                                  proto::OfferReply* reply) override {
    return finished(context, offer(context, request, reply));
  }

  grpc::Status offer(grpc::CallbackServerContext* context, const proto::OfferRequest* request,
                     proto::OfferReply* reply) {
    if (auto status = admit(context, request->auth(), "Offer", true); !status.ok()) return status;
    const std::string host = request->host();
    const int slots = request->slots();
    std::string refusal;
    if (host.empty() || host.size() > 253 || slots < 1 || slots > 65536)
      refusal = "an offer needs a host name and 1..65536 slots";
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
    std::cerr << "ds-launch: elastic: " << printable(host) << " offers " << slots
              << " slots; it joins at the next checkpoint\n";
    reply->set_accepted(true);
    reply->set_message("accepted: ds-launch starts " + std::to_string(slots) + " ranks on " +
                       host + " at the next checkpoint");
    return grpc::Status::OK;
  }

  std::vector<NodeOffer> offers;  // accepted, not yet taken (under mutex)
};

template <class Reactor>
void Coordinator::State::CommandWriter<Reactor>::pump() {
  std::unique_lock lock(mutex_);
  if (writing_ || finished_) return;
  {
    std::lock_guard job(state_.mutex);
    if (sent_ >= state_.commands.size()) return;
    const auto& [kind, reason] = state_.commands[sent_];
    command_.set_kind(kind == CommandKind::Abort ? proto::Command::ABORT : proto::Command::STOP);
    command_.set_reason(reason);
  }
  ++sent_;
  writing_ = true;
  lock.unlock();
  this->StartWrite(&command_);
}

template <class Reactor>
void Coordinator::State::CommandWriter<Reactor>::end(const grpc::Status& why) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    if (writing_) {  // Finish goes out once the write in flight is done
      finishAfterWrite_ = why;
      return;
    }
  }
  this->Finish(why);
}

template <class Reactor>
void Coordinator::State::CommandWriter<Reactor>::OnWriteDone(bool ok) {
  std::optional<grpc::Status> finish;
  {
    std::lock_guard lock(mutex_);
    writing_ = false;
    finish = std::exchange(finishAfterWrite_, std::nullopt);
  }
  if (finish) return this->Finish(*finish);
  if (!ok) return broke();
  pump();
}

template <class Reactor>
void Coordinator::State::CommandWriter<Reactor>::OnDone() {
  {
    std::lock_guard lock(state_.streamsMutex);
    state_.streams.erase(this);
  }
  delete this;
}

void Coordinator::State::NodeSession::OnReadDone(bool ok) {
  if (!ok) return broke();  // the relay is gone (its node, or the worker that hosted it)
  if (!admitted_) {
    if (auto status = state_.admit(context_, up_.auth(), "NodeSession"); !status.ok())
      return end(status);
    admitted_ = true;
    state_.openStream(this);
  }
  for (const auto& beat : up_.beats()) state_.recordHeartbeat(beat);
  if (up_.attach_size() > 0) {
    std::lock_guard lock(attachedMutex_);
    for (int rank : up_.attach())
      if (state_.validRank(rank)) attached_.push_back(rank);
  }
  for (int rank : up_.lost()) state_.markLost(rank);
  if (up_.has_host_rank() && state_.validRank(up_.host_rank())) {
    {
      std::lock_guard lock(attachedMutex_);
      hostRank_ = up_.host_rank();
    }
    std::lock_guard lock(state_.mutex);
    state_.ranks[up_.host_rank()].hostsRelay = true;
  }
  StartRead(&up_);
}

void Coordinator::State::NodeSession::loseRanks() {
  std::vector<int> ranks;
  {
    std::lock_guard lock(attachedMutex_);
    // The host's process going is what broke the stream: it is lost first, so the blame is its.
    if (hostRank_ >= 0) ranks.push_back(hostRank_);
    ranks.insert(ranks.end(), attached_.begin(), attached_.end());
  }
  for (int rank : ranks) state_.markLost(rank);
}

Coordinator::Coordinator(CoordinatorOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->ranks.resize(state_->options.ranks.size());
  for (const auto& rank : state_->options.ranks) {
    if (rank.nodeRank >= static_cast<int>(state_->nodeSizes.size()))
      state_->nodeSizes.resize(rank.nodeRank + 1, 0);
    ++state_->nodeSizes[rank.nodeRank];
    state_->slotOf[{rank.host, rank.slot}] = &rank;
    state_->hostSlots[rank.host].push_back(rank.slot);
  }
  prepareGrpcProcess();
  // Thousands of calls allocate and free the same sizes: keep freed memory for reuse rather than
  // trimming and growing the heaps again (sysmalloc was 9% of a 8192-rank start-up).
  runtime::keepFreedMemoryForReuse();
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

void Coordinator::broadcast(CommandKind command, const std::string& reason) {
  {
    std::lock_guard lock(state_->mutex);
    state_->commands.emplace_back(command, reason);
  }
  std::lock_guard lock(state_->streamsMutex);
  for (auto* stream : state_->streams) stream->pump();
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
