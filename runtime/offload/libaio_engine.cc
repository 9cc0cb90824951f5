// The libaio engine: O_DIRECT, block_size requests, queue_depth in flight per thread, each of
// thread_count threads on its own contiguous part of the request.
#include <fcntl.h>
#include <libaio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/errno_text.h"
#include "common/error.h"
#include "runtime/offload/aio_engine.h"
#include "runtime/offload/transfer_engine.h"
#include "runtime/offload/transfer_parts.h"

namespace ds::runtime {
namespace {

class LibaioEngine final : public TransferEngine {
 public:
  explicit LibaioEngine(const AioConfig& config)
      : c_((config.validate(), config)), helpers_(makeTransferHelpers(c_.threadCount)) {}
  ~LibaioEngine() override {
    for (io_context_t ctx : idle_) io_destroy(ctx);
  }
  const char* name() const override { return "libaio (O_DIRECT)"; }


 private:
  void transfer(bool write, const std::string& path, char* buffer, size_t bytes,
                uint64_t offset) override {
    constexpr size_t kAlign = AlignedBuffer::kAlignment;
    if (reinterpret_cast<uintptr_t>(buffer) % kAlign || offset % kAlign || bytes % kAlign)
      throw Error(describeTransfer(path, offset, bytes) +
                  ": O_DIRECT I/O needs the buffer address, offset and length in multiples of "
                  "4096 (use AlignedBuffer and whole blocks)");
    transferInParts(path, write, O_DIRECT, offset, bytes, static_cast<size_t>(c_.blockSize),
                    c_.threadCount, helpers_.get(), [&](int fd, size_t begin, size_t end) {
                      runPart(write, fd, path, buffer + begin, end - begin, offset + begin);
                    });
  }

  // One thread's part: up to queue_depth blocks in flight; short transfers resubmitted.
  void runPart(bool write, int fd, const std::string& path, char* buffer, size_t bytes,
               uint64_t offset) const {
    const int depth = static_cast<int>(c_.queueDepth);
    const io_context_t ctx = acquireContext(path, offset, bytes);
    // Back to the pool only when nothing is in flight; after an error io_destroy waits for the
    // outstanding requests (they still point into the caller's buffer) and drops the context.
    struct Release {
      const LibaioEngine* engine;
      io_context_t ctx;
      bool clean = false;
      ~Release() {
        if (clean) engine->releaseContext(ctx);
        else io_destroy(ctx);
      }
    } release{this, ctx};
    struct Pending {
      iocb cb;
      size_t at;    // offset of the piece within this part
      size_t size;  // bytes still wanted from `at`
    };
    std::vector<Pending> slots(static_cast<size_t>(depth));
    std::vector<int> freeSlots;
    for (int i = depth - 1; i >= 0; --i) freeSlots.push_back(i);
    std::vector<iocb*> batch;
    std::vector<io_event> events(static_cast<size_t>(depth));
    const size_t block = static_cast<size_t>(c_.blockSize);
    size_t next = 0;  // the first byte not yet handed out
    int inFlight = 0;
    auto prepare = [&](int slot) {
      Pending& p = slots[static_cast<size_t>(slot)];
      if (write)
        io_prep_pwrite(&p.cb, fd, buffer + p.at, p.size, static_cast<long long>(offset + p.at));
      else
        io_prep_pread(&p.cb, fd, buffer + p.at, p.size, static_cast<long long>(offset + p.at));
      p.cb.data = reinterpret_cast<void*>(static_cast<intptr_t>(slot));
      batch.push_back(&p.cb);
    };
    auto submit = [&] {
      size_t done = 0;
      while (done < batch.size()) {
        const long count = c_.singleSubmit ? 1 : static_cast<long>(batch.size() - done);
        const int rc = io_submit(ctx, count, batch.data() + done);
        if (rc == -EAGAIN || rc == -EINTR) continue;
        if (rc < 0)
          throw Error(describeTransfer(path, offset, bytes) + ": io_submit: " + errnoText(-rc));
        done += static_cast<size_t>(rc);
        inFlight += rc;
      }
      batch.clear();
    };
    while (next < bytes || inFlight > 0) {
      // Refill: with overlap_events as soon as slots are free, else only when the queue drained.
      if (c_.overlapEvents || inFlight == 0) {
        while (next < bytes && !freeSlots.empty()) {
          const int slot = freeSlots.back();
          freeSlots.pop_back();
          const size_t size = std::min(block, bytes - next);
          slots[static_cast<size_t>(slot)].at = next;
          slots[static_cast<size_t>(slot)].size = size;
          next += size;
          prepare(slot);
        }
        submit();
      }
      const int want = c_.overlapEvents ? 1 : inFlight;
      const int got = io_getevents(ctx, want, inFlight, events.data(), nullptr);
      if (got == -EINTR) continue;
      if (got < 0)
        throw Error(describeTransfer(path, offset, bytes) + ": io_getevents: " + errnoText(-got));
      for (int e = 0; e < got; ++e) {
        --inFlight;
        const int slot = static_cast<int>(reinterpret_cast<intptr_t>(events[e].data));
        Pending& p = slots[static_cast<size_t>(slot)];
        const long res = static_cast<long>(events[e].res);
        if (res < 0)
          throw Error(describeTransfer(path, offset + p.at, p.size) + ": " + (write ? "write" : "read") +
                      " failed: " + errnoText(static_cast<int>(-res)));
        if (static_cast<size_t>(res) < p.size) {
          if (res == 0 || !write)  // a read comes up short only at the end of the file
            throw Error(describeTransfer(path, offset + p.at, p.size) + ": short " +
                        (write ? "write" : "read") + " of " + std::to_string(res) +
                        " bytes: the file ends at " + std::to_string(offset + p.at + res));
          p.at += static_cast<size_t>(res);  // resume the rest of the piece
          p.size -= static_cast<size_t>(res);
          prepare(slot);
          submit();
          continue;
        }
        freeSlots.push_back(slot);
      }
    }
    release.clean = true;
  }

  // io_destroy waits for an RCU grace period (tens of milliseconds): contexts are kept for the
  // engine's life and reused, one per concurrent part, never destroyed per request.
  io_context_t acquireContext(const std::string& path, uint64_t offset, size_t bytes) const {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        const io_context_t ctx = idle_.back();
        idle_.pop_back();
        return ctx;
      }
    }
    io_context_t ctx{};
    if (const int rc = io_setup(static_cast<int>(c_.queueDepth), &ctx); rc < 0)
      throw Error(describeTransfer(path, offset, bytes) + ": io_setup(" + std::to_string(c_.queueDepth) +
                  "): " + errnoText(-rc) + " (raise /proc/sys/fs/aio-max-nr?)");
    return ctx;
  }
  void releaseContext(io_context_t ctx) const {
    std::lock_guard lock(mutex_);
    idle_.push_back(ctx);
  }

  AioConfig c_;
  mutable std::mutex mutex_;
  mutable std::vector<io_context_t> idle_;
  std::unique_ptr<IoPool> helpers_;  // thread_count - 1 threads for the parts beside the caller
};

}  // namespace

bool libaioBuilt() { return true; }

std::unique_ptr<AioEngine> makeLibaioEngine(const AioConfig& config) {
  return std::make_unique<LibaioEngine>(config);
}

}  // namespace ds::runtime
