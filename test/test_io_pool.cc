// IoPool, the offload's persistent transfer threads: work runs on the same few threads however
// many submissions there are, in submission order on one thread, errors come back through the
// future, and destruction runs what is still queued.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/offload/io_pool.h"

using ds::runtime::IoPool;

TEST_CASE("IoPool: every submission runs on one of the pool's threads, made once", "[aio]") {
  std::mutex mutex;
  std::set<std::thread::id> seen;
  {
    IoPool pool(3);
    CHECK(pool.threadCount() == 3);
    std::vector<std::future<void>> done;
    for (int i = 0; i < 200; ++i)
      done.push_back(pool.submit([&] {
        std::lock_guard lock(mutex);
        seen.insert(std::this_thread::get_id());
      }));
    for (auto& d : done) d.get();
  }
  CHECK(seen.size() >= 1);
  CHECK(seen.size() <= 3);
  CHECK(seen.count(std::this_thread::get_id()) == 0);
}

TEST_CASE("IoPool: one thread runs submissions in order, errors rethrow from their future",
          "[aio]") {
  IoPool pool(1);
  std::vector<int> order;
  std::vector<std::future<void>> done;
  for (int i = 0; i < 50; ++i) done.push_back(pool.submit([&order, i] { order.push_back(i); }));
  auto failed = pool.submit([] { throw std::runtime_error("disk gone"); });
  auto after = pool.submit([&order] { order.push_back(50); });
  for (auto& d : done) d.get();
  CHECK_THROWS_WITH(failed.get(), "disk gone");
  after.get();  // the pool outlives a failed transfer
  REQUIRE(order.size() == 51);
  for (int i = 0; i <= 50; ++i) CHECK(order[static_cast<size_t>(i)] == i);
  CHECK_THROWS(IoPool(0));
}

TEST_CASE("IoPool: destruction runs the queued work before joining", "[aio]") {
  std::atomic<int> ran{0};
  std::vector<std::future<void>> done;
  {
    IoPool pool(1);
    done.push_back(pool.submit([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ++ran;
    }));
    for (int i = 0; i < 10; ++i) done.push_back(pool.submit([&] { ++ran; }));
  }
  CHECK(ran == 11);
  for (auto& d : done) CHECK_NOTHROW(d.get());
}
