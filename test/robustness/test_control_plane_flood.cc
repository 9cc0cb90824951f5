// A client without the job token cannot grow the launcher or stop the job: a running job is hit
// with 20,000 NodeSession streams that never write, refused unary calls and garbage on raw TCP
// connections; ds-launch's memory stays bounded and the job still finishes.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "coordinator.grpc.pb.h"
#include "test/launch_harness.h"
#include "worker/coordinator_client.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

// Resident memory of a process, in MiB (0 once it is gone).
double residentMiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0.0;
}

// A NodeSession that sends nothing, not even the token, and waits for the server to end it.
class SilentSession final : public grpc::ClientBidiReactor<ds::proto::NodeUp, ds::proto::Command> {
 public:
  SilentSession(ds::proto::Coordinator::Stub& stub, std::atomic<int>& done) : done_(done) {
    stub.async()->NodeSession(&context_, this);
    StartRead(&command_);
    StartCall();
  }
  void OnReadDone(bool) override {}
  void OnDone(const grpc::Status& status) override {
    code_ = status.error_code();
    ++done_;
  }
  void cancel() { context_.TryCancel(); }
  grpc::StatusCode code() const { return code_; }

 private:
  std::atomic<int>& done_;
  grpc::ClientContext context_;
  ds::proto::Command command_;
  std::atomic<grpc::StatusCode> code_{grpc::StatusCode::OK};
};

void sendGarbage(const std::string& address, int connections) {
  const auto colon = address.rfind(':');
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &to.sin_addr);
  const std::string junk = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\x04\x00garbage\x1b[2J";
  for (int i = 0; i < connections; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0)
      (void)!write(fd, junk.data(), i % 2 ? junk.size() : 7);  // half of them stop mid-preface
    close(fd);
  }
}

}  // namespace

TEST_CASE(
    "robustness: streams, calls and garbage without the token leave the job and its memory "
    "alone",
    "[robustness][launch]") {
  const std::string dir = makeScratchDir("flood");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs",
                               "--no_local_rank", "--", "/bin/sleep", "8"});
  const std::string address = coordinatorAddressOf(job, 20s);
  REQUIRE(!address.empty());
  std::this_thread::sleep_for(500ms);  // the ranks joined; the launcher's memory has settled
  const double before = residentMiB(job.pid);
  REQUIRE(before > 0.0);

  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = ds::proto::Coordinator::NewStub(channel);
  constexpr int kStreams = 20000;
  std::atomic<int> done{0};
  std::vector<std::unique_ptr<SilentSession>> sessions;
  for (int i = 0; i < kStreams; ++i)
    sessions.push_back(std::make_unique<SilentSession>(*stub, done));
  // Refused at once, from the call's metadata: none waits for a first message.
  CHECK(waitUntil(30s, [&] { return done.load() == kStreams; }));
  const double afterStreams = residentMiB(job.pid);

  ds::worker::CoordinatorClient intruder(address, "wrong-token");
  for (int i = 0; i < 500; ++i) CHECK_THROWS(intruder.kvGet("k", 10ms));
  sendGarbage(address, 200);
  const double afterAll = residentMiB(job.pid);

  for (auto& s : sessions) s->cancel();
  CHECK(waitUntil(10s, [&] { return done.load() == kStreams; }));
  size_t refused = 0;
  for (const auto& s : sessions) refused += s->code() == grpc::StatusCode::PERMISSION_DENIED;
  CHECK(refused == kStreams);
  sessions.clear();

  INFO("ds-launch resident: " << before << " MiB before, " << afterStreams << " after " << kStreams
                              << " streams, " << afterAll << " after calls and garbage");
  // 20,000 streams held open took it from 18.6 to 363.6 MB before the token was checked first,
  // and to 313 MB with the token checked but no bound on the streams in flight.
  CHECK(afterStreams - before < 40.0);
  CHECK(afterAll - before < 48.0);
  CHECK(waitExit(job, 60s) == 0);
  const std::string err = readFile(dir + "/stderr");
  CHECK(err.find("refused NodeSession") != std::string::npos);
}
