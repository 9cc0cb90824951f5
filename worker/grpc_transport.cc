// The direct route: one gRPC channel to the coordinator, blocking calls on its generated stub;
// and the channel itself, which the node relay opens the same way (with its bytes helper).
#include <grpcpp/grpcpp.h>

#include "coordinator.grpc.pb.h"
#include "grpc_process.h"
#include "worker/coordinator_channel.h"
#include "worker/coordinator_transport.h"

namespace ds::worker {
namespace {

class GrpcTransport final : public CoordinatorTransport {
 public:
  GrpcTransport(const std::string& address, const TlsFiles& tls)
      : stub_(proto::Coordinator::NewStub(makeCoordinatorChannel(address, tls))) {}

  TransportStatus call(CoordinatorMethod method, const google::protobuf::Message& request,
                       google::protobuf::Message* reply, std::chrono::milliseconds deadline,
                       bool waitForReady) override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    context.set_wait_for_ready(waitForReady);
    const grpc::Status status = invoke(method, &context, request, reply);
    return {static_cast<int>(status.error_code()), status.error_message()};
  }

  TransportStatus watch(const proto::WatchRequest& request,
                        const std::function<void(const proto::Command&)>& onCommand) override {
    grpc::ClientContext context;
    auto reader = stub_->Watch(&context, request);
    proto::Command command;
    while (reader->Read(&command)) onCommand(command);
    const grpc::Status status = reader->Finish();
    return {static_cast<int>(status.error_code()), status.error_message()};
  }

 private:
  template <class Request, class Reply, class Method>
  grpc::Status typed(Method method, grpc::ClientContext* context,
                     const google::protobuf::Message& request, google::protobuf::Message* reply) {
    return (stub_.get()->*method)(context, static_cast<const Request&>(request),
                                  static_cast<Reply*>(reply));
  }

  grpc::Status invoke(CoordinatorMethod method, grpc::ClientContext* context,
                      const google::protobuf::Message& q, google::protobuf::Message* p) {
    using S = proto::Coordinator::Stub;
    using namespace proto;
    switch (method) {
      case CoordinatorMethod::Join:
        return typed<JoinRequest, JoinReply>(&S::Join, context, q, p);
      case CoordinatorMethod::KvSet:
        return typed<KvSetRequest, KvSetReply>(&S::KvSet, context, q, p);
      case CoordinatorMethod::KvGet:
        return typed<KvGetRequest, KvGetReply>(&S::KvGet, context, q, p);
      case CoordinatorMethod::KvWait:
        return typed<KvWaitRequest, KvWaitReply>(&S::KvWait, context, q, p);
      case CoordinatorMethod::KvAdd:
        return typed<KvAddRequest, KvAddReply>(&S::KvAdd, context, q, p);
      case CoordinatorMethod::KvMultiSet:
        return typed<KvMultiSetRequest, KvMultiSetReply>(&S::KvMultiSet, context, q, p);
      case CoordinatorMethod::KvMultiGet:
        return typed<KvMultiGetRequest, KvMultiGetReply>(&S::KvMultiGet, context, q, p);
      case CoordinatorMethod::Heartbeat:
        return typed<HeartbeatRequest, HeartbeatReply>(&S::Heartbeat, context, q, p);
      case CoordinatorMethod::Report:
        return typed<ReportRequest, ReportReply>(&S::Report, context, q, p);
      case CoordinatorMethod::Offer:
        return typed<OfferRequest, OfferReply>(&S::Offer, context, q, p);
      default:
        return grpc::Status(grpc::StatusCode::INTERNAL, "not a unary call");
    }
  }

  std::unique_ptr<proto::Coordinator::Stub> stub_;
};

}  // namespace

std::shared_ptr<grpc::Channel> makeCoordinatorChannel(const std::string& address,
                                                      const TlsFiles& tls,
                                                      std::chrono::milliseconds keepalive) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!tls.certPem.empty() || !tls.caPem.empty()) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = tls.caPem;
    options.pem_private_key = tls.keyPem;
    options.pem_cert_chain = tls.certPem;
    credentials = grpc::SslCredentials(options);
  }
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(keepalive.count()));
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(keepalive.count()));
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A connection of its own per channel, so that relays simulated in one process (the bench)
  // each hold one, as real ones do.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Control messages are small: no bandwidth-delay probe pings (the coordinator skips them too).
  arguments.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  prepareGrpcProcess();
  return grpc::CreateCustomChannel(address, credentials, arguments);
}

std::string bytesOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const auto& slice : slices)
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return bytes;
}

std::unique_ptr<CoordinatorTransport> makeGrpcTransport(const std::string& address,
                                                        const TlsFiles& tls) {
  return std::make_unique<GrpcTransport>(address, tls);
}

}  // namespace ds::worker
