// GPT-2's two BPE files, read and checked once: vocab.json ({"token": id}) and merges.txt (an
// optional "#version" line, then "left right" pairs, most important first). GPT-2 writes every
// byte as one printable character (its bytes_to_unicode table); that is undone here, so tokens
// are held as the raw bytes they stand for and BPE works on bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ds::runtime {

struct BpeMerge {
  uint32_t rank;   // the pair's line among the merges, from 0: lower merges first
  int32_t merged;  // the id of left + right
};

struct BpeVocabulary {
  std::unordered_map<std::string, int32_t> idOf;  // token bytes -> id
  std::vector<std::string> bytesOf;               // id -> token bytes; "" for an id no token has
  std::array<int32_t, 256> byteIds{};             // the single-byte tokens; -1: that byte has none
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

// One past the largest id a file that defines `definedTokens` tokens may use. Ids are dense in
// real files (GPT-2's vocab.json, pythia's and LLaMA 3's tokenizer.json run from 0 without a
// hole), and the largest one sizes the id table and the model's embedding, so a stray id must not
// make a small file allocate gigabytes: ids are taken below 2 x definedTokens + 1024 (room for
// holes and reserved ids), and never past 2^24 - 1.
int64_t bpeIdLimit(size_t definedTokens);

// A vocabulary read from elsewhere (a tokenizer.json's model), with the same checks on each token
// and merge, except that a byte may lack a token (byteIds -1: the caller decides what that means)
// and no <|endoftext|> is required. Tokens are spelled in GPT-2's byte alphabet; each merge says
// where it came from ("FILE: model.merges[3]") for messages; `tokensWhere` names the token list,
// `mismatchFix` says what to do about a merge whose part or result is not a token;
// `definedTokens` counts these tokens and any others of the file that take ids (bpeIdLimit).
using BpeTokenSpelling = std::pair<std::string, int64_t>;
struct BpeMergeSpelling {
  std::string left, right;
  std::string where;     // message prefix: "merges.txt:4", "tokenizer.json: model.merges[2]"
  std::string position;  // how a repeat refers to it: "on line 4", "at model.merges[2]"
};
BpeVocabulary buildBpeVocabulary(const std::vector<BpeTokenSpelling>& tokens,
                                 const std::string& tokensWhere,
                                 const std::vector<BpeMergeSpelling>& merges,
                                 const std::string& mismatchFix, size_t definedTokens);

// "left right" (one space, as merges.txt and older tokenizer.json files write a merge); throws
// ds::Error naming `where` otherwise.
BpeMergeSpelling splitMergeLine(std::string_view line, const std::string& where,
                                const std::string& position);

// GPT-2's bytes_to_unicode: the printable character that stands for `byte` in both files.
char32_t gpt2ByteToChar(uint8_t byte);

}  // namespace ds::runtime
