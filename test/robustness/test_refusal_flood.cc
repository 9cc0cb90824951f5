// A flood of refused requests (wrong token) is logged at a bounded rate, with a count of what was
// not shown, and a host name from a client cannot put control bytes into the launcher's log.
#include <catch2/catch.hpp>
#include <iostream>
#include <sstream>
#include <thread>

#include "launcher/coordinator.h"
#include "worker/coordinator_client.h"

using namespace std::chrono_literals;

namespace {

// Captures std::cerr while alive.
struct CaptureStderr {
  std::ostringstream text;
  std::streambuf* old = std::cerr.rdbuf(text.rdbuf());
  ~CaptureStderr() { std::cerr.rdbuf(old); }
};

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("robustness: refusals are logged at a bounded rate, hostile text made printable") {
  ds::launcher::CoordinatorOptions options;
  options.bindAddress = "127.0.0.1";
  options.token = "flood-token-0123456789abcdef";
  options.ranks = {{0, "127.0.0.1", 0, 0, 1}};
  CaptureStderr capture;
  {
    ds::launcher::Coordinator coordinator(options);
    ds::worker::CoordinatorClient intruder(coordinator.address(), "wrong-token");
    for (int i = 0; i < 60; ++i) CHECK_THROWS(intruder.kvGet("k", 10ms));
    std::this_thread::sleep_for(1100ms);  // a new logging window
    ds::worker::CoordinatorClient stranger(coordinator.address(), options.token);
    CHECK_THROWS(stranger.join({"evil\x1b[2J\nhost", 3}, 2s));
  }
  const std::string log = capture.text.str();
  CHECK(countOf(log, "refused KvGet") <= 10);
  CHECK(log.find("more refusals not shown") != std::string::npos);
  CHECK(log.find("evil?[2J?host") != std::string::npos);
  CHECK(log.find('\x1b') == std::string::npos);
}
