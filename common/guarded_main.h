// The last line of defence of every executable: an exception that escapes main's body becomes a
// message on stderr and a non-zero exit status, never std::terminate and a core dump.
// Bad input and failed operations (ds::Error) exit 2; anything else is reported as an internal
// error and exits 1. Errors with a better-suited exit status are handled inside the body.
#pragma once

#include <cstdio>
#include <exception>

#include "common/error.h"
#include "common/printable.h"

namespace ds {

template <typename Body>
int guardedMain(const char* program, Body&& body) noexcept {
  try {
    return body();
  } catch (const Error& e) {
    // Messages quote input text (a hostfile line, a config key): print its control bytes escaped.
    std::fprintf(stderr, "%s: error: %s\n", program, printable(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, printable(e.what()).c_str());
  } catch (...) {
    std::fprintf(stderr, "%s: internal error: unknown exception\n", program);
  }
  return 1;
}

}  // namespace ds
