#include "runtime/offload/transfer_parts.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "common/error.h"

namespace ds::runtime {

std::string describeTransfer(const std::string& path, uint64_t offset, size_t bytes) {
  return path + " (offset " + std::to_string(offset) + ", " + std::to_string(bytes) + " bytes)";
}

void transferInParts(const std::string& path, bool write, int extraFlags, uint64_t offset,
                     size_t bytes, size_t blockBytes, int64_t threadCount,
                     const std::function<void(int fd, size_t begin, size_t end)>& run) {
  if (bytes == 0) return;
  const int fd = open(path.c_str(), (write ? O_WRONLY | O_CREAT : O_RDONLY) | extraFlags, 0600);
  if (fd < 0)
    throw Error(describeTransfer(path, offset, bytes) + ": cannot open for " +
                (write ? "writing" : "reading") + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  const size_t blocks = (bytes + blockBytes - 1) / blockBytes;
  const size_t threads = std::min<size_t>(static_cast<size_t>(threadCount), blocks);
  std::vector<std::exception_ptr> errors(threads);
  auto part = [&](size_t t) {
    const size_t begin = blocks * t / threads * blockBytes;
    const size_t end = std::min(bytes, blocks * (t + 1) / threads * blockBytes);
    try {
      run(fd, begin, end);
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

}  // namespace ds::runtime
