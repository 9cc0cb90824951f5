// GPT-2's pre-tokenizer: splits text into the words BPE then works on, exactly as Python's
// `regex` module splits it with GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// but written out by hand (no regex engine). Invalid UTF-8 bytes count as Other characters (see
// utf8.h), so the words always cover the text exactly, byte for byte.
#pragma once

#include <string_view>
#include <vector>

namespace ds::runtime {

// The words, in order, as views into `text`; concatenated they are `text`.
std::vector<std::string_view> splitGpt2Words(std::string_view text);

}  // namespace ds::runtime
