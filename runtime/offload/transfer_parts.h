// Internal to the AIO engines: what both do around their own I/O loop. The file is opened once
// per request; the request is cut into thread_count contiguous runs of whole blocks, run by the
// caller and by the engine's persistent helper threads (an IoPool of thread_count - 1, never a
// thread per request); the first error any run threw is rethrown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/offload/io_pool.h"

namespace ds::runtime {

// "PATH (offset O, N bytes)": how every engine error names the place.
std::string describeTransfer(const std::string& path, uint64_t offset, size_t bytes);

// Opens `path` (created for writing, extra flags e.g. O_DIRECT), calls run(fd, begin, end) for
// each part of [0, bytes), closes it. Throws ds::Error naming the file when it cannot be opened.
// `helpers` (null when threads is 1) runs parts beside the caller; the caller takes every part
// no helper has started, so concurrent requests on one engine never wait for each other's parts.
void transferInParts(const std::string& path, bool write, int extraFlags, uint64_t offset,
                     size_t bytes, size_t blockBytes, int64_t threads, IoPool* helpers,
                     const std::function<void(int fd, size_t begin, size_t end)>& run);
// The helpers an engine with `threads` threads keeps for its life (null for 1).
std::unique_ptr<IoPool> makeTransferHelpers(int64_t threads);

}  // namespace ds::runtime
