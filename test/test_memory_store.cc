// MemoryStore semantics: set/get/wait/add, blocking until a key appears, timeouts that name the
// missing keys, and close() waking blocked callers.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "common/error.h"
#include "runtime/comm/memory_store.h"

using ds::runtime::MemoryStore;
using namespace std::chrono_literals;

TEST_CASE("store: set then get returns the value, and set overwrites") {
  MemoryStore store;
  store.set("a", "1");
  REQUIRE(store.get("a", 10ms) == "1");
  store.set("a", std::string("x\0y", 3));
  REQUIRE(store.get("a", 10ms) == std::string("x\0y", 3));
}

TEST_CASE("store: get blocks until another thread sets the key") {
  MemoryStore store;
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    store.set("late", "here");
  });
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(store.get("late", 5s) == "here");
  REQUIRE(std::chrono::steady_clock::now() - start >= 40ms);
  setter.join();
}

TEST_CASE("store: get times out with a TimeoutError naming the key") {
  MemoryStore store;
  REQUIRE_THROWS_AS(store.get("never", 30ms), ds::TimeoutError);
  REQUIRE_THROWS_WITH(store.get("never", 30ms),
                      Catch::Contains("\"never\"") && Catch::Contains("30 ms"));
}

TEST_CASE("store: wait returns once all keys exist and names only the missing ones on timeout") {
  MemoryStore store;
  store.set("k1", "");
  REQUIRE_THROWS_WITH(store.wait({"k1", "k2", "k3"}, 20ms),
                      Catch::Contains("\"k2\", \"k3\"") && !Catch::Contains("\"k1\""));
  std::thread setter([&] {
    std::this_thread::sleep_for(20ms);
    store.set("k2", "");
    store.set("k3", "");
  });
  REQUIRE_NOTHROW(store.wait({"k1", "k2", "k3"}, 5s));
  setter.join();
}

TEST_CASE("store: add is atomic across threads and readable as decimal text") {
  MemoryStore store;
  REQUIRE(store.add("counter", 5) == 5);
  REQUIRE(store.add("counter", -2) == 3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) store.add("counter", 1);
    });
  for (auto& t : threads) t.join();
  REQUIRE(store.get("counter", 10ms) == "4003");
  store.set("text", "abc");
  REQUIRE_THROWS_WITH(store.add("text", 1), Catch::Contains("non-integer"));
}

TEST_CASE("store: close wakes blocked callers with the reason and refuses later calls") {
  MemoryStore store;
  std::thread closer([&] {
    std::this_thread::sleep_for(30ms);
    store.close("job ended");
  });
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(store.get("k", 10s), Catch::Contains("job ended"));
  REQUIRE(std::chrono::steady_clock::now() - start < 5s);
  closer.join();
  REQUIRE_THROWS_WITH(store.set("k", "v"), Catch::Contains("job ended"));
}
