// Fuzz targets: one per parser of outside input, each handing the bytes to the entry point the
// product calls. A ds::Error is a refusal, the normal answer to bad input; anything else that
// escapes, and any crash or sanitizer report, is a finding. Every target is compiled both into a
// libFuzzer executable (DS_FUZZ builds: fuzz/libfuzzer_main.cc) and into the replay test of every
// build (test/test_fuzz_corpora.cc), which runs each file of test/fuzz_corpus/NAME/ through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds::fuzz {

using FuzzFunction = void (*)(std::string_view input);

struct FuzzTarget {
  const char* name;  // its corpus folder, test/fuzz_corpus/NAME, and executable, fuzz_NAME
  FuzzFunction run;
};

// Every target linked into this program, in registration order.
const std::vector<FuzzTarget>& fuzzTargets();

struct RegisterFuzzTarget {
  RegisterFuzzTarget(const char* name, FuzzFunction run);
};

// At namespace scope in the target's file: DS_FUZZ_TARGET(hostfile, fuzzHostfile);
#define DS_FUZZ_TARGET(name, function) \
  const ::ds::fuzz::RegisterFuzzTarget kFuzzTargetRegistration_##name{#name, function}

// Runs one input; false when the target refused it with a ds::Error. Anything else propagates.
bool runFuzzTarget(const FuzzTarget& target, const uint8_t* data, size_t size);

// A promise of the code under test was broken (a round trip that does not hold): prints what
// and aborts, which libFuzzer and the replay test both report as a crash.
[[noreturn]] void fuzzCheckFailed(const char* file, int line, const char* what);
#define DS_FUZZ_CHECK(condition) \
  ((condition) ? void(0) : ::ds::fuzz::fuzzCheckFailed(__FILE__, __LINE__, #condition))

// Parsers that read files rather than bytes get their input through here: a directory of this
// process (removed at exit), one file per name, rewritten on every call.
std::string scratchPath(const std::string& name);
std::string writeScratchFile(const std::string& name, std::string_view bytes);

// `input` cut at each `separator` (not included), into at most maxParts parts: the last part
// keeps any further separators.
std::vector<std::string_view> splitInput(std::string_view input, std::string_view separator,
                                         size_t maxParts);

}  // namespace ds::fuzz
