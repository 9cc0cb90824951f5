// GPT-2's two BPE files, read and checked once: vocab.json ({"token": id}) and merges.txt (an
// optional "#version" line, then "left right" pairs, most important first). GPT-2 writes every
// byte as one printable character (its bytes_to_unicode table); that is undone here, so tokens
// are held as the raw bytes they stand for and BPE works on bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ds::runtime {

struct BpeMerge {
  uint32_t rank;   // the pair's line among the merges, from 0: lower merges first
  int32_t merged;  // the id of left + right
};

struct BpeVocabulary {
  std::unordered_map<std::string, int32_t> idOf;  // token bytes -> id
  std::vector<std::string> bytesOf;               // id -> token bytes; "" for an id no token has
  std::array<int32_t, 256> byteIds{};             // the single-byte tokens: every byte has one
  std::unordered_map<uint64_t, BpeMerge> merges;  // key: left id << 32 | right id
  int32_t endOfDocument = -1;                     // "<|endoftext|>"

  static uint64_t pairKey(int32_t left, int32_t right) {
    return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
  }
};

// Throws ds::Error naming the file, the line (merges) or token (vocabulary), and the fix, for
// anything GPT-2's encoder would trip over later: bad JSON, non-integer or repeated ids, repeated
// tokens, a character outside GPT-2's byte alphabet, a byte without a token, no <|endoftext|>,
// a merge line that is not two tokens, a merge part or result missing from the vocabulary.
BpeVocabulary loadBpeVocabulary(const std::string& vocabFile, const std::string& mergeFile);

// GPT-2's bytes_to_unicode: the printable character that stands for `byte` in both files.
char32_t gpt2ByteToChar(uint8_t byte);

}  // namespace ds::runtime
