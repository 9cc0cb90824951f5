// libFuzzer's entry point for an executable linked with exactly one fuzz target. An exception
// other than ds::Error is a finding: its type and message are printed before the abort, since
// libFuzzer itself would only see std::terminate.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "fuzz/fuzz_target.h"

// LeakSanitizer's built-in suppressions for these programs. gRPC's core (not instrumented) starts
// detached threads lazily and frees their state as they exit; one caught exiting during a leak
// check reads as a leak of gpr_malloc'ed memory and a grpc_core::Thread (seen once in 10,600
// runs of fuzz_coordinator). Likewise a channel's stack (gpr_zalloc'ed in Channel::Create) is
// freed by gRPC's own threads after the last reference goes: caught in between, it read as a
// leak once in 7,449 runs, and its input leaks nothing run alone. So did a server-side HTTP/2
// transport (and its combiner) that gRPC's executor was still setting up for an accepted
// connection, once in 16,840 runs. Our code never calls gpr_malloc or gpr_zalloc, and never runs
// inside gRPC's transport creation, so nothing of ours is hidden.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:gpr_malloc\nleak:gpr_zalloc\nleak:grpc_core::Thread::Thread\n"
         "leak:grpc_create_chttp2_transport\nleak:grpc_combiner_create\n";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ds::fuzz::FuzzTarget& target = [] {
    const auto& targets = ds::fuzz::fuzzTargets();
    if (targets.size() != 1) {
      std::fprintf(stderr, "ds-fuzz: %zu targets linked into one fuzzer (expected 1)\n",
                   targets.size());
      std::abort();
    }
    return targets.front();
  }();
  try {
    ds::fuzz::runFuzzTarget(target, data, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds-fuzz: %s: uncaught %s: %s\n", target.name, typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "ds-fuzz: %s: uncaught exception of an unknown type\n", target.name);
    std::abort();
  }
  return 0;
}
