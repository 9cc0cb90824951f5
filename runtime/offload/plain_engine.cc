// The plain engine: pread/pwrite through the page cache, for file systems without O_DIRECT.
// thread_count threads (the caller and the engine's helpers) take contiguous parts of a request;
// short transfers are resumed.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/errno_text.h"
#include "common/error.h"
#include "runtime/offload/aio_engine.h"
#include "runtime/offload/transfer_engine.h"
#include "runtime/offload/transfer_parts.h"

namespace ds::runtime {
namespace {

class PlainEngine final : public TransferEngine {
 public:
  explicit PlainEngine(const AioConfig& config)
      : c_((config.validate(), config)), helpers_(makeTransferHelpers(c_.threadCount)) {}
  const char* name() const override { return "pread/pwrite"; }


 private:
  void transfer(bool write, const std::string& path, char* buffer, size_t bytes,
                uint64_t offset) override {
    const size_t block = static_cast<size_t>(c_.blockSize);
    transferInParts(path, write, 0, offset, bytes, block, c_.threadCount, helpers_.get(),
                    [&](int fd, size_t at, size_t end) {
      while (at < end) {
        const size_t want = std::min(block, end - at);
        const ssize_t got = write ? pwrite(fd, buffer + at, want, static_cast<off_t>(offset + at))
                                  : pread(fd, buffer + at, want, static_cast<off_t>(offset + at));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
          throw Error(describeTransfer(path, offset + at, want) + ": " + (write ? "write" : "read") +
                      " failed: " + errnoText(errno));
        if (got == 0)
          throw Error(describeTransfer(path, offset + at, want) + ": short " +
                      (write ? "write" : "read") + ": the file ends at " +
                      std::to_string(offset + at));
        at += static_cast<size_t>(got);  // a short transfer goes on from where it stopped
      }
    });
  }

  AioConfig c_;
  std::unique_ptr<IoPool> helpers_;  // thread_count - 1 threads for the parts beside the caller
};

}  // namespace

std::unique_ptr<AioEngine> makePlainEngine(const AioConfig& config) {
  return std::make_unique<PlainEngine>(config);
}

}  // namespace ds::runtime
