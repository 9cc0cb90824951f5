// A Hugging Face tokenizer.json (NeoX's `tokenizer-type: HFTokenizer`, `vocab-file` naming it),
// read and checked: what pythia's and NeoX-20B's files use is taken in, anything else that would
// change the ids is refused with a message naming the file and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/bpe_vocabulary.h"

namespace ds::runtime {

struct HfAddedToken {
  int32_t id;
  std::string content;
  bool special;     // decode leaves it out (NeoX decodes with skip_special_tokens)
  bool normalized;  // matched in the normalized text; otherwise in the raw text
};

struct HfTokenizerFile {
  BpeVocabulary model;  // model.vocab and model.merges; bytes may lack a token (then dropped)
  std::vector<HfAddedToken> addedTokens;
  bool nfc = false;             // normalizer: {"type": "NFC"} (else null)
  bool addPrefixSpace = false;  // pre_tokenizer ByteLevel's add_prefix_space
  bool useRegex = true;         // ... and use_regex: split with GPT-2's pattern
  int32_t endOfDocument = -1;   // "<|endoftext|>", an added token or one of the model's
  int32_t vocabularySize = 0;   // one past the largest id, added tokens included
};

// Taken: model BPE (vocab, merges as "a b" strings or [a, b] pairs; no dropout, no word prefix or
// suffix, ignore_merges false; unk_token and byte_fallback only where every byte has a token, so
// they never apply), normalizer NFC or null, pre_tokenizer ByteLevel, post_processor ByteLevel or
// null (it only trims offsets), decoder ByteLevel, added_tokens without single_word / lstrip /
// rstrip, truncation and padding null. Throws ds::Error "FILE: FIELD: ..." otherwise, and when
// no "<|endoftext|>" token exists (NeoX's end of document).
HfTokenizerFile readHfTokenizerFile(const std::string& path);

}  // namespace ds::runtime
