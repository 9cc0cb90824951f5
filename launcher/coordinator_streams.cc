// The coordinator's command streams: each rank's Watch, and each node relay's NodeSession (which
// also carries the relay's attached ranks, batched heartbeats and losses up). The threading model
// and lock order are at the top of coordinator.cc.
#include <malloc.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "common/constant_time.h"
#include "launcher/coordinator_state.h"
#include "proto/call_metadata.h"
#include "proto/contract_conversion.h"

namespace ds::launcher {

// The write half both kinds of stream share: commands are written one at a time, in order, as
// broadcast() queues them; the stream ends with OK at shutdown, and one that breaks loses the
// ranks it carries.
template <class Reactor>
class Coordinator::State::CommandWriter : public Reactor, public CommandSink {
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
class Coordinator::State::WatchStream final
    : public CommandWriter<grpc::ServerWriteReactor<proto::Command>> {
 public:
  WatchStream(State& state, int rank) : CommandWriter(state), rank_(rank) {}

 private:
  // A stream that breaks before the rank reported means its process is gone (killed, crashed,
  // its node lost): on every backend this is how an exit is seen at once.
  void loseRanks() override { state_.markLost(rank_); }
  const int rank_;
};

// A node relay's stream: commands down for every rank it attached, heartbeats and losses up.
class Coordinator::State::NodeSessionStream final
    : public CommandWriter<grpc::ServerBidiReactor<proto::NodeUp, proto::Command>> {
 public:
  NodeSessionStream(State& state, grpc::CallbackServerContext* context)
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

// A Watch refused before anything of it exists: it frees itself once finished.
class Coordinator::State::RefusedWatch final : public grpc::ServerWriteReactor<proto::Command> {
 public:
  void OnDone() override { delete this; }
};

// A NodeSession refused before anything of it exists: it finishes at once and frees itself.
class Coordinator::State::RefusedSession final
    : public grpc::ServerBidiReactor<proto::NodeUp, proto::Command> {
 public:
  explicit RefusedSession(const grpc::Status& why) { Finish(why); }
  void OnDone() override {
    // The launcher keeps freed memory for reuse (allocator_policy.h); a flood of refused streams
    // is not worth keeping: give it back now and then.
    static std::atomic<unsigned> refused{0};
    if (++refused % 1024 == 0) malloc_trim(0);
    delete this;
  }
};

template <class Reactor>
void Coordinator::State::CommandWriter<Reactor>::pump() {
  std::unique_lock lock(mutex_);
  if (writing_ || finished_) return;
  {
    std::lock_guard job(state_.mutex);
    if (sent_ >= state_.commands.size()) return;
    const auto& [kind, reason] = state_.commands[sent_];
    command_.set_kind(toProto(kind));
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
    --state_.openStreams;  // reserved before the stream was made
  }
  delete this;
}

void Coordinator::State::NodeSessionStream::OnReadDone(bool ok) {
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

void Coordinator::State::NodeSessionStream::loseRanks() {
  std::vector<int> ranks;
  {
    std::lock_guard lock(attachedMutex_);
    // The host's process going is what broke the stream: it is lost first, so the blame is its.
    if (hostRank_ >= 0) ranks.push_back(hostRank_);
    ranks.insert(ranks.end(), attached_.begin(), attached_.end());
  }
  for (int rank : ranks) state_.markLost(rank);
}

grpc::ServerWriteReactor<proto::Command>* Coordinator::State::Watch(
    grpc::CallbackServerContext* context, const proto::WatchRequest* request) {
  grpc::Status status = admit(context, request->auth(), "Watch");
  if (status.ok()) status = reserveStream(context, "Watch");
  if (!status.ok()) {
    auto* refused = new RefusedWatch;
    refused->Finish(status);
    return refused;
  }
  auto* stream = new WatchStream(*this, request->rank());
  openStream(stream);
  return stream;
}

grpc::ServerBidiReactor<proto::NodeUp, proto::Command>* Coordinator::State::NodeSession(
    grpc::CallbackServerContext* context) {
  // The token comes with the call's metadata, so a client without it costs no stream object, no
  // read buffer and no slot: a flood of such streams must not grow the launcher.
  const auto& metadata = context->client_metadata();
  const auto token = metadata.find(proto::kJobTokenMetadata);
  if (token == metadata.end() ||
      !constantTimeEquals(std::string(token->second.data(), token->second.size()), options.token)) {
    logRefusal(context, "NodeSession", "wrong job token");
    return new RefusedSession(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "wrong job token"));
  }
  if (auto status = reserveStream(context, "NodeSession"); !status.ok())
    return new RefusedSession(status);
  return new NodeSessionStream(*this, context);  // its epoch is checked on its first message
}

grpc::Status Coordinator::State::reserveStream(grpc::CallbackServerContext* context,
                                               const char* rpc) {
  // Every rank's Watch, or its node's NodeSession, is one stream: more than one per rank, plus a
  // margin for streams of a broken connection not yet seen gone, is no legitimate job.
  const size_t limit = 2 * options.ranks.size() + 64;
  std::lock_guard lock(streamsMutex);
  if (openStreams < limit) {
    ++openStreams;
    return grpc::Status::OK;
  }
  logRefusal(context, rpc, std::to_string(openStreams) + " command streams already open");
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      "too many command streams (" + std::to_string(limit) + ") for a job of " +
                          std::to_string(options.ranks.size()) + " ranks");
}

void Coordinator::State::openStream(CommandSink* stream) {
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

void Coordinator::broadcast(CommandKind command, const std::string& reason) {
  {
    std::lock_guard lock(state_->mutex);
    state_->commands.emplace_back(command, reason);
  }
  std::lock_guard lock(state_->streamsMutex);
  for (auto* stream : state_->streams) stream->pump();
}

}  // namespace ds::launcher
