// Built without libaio (libaio-dev missing at configure time): the libaio engine refuses to start.
#include "common/error.h"
#include "runtime/offload/aio_engine.h"

namespace ds::runtime {

std::unique_ptr<AioEngine> makeLibaioEngine(const AioConfig&) {
  throw Error("this build has no libaio (install libaio-dev and rebuild); the pread/pwrite "
              "engine works without it");
}

}  // namespace ds::runtime
