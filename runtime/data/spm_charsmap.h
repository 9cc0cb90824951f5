// A SentencePiece model's normalization rules (normalizer_spec.precompiled_charsmap, and
// denormalizer_spec's), checked before the model reaches libsentencepiece: the library walks the
// charsmap's trie with no bounds checks, so a damaged one loads fine and crashes the first encode.
// Only the protobuf fields on the way to the two charsmaps are read; the rest is the library's.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ds::runtime {

// libsentencepiece's normalizer keeps this many matches of one lookup (kMaxTrieResultsSize) and
// reads as many as the trie reports: a path through more rules reads past its array.
constexpr int kSpmMaxRulesPerLookup = 32;

// What is wrong with a charsmap (sentencepiece's format: a little-endian uint32 trie size in
// bytes, a darts-clone double array of that many bytes, then the NUL-separated replacement
// strings the trie's values point into), as "FIELD: WHY", or nullopt when every lookup stays
// inside it. Bytes that are not a protobuf message are passed (nullopt): the library refuses them.
std::optional<std::string> checkSpmCharsmaps(std::string_view model);

}  // namespace ds::runtime
