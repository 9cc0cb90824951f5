// A test hook, never set in production: DS_TEST_IO_FAULT=KIND:N[:ERRNO] makes the N-th (1-based)
// offload request of KIND (read, write or any) in this process fail as if the device returned
// ERRNO (EIO, ENOSPC or a number; default EIO), through the same message path as a real error;
// ERRNO `corrupt` makes it succeed with one byte of its data changed (a file changed under the job).
// It lets a test show that an I/O error in the middle of a step stops the job by name, with its
// last checkpoint intact, without a broken disk. Documented in docs/zero-and-offload.md.
#pragma once

#include <memory>

#include "runtime/offload/aio_engine.h"

namespace ds::runtime {

constexpr const char* kIoFaultVariable = "DS_TEST_IO_FAULT";

// `engine` itself when the variable is unset; otherwise it wrapped in the fault. Throws ds::Error
// for a malformed value (a typo must not silently test nothing).
std::unique_ptr<AioEngine> withInjectedIoFault(std::unique_ptr<AioEngine> engine);

}  // namespace ds::runtime
