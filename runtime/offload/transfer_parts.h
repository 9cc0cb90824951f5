// Internal to the AIO engines: what both do around their own I/O loop. The file is opened once
// per request; the request is cut into thread_count contiguous runs of whole blocks, each run on
// its own thread (the first on the caller's); the first error any run threw is rethrown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ds::runtime {

// "PATH (offset O, N bytes)": how every engine error names the place.
std::string describeTransfer(const std::string& path, uint64_t offset, size_t bytes);

// Opens `path` (created for writing, extra flags e.g. O_DIRECT), calls run(fd, begin, end) for
// each part of [0, bytes), closes it. Throws ds::Error naming the file when it cannot be opened.
void transferInParts(const std::string& path, bool write, int extraFlags, uint64_t offset,
                     size_t bytes, size_t blockBytes, int64_t threads,
                     const std::function<void(int fd, size_t begin, size_t end)>& run);

}  // namespace ds::runtime
