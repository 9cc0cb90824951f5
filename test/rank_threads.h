// The one way tests run ranks as threads: onThreads(world, body) runs body(rank) on `world`
// threads, joins them all, and rethrows the first rank's exception on the calling thread.
// Catch2 v2 assertions are not thread-safe: rank bodies never use REQUIRE/CHECK; they record
// results for the caller to assert on, or fail with rankCheck (an exception that names the rank's
// problem and reaches the caller's thread).
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ds::test {

template <typename Body>
void onThreads(int world, Body body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

// A check inside a rank body: throws (and so fails the test on the caller's thread) unless `ok`.
inline void rankCheck(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("rank check failed: " + what);
}

}  // namespace ds::test
