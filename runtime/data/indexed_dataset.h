// Indexed token datasets in the Megatron / GPT-NeoX "mmap" layout, so that files made by NeoX's
// preprocess_data.py and by ds-preprocess are interchangeable:
//   PREFIX.bin  the tokens of every sequence, back to back, in the dataset's dtype
//   PREFIX.idx  "MMIDIDX\0\0", u64 version 1, u8 dtype code, u64 sequence count N,
//               u64 document-index count D, i32 sizes[N], i64 byte pointers[N], i64 doc_idx[D]
// (little-endian; doc_idx starts at 0 and lists, per document, where its sequences end).
// Files are read as untrusted input: every count, size and pointer is checked against the files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime {

// NeoX's dtype codes; tokens are stored as uint16 when the vocabulary fits, else int32.
enum class TokenType : uint8_t { UInt16 = 8, Int32 = 4 };

// Appends documents (each one or more sequences) and writes PREFIX.bin / PREFIX.idx when
// finished; both appear only complete (written to temporary names, then renamed).
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(std::string prefix, TokenType type);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  void addSequence(const std::vector<int32_t>& tokens);  // throws if a token does not fit
  void endDocument();
  void finish();  // throws ds::Error naming the file on an I/O error
  uint64_t tokens() const { return tokens_; }

 private:
  std::string prefix_;
  TokenType type_;
  int fd_ = -1;  // PREFIX.bin.tmp
  std::vector<int32_t> sizes_;
  std::vector<int64_t> docIdx_{0};
  uint64_t tokens_ = 0;
  bool finished_ = false;
};

// The smallest and largest token id of a dataset's sequences, and a sequence holding the largest.
struct TokenRange {
  int32_t min = 0, max = 0;
  size_t maxSequence = 0;
  bool empty = true;  // no tokens at all
};

// A memory-mapped dataset; tokens are read as int32 whatever the stored type.
class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);  // throws ds::Error naming the file
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  TokenType type() const { return type_; }
  size_t sequences() const { return sizes_.size(); }
  size_t documents() const { return docIdx_.size() - 1; }
  const std::vector<int64_t>& documentIndex() const { return docIdx_; }
  size_t sequenceLength(size_t i) const { return static_cast<size_t>(sizes_.at(i)); }
  // Tokens [offset, offset + count) of sequence i.
  std::vector<int32_t> read(size_t i, size_t offset, size_t count) const;
  std::vector<int32_t> read(size_t i) const { return read(i, 0, sequenceLength(i)); }
  // Reads every token once: one pass over the mapped .bin at memory (or disk) bandwidth, which
  // is why only `ds-config check` calls it, never a training rank.
  TokenRange tokenRange() const;
  const std::string& binPath() const { return binPath_; }

 private:
  TokenType type_;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> pointers_, docIdx_;
  std::string binPath_;
  const unsigned char* bin_ = nullptr;
  size_t binBytes_ = 0;
};

}  // namespace ds::runtime
