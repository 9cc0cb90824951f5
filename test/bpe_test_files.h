// A small GPT-2 vocabulary written by hand, for tests that need BPE files but not Python: the 256
// byte tokens (ids permuted, so no id equals its byte), a few merges and <|endoftext|>. GPT-2's
// byte alphabet is spelled out here again, independently of runtime/data/bpe_vocabulary.cc.
#pragma once

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace ds::test {

// The character GPT-2's files write for `byte`, as UTF-8.
inline std::string gpt2Char(unsigned char byte) {
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const unsigned cp = printable ? static_cast<unsigned>(b) : 0x100u + extra++;
    if (b != byte) continue;
    if (cp < 0x80) return std::string(1, static_cast<char>(cp));
    return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
  }
  return {};
}

// `bytes` spelled in GPT-2's alphabet.
inline std::string gpt2Spelling(const std::string& bytes) {
  std::string out;
  for (const char b : bytes) out += gpt2Char(static_cast<unsigned char>(b));
  return out;
}

struct SmallBpe {
  std::string vocabFile, mergeFile;
  std::map<std::string, int> ids;  // token bytes -> id
};

// Writes DIR/vocab.json and DIR/merges.txt. "ab a" ranks before "a b" on purpose: GPT-2 still
// merges every "a b" of a word before it looks at "ab a" again ("abab" -> "ab" "ab").
inline SmallBpe writeSmallBpe(const std::string& dir) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {" ", "t"}, {"h", "e"},       {" t", "he"}, {"ab", "a"},
      {"a", "b"}, {"\xC3", "\xA9"}, {"\n", "\n"}};
  SmallBpe s{dir + "/vocab.json", dir + "/merges.txt", {}};
  for (int b = 0; b < 256; ++b) s.ids[std::string(1, static_cast<char>(b))] = (b * 37 + 11) % 256;
  int next = 256;
  for (const auto& [a, b] : merges) s.ids[a + b] = next++;
  s.ids["<|endoftext|>"] = next;
  std::ofstream vocab(s.vocabFile, std::ios::binary);
  vocab << "{";
  const char* separator = "";
  for (const auto& [bytes, id] : s.ids) {
    // Raw UTF-8, as GPT-2's own file has, with '"' and '\\' escaped.
    std::string key = gpt2Spelling(bytes);
    if (key == "\"" || key == "\\") key = "\\" + key;
    vocab << separator << "\"" << key << "\": " << id;
    separator = ", ";
  }
  vocab << "}\n";
  std::ofstream merge(s.mergeFile, std::ios::binary);
  merge << "#version: 0.2\n";
  for (const auto& [a, b] : merges) merge << gpt2Spelling(a) << " " << gpt2Spelling(b) << "\n";
  return s;
}

}  // namespace ds::test
