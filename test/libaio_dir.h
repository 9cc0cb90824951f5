// Where the tests of the libaio engine write, directly or through the swappers and the engine's
// NVMe offload: a scratch directory that takes O_DIRECT (test/scratch_dir.h). Where this build
// has no libaio or no such directory exists, the case is skipped by name (test/skip.h) instead
// of passing on the pread/pwrite engine that a tmpfs directory would get.
#pragma once

#include <string>

#include "test/scratch_dir.h"
#include "test/skip.h"

namespace ds::test {

// The directory, or "" when the caller must return (the case was skipped). Needs DS_HAVE_LIBAIO
// (0 or 1) from the target's compile definitions.
inline std::string libaioScratchDir(const std::string& name) {
  if (skipUnless(DS_HAVE_LIBAIO,
                 "this build has no libaio (libaio-dev was missing at configure "
                 "time): the libaio engine is not tested"))
    return "";
  std::string whyNot;
  const std::string dir = makeDirectIoScratchDir(name, whyNot);
  skipUnless(!dir.empty(), whyNot);
  return dir;
}

// What AioEngine::name() says for the libaio engine.
inline constexpr const char* kLibaioEngineName = "libaio (O_DIRECT)";

}  // namespace ds::test
