// The mmap indexed dataset: a writer that streams tokens to PREFIX.bin.tmp and writes the index
// at the end, and a reader that maps PREFIX.bin and copies the index after checking it.
#include "runtime/data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "common/error.h"
#include "common/files.h"

namespace ds::runtime {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;

size_t tokenBytes(TokenType type) { return type == TokenType::UInt16 ? 2 : 4; }

void writeAll(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(path + ": cannot write: " + std::strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

template <typename T>
void append(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

template <typename T>
T take(const std::string& text, size_t& at, const std::string& path, const char* what) {
  if (text.size() - at < sizeof(T))
    throw Error(path + ": truncated index (while reading " + std::string(what) + ")");
  T value;
  std::memcpy(&value, text.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenType type)
    : prefix_(std::move(prefix)), type_(type) {
  const std::string path = prefix_ + ".bin.tmp";
  if (const auto parent = std::filesystem::path(prefix_).parent_path(); !parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path + ": cannot create: " + std::strerror(errno));
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) {
    ::unlink((prefix_ + ".bin.tmp").c_str());
    ::unlink((prefix_ + ".idx.tmp").c_str());
  }
}

void IndexedDatasetWriter::addSequence(const std::vector<int32_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error(prefix_ + ": a sequence of " + std::to_string(tokens.size()) + " tokens");
  const std::string path = prefix_ + ".bin.tmp";
  if (type_ == TokenType::UInt16) {
    std::vector<uint16_t> narrow(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] > 65535)
        throw Error(prefix_ + ": token " + std::to_string(tokens[i]) + " does not fit uint16");
      narrow[i] = static_cast<uint16_t>(tokens[i]);
    }
    writeAll(fd_, narrow.data(), narrow.size() * 2, path);
  } else {
    writeAll(fd_, tokens.data(), tokens.size() * 4, path);
  }
  sizes_.push_back(static_cast<int32_t>(tokens.size()));
  tokens_ += tokens.size();
}

void IndexedDatasetWriter::endDocument() { docIdx_.push_back(static_cast<int64_t>(sizes_.size())); }

void IndexedDatasetWriter::finish() {
  const std::string bin = prefix_ + ".bin", idx = prefix_ + ".idx";
  if (::fsync(fd_) != 0 || ::close(fd_) != 0)
    throw Error(bin + ".tmp: cannot write: " + std::strerror(errno));
  fd_ = -1;
  std::string index(kMagic, sizeof(kMagic));
  append(index, kVersion);
  append(index, static_cast<uint8_t>(type_));
  append(index, static_cast<uint64_t>(sizes_.size()));
  append(index, static_cast<uint64_t>(docIdx_.size()));
  index.append(reinterpret_cast<const char*>(sizes_.data()), sizes_.size() * sizeof(int32_t));
  int64_t address = 0;
  for (int32_t size : sizes_) {
    append(index, address);
    address += static_cast<int64_t>(size) * static_cast<int64_t>(tokenBytes(type_));
  }
  index.append(reinterpret_cast<const char*>(docIdx_.data()), docIdx_.size() * sizeof(int64_t));
  const int fd = ::open((idx + ".tmp").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(idx + ".tmp: cannot create: " + std::strerror(errno));
  writeAll(fd, index.data(), index.size(), idx + ".tmp");
  ::fsync(fd);
  ::close(fd);
  if (::rename((bin + ".tmp").c_str(), bin.c_str()) != 0 ||
      ::rename((idx + ".tmp").c_str(), idx.c_str()) != 0)
    throw Error(prefix_ + ": cannot put the dataset in place: " + std::strerror(errno));
  finished_ = true;
}

IndexedDataset::IndexedDataset(const std::string& prefix) : binPath_(prefix + ".bin") {
  // The header first: its counts fix the index's size, which must be the file's exactly, so a
  // damaged or planted index (a huge sparse file, a link to a device) is refused unread.
  const RegularFile idx(prefix + ".idx", "indexed dataset index");
  const std::string& idxPath = idx.path();
  constexpr size_t kHeaderBytes = sizeof(kMagic) + 8 + 1 + 8 + 8;
  std::string header(static_cast<size_t>(std::min<uint64_t>(idx.size(), kHeaderBytes)), '\0');
  idx.readAt(0, header.size(), header.data());
  if (header.compare(0, sizeof(kMagic), std::string(kMagic, sizeof(kMagic))) != 0)
    throw Error(idxPath + ": not an mmap indexed dataset index (magic MMIDIDX)");
  size_t at = sizeof(kMagic);
  if (const auto version = take<uint64_t>(header, at, idxPath, "the version"); version != kVersion)
    throw Error(idxPath + ": index version " + std::to_string(version) + ", this build reads 1");
  const auto code = take<uint8_t>(header, at, idxPath, "the dtype");
  if (code != static_cast<uint8_t>(TokenType::UInt16) &&
      code != static_cast<uint8_t>(TokenType::Int32))
    throw Error(idxPath + ": token dtype code " + std::to_string(code) +
                " (only 8 = uint16 and 4 = int32 hold token ids)");
  type_ = static_cast<TokenType>(code);
  const auto count = take<uint64_t>(header, at, idxPath, "the sequence count");
  const auto docCount = take<uint64_t>(header, at, idxPath, "the document count");
  const uint64_t size = idx.size();
  if (count > size / 12 || docCount > size / 8 || at + count * 12 + docCount * 8 != size)
    throw Error(idxPath + ": " + std::to_string(count) + " sequences and " +
                std::to_string(docCount) + " document entries do not match its " +
                std::to_string(size) + " bytes (the index is damaged; preprocess the data again)");
  sizes_.resize(count);
  pointers_.resize(count);
  docIdx_.resize(docCount);
  idx.readAt(at, count * 4, sizes_.data());
  idx.readAt(at + count * 4, count * 8, pointers_.data());
  idx.readAt(at + count * 12, docCount * 8, docIdx_.data());
  if (docIdx_.empty() || docIdx_.front() != 0)
    throw Error(idxPath + ": the document index must start at 0");
  for (size_t d = 1; d < docIdx_.size(); ++d)
    if (docIdx_[d] < docIdx_[d - 1] || docIdx_[d] > static_cast<int64_t>(count))
      throw Error(idxPath + ": document index entry " + std::to_string(d) + " is out of order");

  const RegularFile bin(binPath_, "indexed dataset tokens");
  binBytes_ = static_cast<size_t>(bin.size());
  const size_t width = tokenBytes(type_);
  for (size_t i = 0; i < count; ++i)
    if (sizes_[i] < 0 || pointers_[i] < 0 || pointers_[i] % width != 0 ||
        static_cast<uint64_t>(pointers_[i]) + static_cast<uint64_t>(sizes_[i]) * width > binBytes_)
      throw Error(idxPath + ": sequence " + std::to_string(i) + " lies outside " + binPath_ + " (" +
                  std::to_string(binBytes_) + " bytes)");
  if (binBytes_ > 0) {
    void* map = ::mmap(nullptr, binBytes_, PROT_READ, MAP_SHARED, bin.fd(), 0);
    if (map == MAP_FAILED) throw Error(binPath_ + ": cannot map: " + std::strerror(errno));
    bin_ = static_cast<const unsigned char*>(map);
  }
}

IndexedDataset::~IndexedDataset() {
  if (bin_ != nullptr) ::munmap(const_cast<unsigned char*>(bin_), binBytes_);
}

std::vector<int32_t> IndexedDataset::read(size_t i, size_t offset, size_t count) const {
  const size_t length = sequenceLength(i);
  if (offset > length || count > length - offset)
    throw Error(binPath_ + ": tokens " + std::to_string(offset) + ".." +
                std::to_string(offset + count) + " of sequence " + std::to_string(i) + " (" +
                std::to_string(length) + " tokens)");
  std::vector<int32_t> out(count);
  const unsigned char* at = bin_ + pointers_[i] + offset * tokenBytes(type_);
  if (type_ == TokenType::UInt16) {
    for (size_t k = 0; k < count; ++k) {
      uint16_t v;
      std::memcpy(&v, at + 2 * k, 2);
      out[k] = v;
    }
  } else if (count > 0) {
    std::memcpy(out.data(), at, count * 4);
  }
  return out;
}

namespace {

// A sequence's min and max; the plain loop over fixed-width loads vectorises.
template <typename T>
std::pair<int32_t, int32_t> rangeOf(const unsigned char* at, size_t count) {
  T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::min();
  for (size_t k = 0; k < count; ++k) {
    T v;
    std::memcpy(&v, at + sizeof(T) * k, sizeof(T));
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  return {static_cast<int32_t>(lo), static_cast<int32_t>(hi)};
}

}  // namespace

TokenRange IndexedDataset::tokenRange() const {
  TokenRange r;
  for (size_t i = 0; i < sizes_.size(); ++i) {
    const size_t count = sequenceLength(i);
    if (count == 0) continue;
    const unsigned char* at = bin_ + pointers_[i];
    const auto [lo, hi] =
        type_ == TokenType::UInt16 ? rangeOf<uint16_t>(at, count) : rangeOf<int32_t>(at, count);
    if (r.empty || lo < r.min) r.min = lo;
    if (r.empty || hi > r.max) {
      r.max = hi;
      r.maxSequence = i;
    }
    r.empty = false;
  }
  return r;
}

}  // namespace ds::runtime
