// RelayHost: a NodeRelay on a thread and io_context of its own, for the node agent or the worker
// that hosts its node's relay. Not used by the bench, which runs many relays on one io_context.
#include <thread>
#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio.hpp>

#include "worker/node_relay.h"

namespace ds::worker {

namespace asio = boost::asio;

namespace {

class ThreadRelayHost final : public RelayHost {
 public:
  explicit ThreadRelayHost(NodeRelayOptions options)
      : relay_(std::make_unique<NodeRelay>(io_, std::move(options))),
        work_(io_.get_executor()),
        thread_([this] { io_.run(); }) {}

  ~ThreadRelayHost() override {
    std::vector<std::unique_ptr<NodeRelay>> relays;
    relays.push_back(std::move(relay_));
    closeRelays(std::move(relays));  // no gRPC callback may run once the io_context is gone
    work_.reset();
    thread_.join();  // returns once every handler has run out
  }

  void waitForNodeRanks(size_t ranks, size_t connections,
                        std::chrono::milliseconds timeout) const override {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while ((relay_->joinsSeen() < ranks || relay_->connections() > connections) &&
           !relay_->sessionEnded() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  void flush(std::chrono::milliseconds timeout) const override {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (relay_->queuedWrites() > 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

 private:
  asio::io_context io_;
  std::unique_ptr<NodeRelay> relay_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<RelayHost> hostRelay(NodeRelayOptions options) {
  return std::make_unique<ThreadRelayHost>(std::move(options));
}

}  // namespace ds::worker
