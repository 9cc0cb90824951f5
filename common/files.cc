// RegularFile, readWholeFile, isExecutableOnPath.
#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/error.h"

namespace ds {
namespace {

bool isExecutableFile(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

const char* kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

}  // namespace

RegularFile::RegularFile(const std::string& path, const std::string& what) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw Error(path + ": cannot open " + what + ": " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    const std::string why = S_ISDIR(info.st_mode) ? "is a directory"
                            : info.st_mode != 0
                                ? std::string("is ") + kindOf(info.st_mode) + ", not a regular file"
                                : std::strerror(errno);
    ::close(fd_);
    throw Error(path + ": cannot read " + what + ": " + why);
  }
  size_ = static_cast<uint64_t>(info.st_size);
}

RegularFile::~RegularFile() { ::close(fd_); }

void RegularFile::readAt(uint64_t offset, size_t bytes, void* out) const {
  char* p = static_cast<char*>(out);
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = ::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(path_ + ": cannot read " + std::to_string(bytes) + " bytes at offset " +
                  std::to_string(offset) + ": " +
                  (n == 0 ? "unexpected end of file" : std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
}

std::string byteSizeText(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string readWholeFile(const std::string& path, const std::string& what, size_t maxBytes) {
  const RegularFile file(path, what);
  if (file.size() > maxBytes)
    throw Error(path + ": larger than " + byteSizeText(maxBytes) + "; not a " + what);
  std::string text(file.size(), '\0');
  file.readAt(0, text.size(), text.data());
  return text;
}

bool isExecutableOnPath(const std::string& program) {
  if (program.find('/') != std::string::npos) return isExecutableFile(program);
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (isExecutableFile((dir.empty() ? "." : dir) + "/" + program)) return true;
  return false;
}

}  // namespace ds
