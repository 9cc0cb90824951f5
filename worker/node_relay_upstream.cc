// NodeRelay's upstream half: one gRPC channel to the coordinator (gRPC's callback API). Unary
// calls are forwarded unchanged, joins and sets that arrive together go up as one NodeJoin or
// KvMultiSet, and one NodeSession stream carries the batched heartbeats, attached and lost ranks
// up and the commands down. gRPC's callbacks post their results to the io thread.
#include <algorithm>

#include "proto/call_metadata.h"
#include "worker/coordinator_channel.h"
#include "worker/node_relay_core.h"

namespace ds::worker {

uint32_t NodeRelay::Core::longestDeadline(const std::vector<Call>& calls) {
  uint32_t longest = 0;
  for (const auto& call : calls) longest = std::max(longest, call.deadlineMs);
  return longest;
}

// The NodeSession stream. It keeps itself alive until gRPC is done with it.
class NodeRelay::Core::Session final
    : public grpc::ClientBidiReactor<proto::NodeUp, proto::Command> {
 public:
  Session(std::weak_ptr<Core> core, std::shared_ptr<std::atomic<int>> inFlight)
      : core_(std::move(core)), inFlight_(std::move(inFlight)) {
    ++*inFlight_;
  }
  void start(proto::Coordinator::Stub& stub, std::shared_ptr<Session> self,
             const std::string& token) {
    self_ = std::move(self);
    context_.AddMetadata(proto::kJobTokenMetadata, token);  // checked before the stream exists
    stub.async()->NodeSession(&context_, this);
    StartRead(&command_);
    StartCall();
  }
  void write(proto::NodeUp up) {
    up_ = std::move(up);
    StartWrite(&up_);
  }
  void cancel() { context_.TryCancel(); }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    Core::postTo(core_, [command = command_](Core& core) { core.deliver(command); });
    StartRead(&command_);
  }
  void OnWriteDone(bool ok) override {
    Core::postTo(core_, [ok](Core& core) { core.upstreamWritten(ok); });
  }
  void OnDone(const grpc::Status& status) override {
    Core::postTo(core_, [status](Core& core) { core.sessionDone(status); });
    const std::shared_ptr<std::atomic<int>> inFlight = inFlight_;
    self_.reset();  // deletes this
    --*inFlight;
  }

 private:
  // Weak: a gRPC thread must never hold the last reference to what the io thread owns.
  std::weak_ptr<Core> core_;
  std::shared_ptr<std::atomic<int>> inFlight_;
  std::shared_ptr<Session> self_;
  grpc::ClientContext context_;
  proto::Command command_;
  proto::NodeUp up_;
};

void NodeRelay::Core::upstream(const char* path, const std::string& request, uint32_t deadlineMs,
                               bool waitForReady,
                               std::function<void(Core&, int, const std::string&)> done) {
  auto context = std::make_shared<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadlineMs));
  context->set_wait_for_ready(waitForReady);
  {
    std::lock_guard lock(forwardsMutex);
    forwards.insert(context.get());
  }
  ++*inFlight;
  startUnaryCall(*generic, context.get(), path, request,
                 [weak = weak_from_this(), context, done = std::move(done), inFlight = inFlight](
                     int code, std::string payload) mutable {
                   std::shared_ptr<Core> core = weak.lock();
                   if (core) {
                     std::lock_guard lock(core->forwardsMutex);
                     core->forwards.erase(context.get());
                   }
                   // Moved on: the io thread releases it (postTo).
                   postTo(std::move(core), [done, code, payload = std::move(payload)](Core& c) {
                     done(c, code, payload);
                   });
                   // Before the count: once it is zero nothing of the call may still hold the
                   // channel (closeRelays).
                   context.reset();
                   --*inFlight;
                 });
}

void NodeRelay::Core::forward(Call call) {
  // The coordinator may still be starting when the first ranks join.
  const bool waitForReady = call.method == CoordinatorMethod::Join;
  upstream(grpcMethodPath(call.method), call.payload, call.deadlineMs, waitForReady,
           [call](Core& core, int code, const std::string& payload) {
             if (auto c = call.connection.lock())
               core.answered(c, call.call, call.method, code, payload);
           });
}

void NodeRelay::Core::sendJoins(std::vector<Call> waiting) {
  proto::NodeJoinRequest request;
  std::vector<Call> calls;
  for (auto& call : waiting) {
    if (request.add_joins()->ParseFromString(call.payload)) {
      calls.push_back(std::move(call));
      continue;
    }
    request.mutable_joins()->RemoveLast();
    if (auto c = call.connection.lock())
      reply(c, call.call, CoordinatorMethod::Join, grpc::StatusCode::INVALID_ARGUMENT,
            "unreadable join request");
  }
  if (calls.empty()) return joins.returned(*this);
  upstream("/ds.proto.Coordinator/NodeJoin", request.SerializeAsString(), longestDeadline(calls),
           true, [calls](Core& core, int code, const std::string& payload) {
             proto::NodeJoinReply reply;
             if (code == grpc::StatusCode::OK &&
                 (!reply.ParseFromString(payload) ||
                  reply.results_size() != static_cast<int>(calls.size())))
               code = grpc::StatusCode::INTERNAL;
             for (size_t i = 0; i < calls.size(); ++i) {
               auto c = calls[i].connection.lock();
               if (!c) continue;
               if (code != grpc::StatusCode::OK) {
                 core.answered(c, calls[i].call, CoordinatorMethod::Join, code,
                               code == grpc::StatusCode::INTERNAL
                                   ? "the coordinator's batched join reply is unreadable"
                                   : payload);
                 continue;
               }
               const auto& result = reply.results(static_cast<int>(i));
               core.answered(c, calls[i].call, CoordinatorMethod::Join, result.code(),
                             result.code() == grpc::StatusCode::OK
                                 ? result.reply().SerializeAsString()
                                 : result.message());
             }
             core.joins.returned(core);
           });
}

void NodeRelay::Core::sendSets(std::vector<Call> calls) {
  proto::KvMultiSetRequest request;
  std::vector<Call> together, alone;
  for (auto& call : calls) {
    proto::KvMultiSetRequest one;
    bool parsed = false;
    if (call.method == CoordinatorMethod::KvSet) {
      proto::KvSetRequest set;
      parsed = set.ParseFromString(call.payload);
      *one.mutable_auth() = set.auth();
      auto* entry = one.add_entries();
      entry->set_key(set.key());
      entry->set_value(set.value());
    } else {
      parsed = one.ParseFromString(call.payload);
    }
    const bool sameAuth = together.empty() || (one.auth().token() == request.auth().token() &&
                                               one.auth().epoch() == request.auth().epoch());
    if (!parsed || !sameAuth) {
      alone.push_back(std::move(call));
      continue;
    }
    if (together.empty()) *request.mutable_auth() = one.auth();
    for (auto& entry : *one.mutable_entries()) *request.add_entries() = std::move(entry);
    together.push_back(std::move(call));
  }
  for (auto& call : alone) forward(std::move(call));
  if (together.empty()) return sets.returned(*this);
  upstream(grpcMethodPath(CoordinatorMethod::KvMultiSet), request.SerializeAsString(),
           longestDeadline(together), false, [together](Core& core, int code, const std::string&) {
             for (const auto& call : together) {
               if (code != grpc::StatusCode::OK) {
                 core.forward(call);
               } else if (auto c = call.connection.lock()) {
                 core.answered(c, call.call, call.method, code, "");
               }
             }
             core.sets.returned(core);
           });
}

void NodeRelay::Core::answered(const ConnectionPtr& c, uint32_t call, CoordinatorMethod method,
                               int code, const std::string& payload) {
  if (code == grpc::StatusCode::OK && method == CoordinatorMethod::Join) {
    proto::JoinReply join;
    if (join.ParseFromString(payload)) {
      c->rank = join.rank();
      if (c->host) pendingUp.set_host_rank(c->rank);
      if (!session) startSession(join);
      sendUp();
    }
  }
  if (code == grpc::StatusCode::OK && method == CoordinatorMethod::Report) c->reported = true;
  reply(c, call, method, code, payload);
}

void NodeRelay::Core::startSession(const proto::JoinReply& join) {
  if (join.heartbeat_interval_ms() > 0)
    beatInterval = std::chrono::milliseconds(join.heartbeat_interval_ms());
  session = std::make_shared<Session>(weak_from_this(), inFlight);
  session->start(*stub, session, options.token);
  pendingUp.mutable_auth()->set_token(options.token);
  pendingUp.mutable_auth()->set_epoch(join.epoch());
  sendUp();
  armBeatTimer();
}

void NodeRelay::Core::armBeatTimer() {
  beatTimer.expires_after(beatInterval);
  beatTimer.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (error) return;
    self->flushBeats();
    self->armBeatTimer();
  });
}

void NodeRelay::Core::flushBeats() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [rank, received] : beats) {
    auto& [beat, at] = received;
    beat.set_age_ms(static_cast<uint32_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now - at).count()));
    *pendingUp.add_beats() = std::move(beat);
  }
  beats.clear();
  sendUp();
}

void NodeRelay::Core::sendUp() {
  if (!session || upstreamWriting || sessionEnd) return;
  if (pendingUp.ByteSizeLong() == 0) return;
  upstreamWriting = true;
  session->write(std::exchange(pendingUp, proto::NodeUp{}));
}

void NodeRelay::Core::upstreamWritten(bool ok) {
  upstreamWriting = false;
  if (ok) sendUp();  // a failed write: OnDone says why
}

void NodeRelay::Core::sessionDone(const grpc::Status& status) {
  sessionEnd = status;
  ended = true;
  beatTimer.cancel();
  for (const auto& c : connections)
    if (c->watchCall != 0) endWatch(c);
}

void NodeRelay::Core::cancelUpstream() {
  if (session) session->cancel();
  std::lock_guard lock(forwardsMutex);
  for (auto* context : forwards) context->TryCancel();
}

}  // namespace ds::worker
