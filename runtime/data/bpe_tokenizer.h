// GPT-2's byte-level BPE tokenizer (NeoX's GPT2BPETokenizer) from vocab.json and merges.txt:
// pre-tokenize with GPT-2's pattern (gpt2_pretokenizer.h), then merge each word's bytes by
// merge rank, as GPT-2's encoder.py does, and look the pieces up. Ids equal those of GPT-2's
// Python encoder on any UTF-8 text (test/reference/bpe_reference.py checks this).
//
// Invalid UTF-8: Python would refuse to read such text; here each invalid byte is kept, read as
// Python's "surrogateescape" reads it: a character of its own in the pattern's "other" class
// (like punctuation), encoded as that byte. So encode never fails and decode(encode(x)) == x for
// any bytes x. Decoding writes every token's bytes (<|endoftext|> too, as GPT-2 does) and drops
// ids no token has.
#pragma once

#include <string>

#include "runtime/data/bpe_vocabulary.h"
#include "runtime/data/bpe_word_cache.h"
#include "runtime/data/tokenizer.h"

namespace ds::runtime {

class BpeTokenizer : public Tokenizer {
 public:
  // Throws ds::Error naming the file and the fix (bpe_vocabulary.h lists what is checked).
  BpeTokenizer(const std::string& vocabFile, const std::string& mergeFile);

  // Thread-safe (the word cache locks itself).
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int32_t endOfDocument() const override { return vocab_.endOfDocument; }
  int32_t vocabularySize() const override { return static_cast<int32_t>(vocab_.bytesOf.size()); }

 private:
  std::vector<int32_t> mergeWord(std::string_view word) const;

  BpeVocabulary vocab_;
  mutable BpeWordCache cache_;
};

}  // namespace ds::runtime
