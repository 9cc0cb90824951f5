// What both AIO engines share: the aio block's rules, aligned (locked) buffers, and the choice
// between libaio and plain I/O for a directory.
#include "runtime/offload/aio_engine.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "common/errno_text.h"
#include "common/error.h"
#include "runtime/offload/io_fault_injection.h"

namespace ds::runtime {

AlignedBuffer::AlignedBuffer(size_t bytes, bool lock) : bytes_(bytes) {
  capacity_ = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (capacity_ == 0) capacity_ = kAlignment;
  // Large buffers on 2 MiB boundaries and transparent huge pages: the kernel pins a buffer's
  // pages for every O_DIRECT request, and 512x fewer page-table entries make that cheaper.
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t alignment = capacity_ >= kHuge ? kHuge : kAlignment;
  if (alignment == kHuge) capacity_ = (capacity_ + kHuge - 1) / kHuge * kHuge;
  if (posix_memalign(&data_, alignment, capacity_) != 0)
    throw Error("cannot allocate " + std::to_string(capacity_) + " bytes of aligned memory");
  if (alignment == kHuge) madvise(data_, capacity_, MADV_HUGEPAGE);
  std::memset(data_, 0, capacity_);  // touch every page now, not in the middle of an I/O
  // Locked pages never swap out under a transfer; without the memlock allowance they still work.
  locked_ = lock && mlock(data_, capacity_) == 0;
}

AlignedBuffer::~AlignedBuffer() {
  if (!data_) return;
  if (locked_) munlock(data_, capacity_);
  std::free(data_);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(other.bytes_),
      capacity_(other.capacity_),
      locked_(other.locked_) {}

bool directIoSupported(const std::string& directory) {
  std::string probe = directory + "/.ds-odirect-probe-XXXXXX";
  const int fd = mkstemp(probe.data());
  if (fd < 0) throw Error(directory + ": cannot create a file there: " + errnoText(errno));
  close(fd);
  const int direct = open(probe.c_str(), O_RDWR | O_DIRECT);
  const bool ok = direct >= 0;
  if (ok) close(direct);
  unlink(probe.c_str());
  return ok;
}

AioBackend chooseAioBackend(bool libaioBuilt, bool directIo) {
  return libaioBuilt && directIo ? AioBackend::kLibaio : AioBackend::kPlain;
}

std::unique_ptr<AioEngine> makeAioEngine(const AioConfig& config, AioBackend backend) {
  return withInjectedIoFault(backend == AioBackend::kLibaio ? makeLibaioEngine(config)
                                                           : makePlainEngine(config));
}

std::unique_ptr<AioEngine> makeAioEngine(const AioConfig& config, const std::string& directory,
                                         bool libaioBuilt) {
  config.validate();
  // Without libaio the O_DIRECT probe cannot change the answer: the build decides, and says so
  // once, not once per swap file.
  const bool directIo = libaioBuilt && directIoSupported(directory);
  const AioBackend backend = chooseAioBackend(libaioBuilt, directIo);
  if (!libaioBuilt) {
    static std::once_flag noticed;
    std::call_once(noticed, [] {
      std::fprintf(stderr,
                   "ds: this build has no libaio (libaio-dev was missing at configure time): "
                   "offload I/O uses pread/pwrite through the page cache; install libaio-dev and "
                   "rebuild for O_DIRECT\n");
    });
  } else if (backend == AioBackend::kPlain) {
    std::fprintf(stderr,
                 "ds: %s does not take O_DIRECT files (tmpfs?): offload I/O uses pread/pwrite "
                 "through the page cache\n",
                 directory.c_str());
  }
  return makeAioEngine(config, backend);
}

std::unique_ptr<AioEngine> makeAioEngine(const AioConfig& config, const std::string& directory) {
  return makeAioEngine(config, directory, libaioBuilt());
}

}  // namespace ds::runtime
