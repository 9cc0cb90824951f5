// Fuzz target: requests as ds-launch's coordinator receives them from the network. Each input is
// a short conversation with a fresh Coordinator (4 ranks on 2 hosts, one Stop command queued) on
// loopback, over real gRPC, so every request meets the same admission and handler code a worker's
// or an intruder's does, and a crash reproduces from its one input.
// Input: up to 8 requests, each [u8 op][u16 little-endian length][that many bytes]. The op's low
// nibble picks the RPC; bit 4 puts the job's token into the request, bit 5 the current epoch
// (to get past admission; without them it is tested too), bit 6 (NodeSession) the token into
// the call's metadata. The bytes are the serialized request; a NodeSession's are up to four
// NodeUp messages, each [u16 length][bytes]. Bytes that do not parse as the message are skipped,
// as gRPC refuses them before any of ours runs. Store waits are held to 20 ms.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

#include "coordinator.grpc.pb.h"
#include "fuzz/fuzz_target.h"
#include "launcher/coordinator.h"
#include "proto/call_metadata.h"

namespace ds::fuzz {
namespace {

constexpr const char* kToken = "fuzz-token";
constexpr uint64_t kEpoch = 1;
constexpr uint32_t kMaxWaitMs = 20;
constexpr auto kCallDeadline = std::chrono::seconds(10);

enum class Op : uint8_t {
  Join,
  NodeJoin,
  KvSet,
  KvGet,
  KvWait,
  KvMultiSet,
  KvMultiGet,
  KvAdd,
  Heartbeat,
  Report,
  Offer,
  Watch,
  NodeSession,
  kCount
};
constexpr uint8_t kWithToken = 0x10, kWithEpoch = 0x20, kWithMetadata = 0x40;

struct Request {
  Op op;
  uint8_t flags;
  std::string_view bytes;
};

std::vector<Request> readRequests(std::string_view input) {
  std::vector<Request> requests;
  while (input.size() >= 3 && requests.size() < 8) {
    const auto op = static_cast<uint8_t>(input[0]);
    const size_t length = static_cast<uint8_t>(input[1]) | static_cast<uint8_t>(input[2]) << 8;
    input.remove_prefix(3);
    const std::string_view bytes = input.substr(0, length);
    input.remove_prefix(bytes.size());
    requests.push_back(
        {static_cast<Op>((op & 0x0f) % static_cast<uint8_t>(Op::kCount)), op, bytes});
  }
  return requests;
}

template <typename Message>
bool parse(Message& message, std::string_view bytes) {
  return message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

void authorize(proto::JobAuth* auth, uint8_t flags) {
  if (flags & kWithToken) auth->set_token(kToken);
  if (flags & kWithEpoch) auth->set_epoch(kEpoch);
}

std::unique_ptr<grpc::ClientContext> context() {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  return c;
}

// One unary call of `Message`'s RPC; its answer is the coordinator's business, not a finding.
template <typename Message, typename Reply, typename Call>
void unary(const Request& r, Call call) {
  Message message;
  if (!parse(message, r.bytes)) return;
  authorize(message.mutable_auth(), r.flags);
  if constexpr (requires { message.set_timeout_ms(0u); })
    message.set_timeout_ms(std::min(message.timeout_ms(), kMaxWaitMs));
  Reply reply;
  (void)call(context().get(), message, &reply);
}

void watch(proto::Coordinator::Stub& stub, const Request& r) {
  proto::WatchRequest message;
  if (!parse(message, r.bytes)) return;
  authorize(message.mutable_auth(), r.flags);
  auto c = context();
  auto reader = stub.Watch(c.get(), message);
  proto::Command command;
  // Admitted, the stream brings the queued Stop at once; refused, it ends.
  if (reader->Read(&command)) c->TryCancel();
  while (reader->Read(&command)) {
  }
  (void)reader->Finish();
}

void nodeSession(proto::Coordinator::Stub& stub, const Request& r) {
  std::vector<proto::NodeUp> ups;
  std::string_view bytes = r.bytes;
  while (bytes.size() >= 2 && ups.size() < 4) {
    const size_t length = static_cast<uint8_t>(bytes[0]) | static_cast<uint8_t>(bytes[1]) << 8;
    bytes.remove_prefix(2);
    proto::NodeUp up;
    if (!parse(up, bytes.substr(0, length))) return;
    bytes.remove_prefix(std::min(length, bytes.size()));
    ups.push_back(std::move(up));
  }
  if (ups.empty()) return;
  authorize(ups.front().mutable_auth(), r.flags);
  auto c = context();
  if (r.flags & kWithMetadata) c->AddMetadata(proto::kJobTokenMetadata, kToken);
  auto stream = stub.NodeSession(c.get());
  for (const auto& up : ups)
    if (!stream->Write(up)) break;
  stream->WritesDone();
  proto::Command command;
  while (stream->Read(&command)) {
  }
  (void)stream->Finish();
}

void fuzzCoordinator(std::string_view input) {
  const std::vector<Request> requests = readRequests(input);
  if (requests.empty()) return;
  launcher::CoordinatorOptions options;
  options.bindAddress = "127.0.0.1";
  options.token = kToken;
  options.epoch = kEpoch;
  options.configJson = R"({"train_batch_size": 8})";
  options.jobArgs = {"train"};
  options.ranks = {{0, "127.0.0.1", 0, 0, 2, 0, 2},
                   {1, "127.0.0.1", 1, 1, 2, 0, 2},
                   {2, "127.0.0.2", 0, 0, 2, 1, 2},
                   {3, "127.0.0.2", 1, 1, 2, 1, 2}};
  // An elastic job's launcher: a node named node-* is taken, any other refused.
  options.admitOffer = [](const std::string& host, int) {
    return host.rfind("node-", 0) == 0 ? std::string() : "not a node of the pool";
  };
  launcher::Coordinator coordinator(std::move(options));
  coordinator.broadcast(CommandKind::Stop, "fuzz");
  const auto channel =
      grpc::CreateChannel(coordinator.address(), grpc::InsecureChannelCredentials());
  const auto stub = proto::Coordinator::NewStub(channel);
  auto& s = *stub;
  for (const Request& r : requests) {
    switch (r.op) {
      case Op::Join:
        unary<proto::JoinRequest, proto::JoinReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.Join(c, m, reply); });
        break;
      case Op::NodeJoin: {
        proto::NodeJoinRequest message;
        if (!parse(message, r.bytes)) break;
        for (auto& join : *message.mutable_joins()) authorize(join.mutable_auth(), r.flags);
        proto::NodeJoinReply reply;
        (void)s.NodeJoin(context().get(), message, &reply);
        break;
      }
      case Op::KvSet:
        unary<proto::KvSetRequest, proto::KvSetReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.KvSet(c, m, reply); });
        break;
      case Op::KvGet:
        unary<proto::KvGetRequest, proto::KvGetReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.KvGet(c, m, reply); });
        break;
      case Op::KvWait:
        unary<proto::KvWaitRequest, proto::KvWaitReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.KvWait(c, m, reply); });
        break;
      case Op::KvMultiSet:
        unary<proto::KvMultiSetRequest, proto::KvMultiSetReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.KvMultiSet(c, m, reply); });
        break;
      case Op::KvMultiGet:
        unary<proto::KvMultiGetRequest, proto::KvMultiGetReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.KvMultiGet(c, m, reply); });
        break;
      case Op::KvAdd:
        unary<proto::KvAddRequest, proto::KvAddReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.KvAdd(c, m, reply); });
        break;
      case Op::Heartbeat:
        unary<proto::HeartbeatRequest, proto::HeartbeatReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.Heartbeat(c, m, reply); });
        break;
      case Op::Report:
        unary<proto::ReportRequest, proto::ReportReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.Report(c, m, reply); });
        break;
      case Op::Offer:
        unary<proto::OfferRequest, proto::OfferReply>(
            r, [&](auto* c, auto& m, auto* reply) { return s.Offer(c, m, reply); });
        break;
      case Op::Watch:
        watch(s, r);
        break;
      case Op::NodeSession:
        nodeSession(s, r);
        break;
      case Op::kCount:
        break;
    }
  }
  for (const auto& offer : coordinator.takeOffers()) DS_FUZZ_CHECK(offer.slots >= 1);
  const auto ranks = coordinator.snapshot();
  DS_FUZZ_CHECK(ranks.size() == 4);
}

}  // namespace

DS_FUZZ_TARGET(coordinator, fuzzCoordinator);

}  // namespace ds::fuzz
