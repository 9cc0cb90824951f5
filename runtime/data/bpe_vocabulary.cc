// loadBpeVocabulary: vocab.json through nlohmann's parser (with a callback that catches repeated
// keys, which JSON parsers otherwise silently overwrite), merges.txt line by line.
#include "runtime/data/bpe_vocabulary.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "common/error.h"
#include "common/files.h"
#include "common/json_text.h"
#include "runtime/data/utf8.h"

namespace ds::runtime {

namespace {

using Json = nlohmann::json;

constexpr const char* kEndOfText = "<|endoftext|>";
// Ids index a table and size the model's embedding: a stray huge id must not allocate gigabytes.
constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;
constexpr int64_t kIdSlack = 1024;

// bytes_to_unicode: bytes that print as themselves in Latin-1 keep their code point; the other 68
// (controls, space, DEL, NBSP, soft hyphen), in byte order, become U+0100, U+0101, ...
struct ByteAlphabet {
  std::array<char32_t, 256> charOf{};
  std::array<int16_t, 0x100 + 68> byteOf{};  // -1: not a character of the alphabet

  ByteAlphabet() {
    byteOf.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printsAsItself =
          (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      charOf[b] = printsAsItself ? static_cast<char32_t>(b) : next++;
      byteOf[charOf[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table;
  return table;
}

// A token or line quoted for a message; bytes that are not UTF-8 show as U+FFFD.
std::string quote(std::string_view s) {
  return Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string hexCodePoint(char32_t c) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "U+%04X", static_cast<unsigned>(c));
  return buffer;
}

// The bytes a token written in GPT-2's alphabet stands for; nullopt and the reason when a
// character is not in the alphabet.
std::optional<std::string> toBytes(std::string_view token, std::string& whyNot) {
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    const Utf8Char c = decodeUtf8At(token, pos);
    if (!c.valid) {
      whyNot = "is not valid UTF-8";
      return std::nullopt;
    }
    const auto& byteOf = alphabet().byteOf;
    if (c.codePoint >= byteOf.size() || byteOf[c.codePoint] < 0) {
      whyNot = "has the character " + hexCodePoint(c.codePoint) +
               ", which is not in GPT-2's byte alphabet (is this a byte-level BPE file?)";
      return std::nullopt;
    }
    bytes += static_cast<char>(byteOf[c.codePoint]);
    pos += c.length;
  }
  return bytes;
}

// The other way: bytes written in GPT-2's alphabet, as the files spell the token.
std::string toAlphabet(std::string_view bytes) {
  std::string token;
  for (const char b : bytes) appendUtf8(token, alphabet().charOf[static_cast<unsigned char>(b)]);
  return token;
}

// Adds the tokens, checked; `where` names the list in messages ("FILE" or "FILE: model.vocab").
void addTokens(const std::vector<BpeTokenSpelling>& tokens, const std::string& where,
               size_t definedTokens, BpeVocabulary& v) {
  const int64_t limit = bpeIdLimit(definedTokens);
  for (const auto& [key, id] : tokens) {
    const std::string at = where + ": token " + quote(key);
    if (key.empty()) throw Error(where + ": the empty string is not a token; remove it");
    if (id < 0 || id > kMaxId)
      throw Error(at + ": id " + std::to_string(id) + " is outside 0.." + std::to_string(kMaxId));
    if (id >= limit)
      throw Error(at + ": id " + std::to_string(id) + " is far beyond the " +
                  std::to_string(definedTokens) + " tokens the file defines (ids are dense in " +
                  "real files, so they are taken below " + std::to_string(limit) +
                  "); correct the id");
    std::string whyNot;
    const auto bytes = toBytes(key, whyNot);
    if (!bytes) throw Error(at + " " + whyNot);
    const auto slot = static_cast<size_t>(id);
    if (slot >= v.bytesOf.size()) v.bytesOf.resize(slot + 1);
    if (!v.bytesOf[slot].empty())
      throw Error(at + ": id " + std::to_string(id) + " is also the id of " +
                  quote(toAlphabet(v.bytesOf[slot])) + "; each token needs its own id");
    v.bytesOf[slot] = *bytes;
    v.idOf.emplace(*bytes, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = v.idOf.find(std::string(1, static_cast<char>(b)));
    v.byteIds[b] = it == v.idOf.end() ? -1 : it->second;
  }
}

// Adds the merges in rank order, checked against the tokens; `mismatchFix` says what to do when
// a part or the result is not a token.
void addMerges(const std::vector<BpeMergeSpelling>& merges, const std::string& vocabWhere,
               const std::string& mismatchFix, BpeVocabulary& v) {
  std::vector<const std::string*> whereOfRank;
  for (const BpeMergeSpelling& m : merges) {
    const std::string where = m.where + ": ";
    int32_t ids[2];
    std::string parts[2];
    for (int side = 0; side < 2; ++side) {
      const std::string& token = side == 0 ? m.left : m.right;
      std::string whyNot;
      const auto bytes = toBytes(token, whyNot);
      if (!bytes) throw Error(where + quote(token) + " " + whyNot);
      const auto it = v.idOf.find(*bytes);
      if (it == v.idOf.end())
        throw Error(where + quote(token) + " is not a token of " + vocabWhere + "; " + mismatchFix);
      ids[side] = it->second;
      parts[side] = *bytes;
    }
    const auto merged = v.idOf.find(parts[0] + parts[1]);
    if (merged == v.idOf.end())
      throw Error(where + "merging " + quote(m.left) + " and " + quote(m.right) + " makes " +
                  quote(toAlphabet(parts[0] + parts[1])) + ", which is not a token of " +
                  vocabWhere + "; " + mismatchFix);
    const auto rank = static_cast<uint32_t>(whereOfRank.size());
    const auto [it, added] =
        v.merges.emplace(BpeVocabulary::pairKey(ids[0], ids[1]), BpeMerge{rank, merged->second});
    if (!added)
      throw Error(where + "the pair " + quote(m.left + " " + m.right) + " is already " +
                  *whereOfRank[it->second.rank] + "; each pair appears once");
    whereOfRank.push_back(&m.position);
  }
}

constexpr const char* kFilesMismatch = "vocab-file and merge-file must come from the same tokenizer";

void readVocabulary(const std::string& path, BpeVocabulary& v) {
  const std::string text = readWholeFile(path, "GPT-2 vocabulary (vocab-file)");
  const std::string fix = " (vocab-file must be GPT-2's vocab.json: {\"token\": id, ...})";
  Json tokens;
  try {
    // GPT-2's vocab.json is one flat object; a token given twice would have two ids.
    tokens = parseJsonText(text, path);
  } catch (const Error& e) {
    throw Error(e.what() + fix);
  }
  if (!tokens.is_object())
    throw Error(path + ": expected a JSON object of token -> id, got " +
                std::string(tokens.type_name()) + fix);
  std::vector<BpeTokenSpelling> spellings;
  spellings.reserve(tokens.size());
  for (const auto& [key, value] : tokens.items()) {
    if (!value.is_number_integer())
      throw Error(path + ": token " + quote(key) + ": the id must be an integer, got " +
                  value.dump() + fix);
    spellings.emplace_back(key, value.get<int64_t>());
  }
  addTokens(spellings, path, spellings.size(), v);
  for (int b = 0; b < 256; ++b) {
    if (v.byteIds[b] >= 0) continue;
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", b);
    throw Error(path + ": no token for the byte " + hex + " (" +
                quote(toAlphabet(std::string(1, static_cast<char>(b)))) +
                "); a byte-level vocabulary has one for each of the 256 bytes");
  }
  const auto eod = v.idOf.find(kEndOfText);
  if (eod == v.idOf.end())
    throw Error(path + ": no \"<|endoftext|>\" token, GPT-2's end of document; add it");
  v.endOfDocument = eod->second;
}

void readMerges(const std::string& path, const std::string& vocabPath, BpeVocabulary& v) {
  const std::string text = readWholeFile(path, "GPT-2 merges (merge-file)");
  std::vector<BpeMergeSpelling> merges;
  size_t lineNumber = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++lineNumber;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (lineNumber == 1 && line.starts_with("#version")) continue;
    const std::string where = path + ":" + std::to_string(lineNumber);
    merges.push_back(splitMergeLine(line, where, "on line " + std::to_string(lineNumber)));
  }
  addMerges(merges, vocabPath, kFilesMismatch, v);
}

}  // namespace

char32_t gpt2ByteToChar(uint8_t byte) { return alphabet().charOf[byte]; }

int64_t bpeIdLimit(size_t definedTokens) {
  return std::min(2 * static_cast<int64_t>(definedTokens) + kIdSlack, kMaxId + 1);
}

BpeMergeSpelling splitMergeLine(std::string_view line, const std::string& where,
                                const std::string& position) {
  const size_t space = line.find(' ');
  if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos)
    throw Error(where + ": expected two tokens separated by one space (like \"\xC4\xA0 t\"), got " +
                quote(line));
  return {std::string(line.substr(0, space)), std::string(line.substr(space + 1)), where, position};
}

BpeVocabulary buildBpeVocabulary(const std::vector<BpeTokenSpelling>& tokens,
                                 const std::string& tokensWhere,
                                 const std::vector<BpeMergeSpelling>& merges,
                                 const std::string& mismatchFix, size_t definedTokens) {
  BpeVocabulary v;
  addTokens(tokens, tokensWhere, definedTokens, v);
  addMerges(merges, tokensWhere, mismatchFix, v);
  return v;
}

BpeVocabulary loadBpeVocabulary(const std::string& vocabFile, const std::string& mergeFile) {
  BpeVocabulary v;
  readVocabulary(vocabFile, v);
  readMerges(mergeFile, vocabFile, v);
  return v;
}

}  // namespace ds::runtime
