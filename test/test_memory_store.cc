// MemoryStore semantics: set/get/wait/add, blocking until a key appears, timeouts that name the
// missing keys, and close() waking blocked callers; batches; the non-blocking waits the
// coordinator parks (completed by a set, the timer, cancellation or close, exactly once).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
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

namespace {

// What a non-blocking wait delivered (set once, by whichever thread completed it).
struct AsyncResult {
  std::promise<std::pair<std::string, std::vector<std::string>>> promise;
  std::atomic<int> calls{0};
  ds::runtime::MemoryStore::WaitDone callback() {
    return [this](std::exception_ptr error, std::vector<std::string> values) {
      std::string what;
      try {
        if (error) std::rethrow_exception(error);
      } catch (const ds::TimeoutError& e) {
        what = std::string("timeout: ") + e.what();
      } catch (const std::exception& e) {
        what = std::string("error: ") + e.what();
      }
      if (calls++ == 0) promise.set_value({what, std::move(values)});
    };
  }
};

}  // namespace

TEST_CASE("store: a non-blocking wait completes once, on the set of its last key, with the values "
          "in order") {
  ds::runtime::MemoryStore store;
  store.set("a", "1");
  AsyncResult result;
  auto delivered = result.promise.get_future();
  const uint64_t id = store.waitAsync({"b", "a", "c", "b"}, std::chrono::seconds(30), result.callback());
  CHECK(id != 0);
  store.set("b", "2");
  CHECK(delivered.wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout);
  store.multiSet({{"c", "3"}, {"d", "4"}});
  REQUIRE(delivered.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  const auto [what, values] = delivered.get();
  CHECK(what.empty());
  CHECK(values == std::vector<std::string>{"2", "1", "3", "2"});
  store.cancelWait(id);  // already completed: nothing happens
  CHECK(result.calls == 1);
  // Every key there already: completed before waitAsync returns.
  AsyncResult now;
  auto immediate = now.promise.get_future();
  CHECK(store.waitAsync({"d"}, std::chrono::seconds(1), now.callback()) == 0);
  CHECK(immediate.get().second == std::vector<std::string>{"4"});
  CHECK(store.multiGet({"d", "a"}, std::chrono::seconds(1)) == std::vector<std::string>{"4", "1"});
}

TEST_CASE("store: a non-blocking wait times out naming the missing key, and cancel and close end "
          "the others") {
  ds::runtime::MemoryStore store;
  AsyncResult late, cancelled, closed;
  auto lateResult = late.promise.get_future();
  auto cancelledResult = cancelled.promise.get_future();
  auto closedResult = closed.promise.get_future();
  store.waitAsync({"never"}, std::chrono::milliseconds(100), late.callback());
  const uint64_t id = store.waitAsync({"x"}, std::chrono::seconds(30), cancelled.callback());
  store.waitAsync({"y", "z"}, std::chrono::seconds(30), closed.callback());
  REQUIRE(lateResult.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK_THAT(lateResult.get().first, Catch::StartsWith("timeout: ") && Catch::Contains("\"never\""));
  store.cancelWait(id);
  CHECK_THAT(cancelledResult.get().first, Catch::Contains("cancelled"));
  store.set("x", "1");  // a cancelled wait is gone: no second call
  CHECK(cancelled.calls == 1);
  store.close("job over");
  CHECK_THAT(closedResult.get().first, Catch::Contains("store closed: job over"));
  AsyncResult after;
  auto afterResult = after.promise.get_future();
  store.waitAsync({"y"}, std::chrono::seconds(1), after.callback());
  CHECK_THAT(afterResult.get().first, Catch::Contains("store closed"));
}
