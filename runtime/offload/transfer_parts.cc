#include "runtime/offload/transfer_parts.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "common/errno_text.h"
#include "common/error.h"

namespace ds::runtime {

std::string describeTransfer(const std::string& path, uint64_t offset, size_t bytes) {
  return path + " (offset " + std::to_string(offset) + ", " + std::to_string(bytes) + " bytes)";
}

void transferInParts(const std::string& path, bool write, int extraFlags, uint64_t offset,
                     size_t bytes, size_t blockBytes, int64_t threadCount, IoPool* helpers,
                     const std::function<void(int fd, size_t begin, size_t end)>& run) {
  if (bytes == 0) return;
  const int fd = open(path.c_str(), (write ? O_WRONLY | O_CREAT : O_RDONLY) | extraFlags, 0600);
  if (fd < 0)
    throw Error(describeTransfer(path, offset, bytes) + ": cannot open for " +
                (write ? "writing" : "reading") + ": " + errnoText(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  const size_t blocks = (bytes + blockBytes - 1) / blockBytes;
  const size_t threads = helpers ? std::min<size_t>(static_cast<size_t>(threadCount), blocks) : 1;
  // Shared with the helpers' tasks, which may be dequeued only after this request returned: they
  // then find no part left and touch nothing else (`run`, `fd` and this frame are gone).
  struct Progress {
    std::atomic<size_t> next{0};
    std::mutex mutex;
    std::condition_variable finished;
    size_t done = 0;
    std::vector<std::exception_ptr> errors;
  };
  auto progress = std::make_shared<Progress>();
  progress->errors.resize(threads);
  auto part = [&](size_t t) {
    const size_t begin = blocks * t / threads * blockBytes;
    const size_t end = std::min(bytes, blocks * (t + 1) / threads * blockBytes);
    try {
      run(fd, begin, end);
    } catch (...) {
      progress->errors[t] = std::current_exception();
    }
  };
  auto takeParts = [progress, threads, &part] {
    for (size_t t; (t = progress->next.fetch_add(1)) < threads;) {
      part(t);
      std::lock_guard lock(progress->mutex);
      if (++progress->done == threads) progress->finished.notify_all();
    }
  };
  for (size_t t = 1; t < threads; ++t) helpers->submit(takeParts);
  takeParts();
  {
    std::unique_lock lock(progress->mutex);
    progress->finished.wait(lock, [&] { return progress->done == threads; });
  }
  for (auto& e : progress->errors)
    if (e) std::rethrow_exception(e);
}

std::unique_ptr<IoPool> makeTransferHelpers(int64_t threads) {
  if (threads <= 1) return nullptr;
  return std::make_unique<IoPool>(static_cast<int>(threads - 1));
}

}  // namespace ds::runtime
