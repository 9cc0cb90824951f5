// AioEngine: whole-buffer file reads and writes for offloading, at the storage's speed. The libaio
// engine opens files with O_DIRECT and keeps queue_depth requests of block_size bytes in flight on
// each of thread_count threads, each thread taking its own contiguous part of a request (DeepSpeed's
// intra-request parallelism). Where the file system refuses O_DIRECT (tmpfs, some overlays) the
// plain engine (pread/pwrite) takes over with a one-line notice, as it does in a build without
// libaio (the factory, makeAioEngine, is the one place that chooses). Errors name the file,
// offset, length and errno text; a short read or write is resumed, and one that cannot be (end of
// file) is an error, never silently accepted. Not here: what is offloaded (the engine's swapper).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/offload/aio_config.h"

namespace ds::runtime {

// Page-aligned memory for O_DIRECT, locked in RAM when the memlock limit allows (else plain).
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 4096;
  // `lock`: mlock the pages where the memlock allowance permits (locked() says whether it did).
  explicit AlignedBuffer(size_t bytes, bool lock = true);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&&) = delete;
  AlignedBuffer(const AlignedBuffer&) = delete;
  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  bool locked() const { return locked_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0, capacity_ = 0;
  bool locked_ = false;
};

class AioEngine {
 public:
  virtual ~AioEngine() = default;
  virtual const char* name() const = 0;  // "libaio (O_DIRECT)" or "pread/pwrite"
  // Blocking, whole buffer. With O_DIRECT, buffer, offset and bytes must be multiples of 4096
  // (AlignedBuffer and whole blocks satisfy it); a write creates the file when missing.
  virtual void read(const std::string& path, void* buffer, size_t bytes, uint64_t offset) = 0;
  virtual void write(const std::string& path, const void* buffer, size_t bytes,
                     uint64_t offset) = 0;
};

enum class AioBackend { kLibaio, kPlain };

// Whether this build links libaio (libaio-dev found at configure time and DS_LIBAIO not OFF).
bool libaioBuilt();
// The one rule for which engine serves a directory: libaio needs both the library in this build
// and a directory that takes O_DIRECT files; anything else gets pread/pwrite.
AioBackend chooseAioBackend(bool libaioBuilt, bool directIo);

// The engine chooseAioBackend picks for `directory`; a fallback to pread/pwrite says why on stderr
// (a build without libaio once per process, a directory without O_DIRECT on every call). Throws
// ds::Error for an invalid config or use_gds. The three-argument form overrides libaioBuilt()
// (tests: the choice a build without libaio makes).
std::unique_ptr<AioEngine> makeAioEngine(const AioConfig& config, const std::string& directory);
std::unique_ptr<AioEngine> makeAioEngine(const AioConfig& config, const std::string& directory,
                                         bool libaioBuilt);
std::unique_ptr<AioEngine> makeAioEngine(const AioConfig& config, AioBackend backend);
// Either engine explicitly (tests and benchmarks compare them); in a build without libaio the
// libaio one throws ds::Error saying so.
std::unique_ptr<AioEngine> makeLibaioEngine(const AioConfig& config);
std::unique_ptr<AioEngine> makePlainEngine(const AioConfig& config);
// Whether files in `directory` can be opened with O_DIRECT.
bool directIoSupported(const std::string& directory);

}  // namespace ds::runtime
