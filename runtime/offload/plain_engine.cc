// The plain engine: pread/pwrite through the page cache, for file systems without O_DIRECT.
// thread_count threads take contiguous parts of a request; short transfers are resumed.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "common/error.h"
#include "runtime/offload/aio_engine.h"

namespace ds::runtime {
namespace {

class PlainEngine final : public AioEngine {
 public:
  explicit PlainEngine(const AioConfig& config) : c_(config) { c_.validate(); }
  const char* name() const override { return "pread/pwrite"; }

  void read(const std::string& path, void* buffer, size_t bytes, uint64_t offset) override {
    transfer(false, path, static_cast<char*>(buffer), bytes, offset);
  }
  void write(const std::string& path, const void* buffer, size_t bytes, uint64_t offset) override {
    transfer(true, path, static_cast<char*>(const_cast<void*>(buffer)), bytes, offset);
  }

 private:
  void transfer(bool write, const std::string& path, char* buffer, size_t bytes, uint64_t offset) {
    auto where = [&](uint64_t at, size_t n) {
      return path + " (offset " + std::to_string(at) + ", " + std::to_string(n) + " bytes)";
    };
    if (bytes == 0) return;
    const int fd = open(path.c_str(), write ? O_WRONLY | O_CREAT : O_RDONLY, 0600);
    if (fd < 0)
      throw Error(where(offset, bytes) + ": cannot open for " + (write ? "writing" : "reading") +
                  ": " + std::strerror(errno));
    struct Closer {
      int fd;
      ~Closer() { close(fd); }
    } closer{fd};
    const size_t block = static_cast<size_t>(c_.blockSize);
    const size_t blocks = (bytes + block - 1) / block;
    const size_t threads = std::min<size_t>(static_cast<size_t>(c_.threadCount), blocks);
    std::vector<std::exception_ptr> errors(threads);
    auto part = [&](size_t t) {
      size_t at = blocks * t / threads * block;
      const size_t end = std::min(bytes, blocks * (t + 1) / threads * block);
      try {
        while (at < end) {
          const size_t want = std::min(block, end - at);
          const ssize_t got = write ? pwrite(fd, buffer + at, want, static_cast<off_t>(offset + at))
                                    : pread(fd, buffer + at, want, static_cast<off_t>(offset + at));
          if (got < 0 && errno == EINTR) continue;
          if (got < 0)
            throw Error(where(offset + at, want) + ": " + (write ? "write" : "read") +
                        " failed: " + std::strerror(errno));
          if (got == 0)
            throw Error(where(offset + at, want) + ": short " + (write ? "write" : "read") +
                        ": the file ends at " + std::to_string(offset + at));
          at += static_cast<size_t>(got);  // a short transfer goes on from where it stopped
        }
      } catch (...) {
        errors[t] = std::current_exception();
      }
    };
    std::vector<std::thread> workers;
    for (size_t t = 1; t < threads; ++t) workers.emplace_back(part, t);
    part(0);
    for (auto& w : workers) w.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  AioConfig c_;
};

}  // namespace

std::unique_ptr<AioEngine> makePlainEngine(const AioConfig& config) {
  return std::make_unique<PlainEngine>(config);
}

}  // namespace ds::runtime
