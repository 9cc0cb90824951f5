// Built without libaio (libaio-dev missing at configure time, or DS_LIBAIO=OFF): the factory
// (aio_engine.cc) falls back to pread/pwrite; only an explicit request for libaio is refused.
#include "common/error.h"
#include "runtime/offload/aio_engine.h"

namespace ds::runtime {

bool libaioBuilt() { return false; }

std::unique_ptr<AioEngine> makeLibaioEngine(const AioConfig&) {
  throw Error("this build has no libaio (install libaio-dev and rebuild); the pread/pwrite "
              "engine works without it");
}

}  // namespace ds::runtime
