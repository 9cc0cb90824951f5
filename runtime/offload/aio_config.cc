#include "runtime/offload/aio_config.h"

#include <string>

#include "common/error.h"

namespace ds::runtime {

void AioConfig::validate() const {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw Error(message);
  };
  require(blockSize >= 4096 && blockSize % 4096 == 0 && blockSize <= (int64_t{1} << 30),
          "aio.block_size: expected a multiple of 4096 between 4096 and 1 GiB, got " +
              std::to_string(blockSize));
  require(queueDepth >= 1 && queueDepth <= 1024,
          "aio.queue_depth: expected 1..1024, got " + std::to_string(queueDepth));
  require(threadCount >= 1 && threadCount <= 256,
          "aio.thread_count: expected 1..256, got " + std::to_string(threadCount));
  require(!useGds, "aio.use_gds: GPU direct storage needs a GPU and NVIDIA's cuFile; there is "
                   "none here: set it to false");
}

}  // namespace ds::runtime
