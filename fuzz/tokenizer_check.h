// What the tokenizer targets do with a tokenizer their file produced: encode a text with
// letters, digits, spaces, an end-of-document marker and invalid UTF-8, check the ids against
// the vocabulary, and decode them back, with ids the vocabulary lacks mixed in.
#pragma once

#include <climits>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "runtime/data/tokenizer.h"

namespace ds::fuzz {

inline void exerciseTokenizer(const runtime::Tokenizer& tokenizer) {
  constexpr std::string_view kText =
      "Hello, world!  It's 2024\t\n<|endoftext|> na\xc3\xafve caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac"
      " \xf0\x9f\x98\x80 x\xff\xfe\xc3 end ";
  const int32_t vocabulary = tokenizer.vocabularySize();
  DS_FUZZ_CHECK(vocabulary > 0);
  DS_FUZZ_CHECK(tokenizer.endOfDocument() >= 0 && tokenizer.endOfDocument() < vocabulary);
  std::vector<int32_t> ids = tokenizer.encode(kText);
  for (const int32_t id : ids) DS_FUZZ_CHECK(id >= 0 && id < vocabulary);
  (void)tokenizer.decode(ids);
  ids.insert(ids.end(), {-1, vocabulary, vocabulary - 1, 0, INT32_MAX, INT32_MIN});
  (void)tokenizer.decode(ids);
  (void)tokenizer.encode("");
}

}  // namespace ds::fuzz
