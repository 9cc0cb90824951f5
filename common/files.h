// Small file-system helpers shared by ds-launch, ds-worker and the tools. Every file the project
// reads as input goes through RegularFile: a FIFO, device or directory put where a file belongs
// is refused at open (which never blocks), and sizes are known before anything is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ds {

// A regular file open for reading. Opened with O_NONBLOCK, so a FIFO planted in its place cannot
// hang the open, then checked with fstat: anything but a regular file is an error.
class RegularFile {
 public:
  // Throws ds::Error "PATH: cannot open WHAT: REASON" or "PATH: cannot read WHAT: is a FIFO, not
  // a regular file" (WHAT says what the file should be, or the flag that named it).
  RegularFile(const std::string& path, const std::string& what);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // at open
  const std::string& path() const { return path_; }
  // Exactly `bytes` from `offset`; throws naming the file (also at an unexpected end of file).
  void readAt(uint64_t offset, size_t bytes, void* out) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// "4 KiB", "64 MiB", "100 bytes": a size limit as messages print it.
std::string byteSizeText(uint64_t bytes);

// The whole of a small regular file, refused without reading when it is larger than maxBytes;
// errors as RegularFile's, or "PATH: larger than 64 MiB; not a WHAT".
std::string readWholeFile(const std::string& path, const std::string& what,
                          size_t maxBytes = size_t{64} << 20);

// Whether `program` is an executable file: a path as given, or a name found on $PATH.
bool isExecutableOnPath(const std::string& program);

}  // namespace ds
