// Running test/reference/bpe_reference.py (GPT-2's encoder in Python, with the `regex` module)
// from the tokenizer tests. The interpreter is /usr/bin/python3, or $DS_BPE_PYTHON.
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "test/skip.h"

namespace ds::test {

inline std::string bpePython() {
  const char* env = std::getenv("DS_BPE_PYTHON");
  return env && *env ? env : "/usr/bin/python3";
}

// True when the case must stop here: no Python with `regex` (the case is skipped, exit 77).
inline bool skipWithoutRegexModule() {
  const bool available =
      std::system((bpePython() + " -c 'import regex' >/dev/null 2>&1").c_str()) == 0;
  return skipUnless(available, bpePython() +
                                   " cannot import regex; install python3-regex "
                                   "(scripts/setup --test)");
}

// The reference's stdout for `arguments` (stdin from `input`, if given); requires exit 0.
inline std::string runBpeReference(const std::string& arguments, const std::string& input = "") {
  const std::string command = bpePython() + " " DS_SOURCE_DIR "/test/reference/bpe_reference.py " +
                              arguments + (input.empty() ? "" : " < " + input);
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[65536];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  INFO(command);
  REQUIRE(pclose(pipe) == 0);
  return out;
}

}  // namespace ds::test
