// The byte-level tokenizer, the default of the built-in GPT job: needs no files. Text is its UTF-8
// bytes (ids 0..255); id 256 is the end-of-document token. Decoding drops ids above 255.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds::runtime {

class ByteTokenizer {
 public:
  static constexpr int32_t kEndOfDocument = 256;
  static constexpr int32_t kVocabularySize = 257;

  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const {
    std::string text;
    for (int32_t id : ids)
      if (id >= 0 && id < 256) text += static_cast<char>(id);
    return text;
  }
};

}  // namespace ds::runtime
