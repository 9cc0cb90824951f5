// checkpoint_files: synced writes, verified reads, atomic publish (see the header).
#include "runtime/checkpoint/checkpoint_files.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/crc32c.h"
#include "common/errno_text.h"
#include "common/error.h"
#include "common/files.h"

namespace ds::runtime {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxTagFileBytes = 4096;

std::string errnoText() { return ds::errnoText(errno); }

void syncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open to sync: " + errnoText());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error(path + ": fsync failed: " + errnoText());
}

}  // namespace

WrittenFile writeFileSynced(const std::string& path,
                            const std::vector<std::pair<const void*, size_t>>& pieces) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(path + ": cannot create checkpoint file: " + errnoText());
  WrittenFile out;
  for (const auto& [data, size] : pieces) {
    out.checksum = crc32c(data, size, out.checksum);
    const char* p = static_cast<const char*>(data);
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, p + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = errnoText();
        ::close(fd);
        throw Error(path + ": write failed after " + std::to_string(out.bytes + done) +
                    " bytes: " + why);
      }
      done += static_cast<size_t>(n);
    }
    out.bytes += size;
  }
  if (::fsync(fd) != 0) {
    const std::string why = errnoText();
    ::close(fd);
    throw Error(path + ": fsync failed: " + why);
  }
  if (::close(fd) != 0) throw Error(path + ": close failed: " + errnoText());
  return out;
}

ShardFileWriter::ShardFileWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd_ < 0) throw Error(path + ": cannot create checkpoint file: " + errnoText());
}

ShardFileWriter::~ShardFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ShardFileWriter::writeAt(uint64_t offset, const void* data, size_t bytes) {
  if (bytes == 0) return;
  const char* p = static_cast<const char*>(data);
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(path_ + ": write failed at offset " + std::to_string(offset + done) + ": " +
                  errnoText());
    done += static_cast<size_t>(n);
  }
  pieces_.push_back({offset, bytes, crc32c(data, bytes)});
}

WrittenFile ShardFileWriter::finish() {
  std::sort(pieces_.begin(), pieces_.end(),
            [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  WrittenFile out;
  for (const Piece& piece : pieces_) {
    if (piece.offset != out.bytes)
      throw Error(path_ + ": the pieces written leave a gap or overlap at offset " +
                  std::to_string(std::min(piece.offset, out.bytes)) + " (a bug)");
    out.checksum = crc32cCombine(out.checksum, piece.checksum, piece.bytes);
    out.bytes += piece.bytes;
  }
  if (::fsync(fd_) != 0) throw Error(path_ + ": fsync failed: " + errnoText());
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw Error(path_ + ": close failed: " + errnoText());
  return out;
}

void verifyCheckpointFile(const std::string& path, uint64_t bytes, uint32_t checksum) {
  CheckpointReader reader(path);
  const uint64_t size = reader.size();
  if (size != bytes)
    throw Error(path + ": checkpoint file is " + std::to_string(size) +
                " bytes, the manifest says " + std::to_string(bytes) +
                (size < bytes ? " (truncated)" : " (extra bytes)"));
  std::vector<char> block(1 << 20);
  uint32_t actual = 0;
  for (uint64_t done = 0; done < bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), bytes - done));
    reader.read(done, n, block.data());
    actual = crc32c(block.data(), n, actual);
    done += n;
  }
  if (actual != checksum)
    throw Error(path + ": checkpoint file is corrupted (crc32c " + hex32(actual) +
                ", the manifest says " + hex32(checksum) + ")");
}

void writeTextAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  try {
    writeFileSynced(temporary, {{text.data(), text.size()}});
    if (::rename(temporary.c_str(), path.c_str()) != 0)
      throw Error(path + ": cannot rename " + temporary + " into place: " + errnoText());
  } catch (...) {
    ::unlink(temporary.c_str());  // a full disk must not keep a half-written copy
    throw;
  }
}

void publishCheckpointDirectory(const std::string& staging, const std::string& dir,
                                const std::string& tag) {
  const std::string target = (fs::path(dir) / tag).string();
  syncPath(staging);
  std::error_code ec;
  if (fs::exists(target, ec)) {
    // Swap, never delete-then-rename: there is no moment without a complete dir/tag.
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0)
      throw Error(target + ": cannot swap the new checkpoint into place: " + errnoText());
    fs::remove_all(staging, ec);
  } else if (::rename(staging.c_str(), target.c_str()) != 0) {
    throw Error(target + ": cannot move the new checkpoint into place: " + errnoText());
  }
  syncPath(dir);
  writeTextAtomically((fs::path(dir) / "latest").string(), tag + "\n");
  syncPath(dir);
}

std::string readLatestTag(const std::string& dir) {
  const std::string path = (fs::path(dir) / "latest").string();
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT)
    throw Error(path + ": cannot read (no checkpoint saved in " + dir +
                "? pass a tag to load a specific one)");
  // A tag file holds one short name: a link to a device or a huge file is refused unread.
  const std::string text = readWholeFile(path, "latest-checkpoint tag file", kMaxTagFileBytes);
  std::string tag = text.substr(0, text.find('\n'));
  while (!tag.empty() && (tag.back() == '\r' || tag.back() == ' ')) tag.pop_back();
  if (tag.empty()) throw Error(path + ": empty; expected the tag of the latest checkpoint");
  return tag;
}

std::string gridCheckpointDir(const std::string& root, int64_t stage, int64_t modelRank) {
  if (stage == 0 && modelRank == 0) return root;
  char name[48];
  std::snprintf(name, sizeof(name), "pipe_%02lld-model_%02lld", static_cast<long long>(stage),
                static_cast<long long>(modelRank));
  return (std::filesystem::path(root) / name).string();
}

std::string expertCheckpointDir(const std::string& gridDir, int64_t expertRank) {
  char name[32];
  std::snprintf(name, sizeof(name), "experts_%02lld", static_cast<long long>(expertRank));
  return (std::filesystem::path(gridDir) / name).string();
}

}  // namespace ds::runtime
