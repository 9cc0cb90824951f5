// NeoX's HFTokenizer: a Hugging Face tokenizer.json (hf_tokenizer_file.h says which ones), encoded
// as HF's `tokenizers` library encodes it, id for id (test/test_hf_tokenizer.cc compares with the
// library's own output): added tokens are cut out of the raw text first (leftmost, longest),
// the pieces between them NFC-normalized and searched for the normalized added tokens, then split
// by the ByteLevel pre-tokenizer (GPT-2's pattern) and merged by HF's BPE rule (lowest rank
// first, one merge at a time, leftmost among equals). A byte the vocabulary has no token for is
// dropped, as HF drops it, and counted (droppedBytes).
//
// Invalid UTF-8: HF takes only Unicode strings, so text is first read the way bytes become a
// string in Python (errors="replace") or Node: each maximal invalid subpart becomes U+FFFD.
// Encode never fails. decode is HF's decode with skip_special_tokens (as NeoX calls it): special
// tokens left out, other added tokens written as they are, the bytes of the model's tokens in
// between read with U+FFFD for what is not UTF-8; so decode(encode(x)) is NFC(x) for valid text
// without special tokens whose characters all have tokens.
#pragma once

#include <atomic>
#include <string>
#include <unordered_map>

#include "runtime/data/bpe_word_cache.h"
#include "runtime/data/hf_tokenizer_file.h"
#include "runtime/data/tokenizer.h"

namespace ds::runtime {

class HfTokenizer : public Tokenizer {
 public:
  // Throws ds::Error naming the file and the field (readHfTokenizerFile).
  explicit HfTokenizer(const std::string& tokenizerJson);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int32_t endOfDocument() const override { return file_.endOfDocument; }
  int32_t vocabularySize() const override { return file_.vocabularySize; }
  uint64_t droppedBytes() const override { return droppedBytes_.load(std::memory_order_relaxed); }

  // The added tokens matched in one text (raw or normalized): text and id by first byte, the
  // longest first.
  struct AddedTokenIndex {
    std::unordered_map<unsigned char, std::vector<std::pair<std::string, int32_t>>> byFirstByte;
  };

 private:
  void encodeNormalized(std::string_view piece, std::vector<int32_t>& ids) const;
  void encodeWords(std::string_view piece, std::vector<int32_t>& ids) const;
  std::vector<int32_t> mergeWord(std::string_view word) const;

  HfTokenizerFile file_;
  AddedTokenIndex rawAdded_, normalizedAdded_;
  std::unordered_map<int32_t, const HfAddedToken*> addedById_;
  bool everyByteHasToken_ = true;
  mutable std::atomic<uint64_t> droppedBytes_{0};
  mutable BpeWordCache cache_;
};

}  // namespace ds::runtime
