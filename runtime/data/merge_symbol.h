// A symbol of a word while BPE merges it: both merge loops (GPT-2's, bpe_tokenizer.cc, and HF's,
// hf_tokenizer.cc) keep the word as a doubly linked list of these, merging a pair in place.
#pragma once

#include <cstdint>

namespace ds::runtime {

struct MergeSymbol {
  int32_t id;
  int prev, next;  // neighbours in the word, -1 at its ends
  bool alive;
};

}  // namespace ds::runtime
