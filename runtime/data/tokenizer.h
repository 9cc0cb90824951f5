// What the GPT job and ds-preprocess need from a tokenizer, and the one place that turns NeoX's
// `tokenizer-type` (with `vocab-file`, `merge-file`) into one. Implementations: ByteTokenizer
// (byte_tokenizer.h), BpeTokenizer (bpe_tokenizer.h), HfTokenizer (hf_tokenizer.h) and
// SentencePiece's (spm_tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ds::runtime {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Any bytes in; invalid UTF-8 is not an error (what each tokenizer does with it: its header).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids outside the vocabulary (e.g. the model's padding rows) are dropped.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int32_t endOfDocument() const = 0;
  // One past the largest id: the rows the model's embedding needs.
  virtual int32_t vocabularySize() const = 0;
  // Bytes encode has left out so far because the vocabulary has no token for them (HFTokenizer,
  // as Hugging Face's library; the others have a token or a fallback for every byte).
  virtual uint64_t droppedBytes() const { return 0; }
};

enum class TokenizerType { Byte, Gpt2Bpe, Hf, SentencePiece };

// NeoX's spellings: "GPT2BPETokenizer" (NeoX's default, and ours), "HFTokenizer",
// "SPMTokenizer"; the byte tokenizer is "ByteTokenizer" (or "byte").
// Throws ds::Error naming the accepted ones.
TokenizerType parseTokenizerType(const std::string& name);
const char* tokenizerTypeName(TokenizerType type);

// GPT2BPETokenizer needs both files; HFTokenizer (its tokenizer.json) and SPMTokenizer (its
// .model) need vocab-file and, as NeoX, ignore merge-file (NeoX's local_setup.yml sets GPT-2's
// for every config); ByteTokenizer takes none (a file given to it is refused, as it is most
// likely a forgotten tokenizer-type). Throws ds::Error naming the file and the fix.
std::unique_ptr<Tokenizer> makeTokenizer(const std::string& type, const std::string& vocabFile,
                                         const std::string& mergeFile);

}  // namespace ds::runtime
