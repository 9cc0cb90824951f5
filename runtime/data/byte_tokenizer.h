// The byte-level tokenizer, the default of the built-in GPT job: needs no files. Text is its bytes
// (ids 0..255), whether valid UTF-8 or not; id 256 is the end-of-document token. Decoding drops
// ids above 255, the end-of-document token included.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/data/tokenizer.h"

namespace ds::runtime {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kEndOfDocument = 256;
  static constexpr int32_t kVocabularySize = 257;

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    for (int32_t id : ids)
      if (id >= 0 && id < 256) text += static_cast<char>(id);
    return text;
  }
  int32_t endOfDocument() const override { return kEndOfDocument; }
  int32_t vocabularySize() const override { return kVocabularySize; }
};

}  // namespace ds::runtime
