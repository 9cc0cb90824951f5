// Skipping a test case that cannot run on this machine, truthfully: under CTest (which sets
// DS_TEST_SKIP_EXIT for every test) the case's process exits 77, which CTest counts as skipped
// (SKIP_RETURN_CODE 77), never as passed. Run by hand, the case warns and the caller returns, so
// the rest of the executable still runs. Call it before the case creates anything.
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ds::test {

// True when the test must stop here (the caller returns); never returns under CTest.
inline bool skipUnless(bool canRun, const std::string& reason) {
  if (canRun) return false;
  if (std::getenv("DS_TEST_SKIP_EXIT") != nullptr) {
    std::printf("SKIPPED: %s\n", reason.c_str());
    std::fflush(stdout);
    std::exit(77);
  }
  WARN("SKIPPED: " << reason);
  return true;
}

}  // namespace ds::test
