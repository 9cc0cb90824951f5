// What the two offload I/O engines share: a read and a write are one transfer routine each engine
// writes once, in its own way (libaio's queue, pread/pwrite).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/offload/aio_engine.h"

namespace ds::runtime {

class TransferEngine : public AioEngine {
 public:
  void read(const std::string& path, void* buffer, size_t bytes, uint64_t offset) final {
    transfer(false, path, static_cast<char*>(buffer), bytes, offset);
  }
  void write(const std::string& path, const void* buffer, size_t bytes, uint64_t offset) final {
    // The buffer is only read: transfer takes one pointer type for both directions.
    transfer(true, path, static_cast<char*>(const_cast<void*>(buffer)), bytes, offset);
  }

 protected:
  virtual void transfer(bool write, const std::string& path, char* buffer, size_t bytes,
                        uint64_t offset) = 0;
};

}  // namespace ds::runtime
