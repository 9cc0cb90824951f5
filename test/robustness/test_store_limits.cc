// The key-value store's limits: oversized keys and values, too many keys, a full store, waits on
// too many keys and an overflowing add are refused with a message; a timeout over thousands of
// keys stays a short message.
#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/comm/memory_store.h"

using ds::runtime::MemoryStore;
using ds::runtime::StoreLimits;
using namespace std::chrono_literals;

TEST_CASE("store limits: sizes, counts and totals are refused past their limit") {
  StoreLimits limits;
  limits.maxKeyBytes = 16;
  limits.maxValueBytes = 32;
  limits.maxKeys = 3;
  limits.maxTotalBytes = 60;
  limits.maxKeysPerWait = 2;
  MemoryStore store(limits);

  CHECK_THROWS_WITH(store.set(std::string(17, 'k'), "v"), Catch::Contains("key of 17 bytes"));
  CHECK_THROWS_WITH(store.set("k", std::string(33, 'v')),
                    Catch::Contains("value of 33 bytes for key \"k\": at most 32"));
  store.set("a", std::string(20, 'v'));  // 21 bytes held
  store.set("b", std::string(20, 'v'));  // 42
  CHECK_THROWS_WITH(store.set("c", std::string(20, 'v')), Catch::Contains("store: full"));
  store.set("a", "");  // replacing a value frees its bytes: 22 held
  store.set("c", std::string(20, 'v'));
  CHECK_THROWS_WITH(store.set("d", ""), Catch::Contains("3 keys already, at most 3"));
  CHECK(store.get("c", 0ms) == std::string(20, 'v'));
  CHECK_THROWS_WITH(store.wait({"a", "b", "c"}, 0ms), Catch::Contains("wait on 3 keys, at most 2"));
}

TEST_CASE("store limits: add refuses to overflow and leaves the value unchanged") {
  MemoryStore store;
  CHECK(store.add("n", std::numeric_limits<int64_t>::max()) == std::numeric_limits<int64_t>::max());
  CHECK_THROWS_WITH(store.add("n", 1), Catch::Contains("overflows a 64-bit integer"));
  CHECK(store.add("n", 0) == std::numeric_limits<int64_t>::max());
  CHECK(store.add("m", std::numeric_limits<int64_t>::min()) == std::numeric_limits<int64_t>::min());
  CHECK_THROWS_WITH(store.add("m", -1), Catch::Contains("overflows"));
}

TEST_CASE("store limits: a timeout over many missing keys is a short message") {
  MemoryStore store;
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; ++i)
    keys.push_back("rank/" + std::to_string(i) + std::string(200, 'x'));
  try {
    store.wait(keys, 1ms);
    FAIL("wait returned");
  } catch (const ds::TimeoutError& e) {
    const std::string message = e.what();
    CHECK(message.size() < 2000);
    CHECK(message.find("and 992 more") != std::string::npos);
  }
}
