// The Gloo full mesh rendezvouses in two store round trips per rank (one multiSet, one multiGet,
// no per-peer read) and then works: ranks as threads over an in-memory store, real TCP between
// them on loopback.
#include <atomic>
#include <catch2/catch.hpp>

#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/memory_store.h"
#include "test/rank_threads.h"

using namespace ds::runtime;

namespace {

// A MemoryStore that counts the calls made through it.
class CountingStore : public Store {
 public:
  std::atomic<int> sets{0}, gets{0}, waits{0}, adds{0}, multiSets{0}, multiGets{0};
  void set(const std::string& key, const std::string& value) override {
    ++sets;
    store_.set(key, value);
  }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    ++gets;
    return store_.get(key, timeout);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    ++waits;
    store_.wait(keys, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    ++adds;
    return store_.add(key, delta);
  }
  void multiSet(const std::vector<std::pair<std::string, std::string>>& entries) override {
    ++multiSets;
    store_.multiSet(entries);
  }
  std::vector<std::string> multiGet(const std::vector<std::string>& keys,
                                    std::chrono::milliseconds timeout) override {
    ++multiGets;
    return store_.multiGet(keys, timeout);
  }

 private:
  MemoryStore store_;
};

}  // namespace

TEST_CASE("gloo: the full mesh takes one multiSet and one multiGet per rank, then all-reduces") {
  constexpr int kWorld = 5;
  CountingStore store;
  std::vector<std::vector<float>> results(kWorld);
  ds::test::onThreads(kWorld, [&](int r) {
    GlooCommunicator comm(store, r, kWorld, {"127.0.0.1", "mesh", std::chrono::seconds(20)});
    std::vector<float> values = {static_cast<float>(r), 1.0f};
    comm.allReduce(values.data(), values.size());
    results[r] = values;
  });
  CHECK(store.multiSets == kWorld);
  CHECK(store.multiGets == kWorld);
  CHECK(store.gets == 0);
  CHECK(store.waits == 0);
  for (const auto& values : results) CHECK(values == std::vector<float>{10.0f, 5.0f});
}
