// HfTokenizer: the added-token split, the normalizer, the pre-tokenizer and HF's merge loop. The
// merge order differs from GPT-2's (bpe_tokenizer.cc) only on files whose merges are not in the
// order training makes them, but there it does, so this keeps HF's.
#include "runtime/data/hf_tokenizer.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "runtime/data/gpt2_pretokenizer.h"
#include "runtime/data/merge_symbol.h"
#include "runtime/data/unicode_normalization.h"
#include "runtime/data/utf8.h"

namespace ds::runtime {

namespace {

using Symbol = MergeSymbol;

// HF's queue entry: a pair seen at `left`, still valid while the pair there merges into `merged`
// (HF checks exactly that, not that the two symbols are unchanged).
struct Candidate {
  uint32_t rank;
  int left;
  int32_t merged;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

// Cuts `text` at the added tokens of `index`, leftmost first and the longest where several start
// at one place (HF's Aho-Corasick, leftmost-longest): pieces go to onPiece, token ids to `ids`,
// in order. Empty pieces are not passed on (HF drops them).
void splitAtAddedTokens(std::string_view text, const HfTokenizer::AddedTokenIndex& index,
                        std::vector<int32_t>& ids,
                        const std::function<void(std::string_view)>& onPiece) {
  size_t pieceStart = 0;
  for (size_t pos = 0; pos < text.size();) {
    const auto candidates = index.byFirstByte.find(static_cast<unsigned char>(text[pos]));
    const std::pair<std::string, int32_t>* match = nullptr;
    if (candidates != index.byFirstByte.end())
      for (const auto& candidate : candidates->second)
        if (text.substr(pos).starts_with(candidate.first)) {
          match = &candidate;
          break;
        }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    if (pos > pieceStart) onPiece(text.substr(pieceStart, pos - pieceStart));
    ids.push_back(match->second);
    pos += match->first.size();
    pieceStart = pos;
  }
  if (pieceStart < text.size()) onPiece(text.substr(pieceStart));
}

void addToIndex(HfTokenizer::AddedTokenIndex& index, std::string text, int32_t id) {
  index.byFirstByte[static_cast<unsigned char>(text[0])].emplace_back(std::move(text), id);
}

// Once, after every token is in: sorting at each insert made loading quadratic (50,000 added
// tokens took minutes).
void sortIndex(HfTokenizer::AddedTokenIndex& index) {
  // Longest first; among equal texts the first given wins (HF keeps the first).
  for (auto& [byte, list] : index.byFirstByte)
    std::stable_sort(list.begin(), list.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

// Rust's String::from_utf8_lossy, which HF's ByteLevel decoder ends with.
std::string lossy(const std::string& bytes) {
  return checkUtf8(bytes).invalidBytes == 0 ? bytes : replaceInvalidUtf8(bytes);
}

}  // namespace

HfTokenizer::HfTokenizer(const std::string& tokenizerJson)
    : file_(readHfTokenizerFile(tokenizerJson)) {
  for (const HfAddedToken& t : file_.addedTokens) {
    addedById_.emplace(t.id, &t);
    // HF matches a normalized token by its normalized form.
    if (t.normalized)
      addToIndex(normalizedAdded_, file_.nfc ? normalizeNfc(t.content) : t.content, t.id);
    else
      addToIndex(rawAdded_, t.content, t.id);
  }
  sortIndex(normalizedAdded_);
  sortIndex(rawAdded_);
  for (int b = 0; b < 256; ++b) everyByteHasToken_ &= file_.model.byteIds[b] >= 0;
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  std::string replaced;
  if (checkUtf8(text).invalidBytes != 0) {
    replaced = replaceInvalidUtf8(text);
    text = replaced;
  }
  splitAtAddedTokens(text, rawAdded_, ids, [&](std::string_view piece) {
    if (!file_.nfc) return encodeNormalized(piece, ids);
    const std::string normalized = normalizeNfc(piece);
    encodeNormalized(normalized, ids);
  });
  return ids;
}

void HfTokenizer::encodeNormalized(std::string_view piece, std::vector<int32_t>& ids) const {
  splitAtAddedTokens(piece, normalizedAdded_, ids,
                     [&](std::string_view rest) { encodeWords(rest, ids); });
}

void HfTokenizer::encodeWords(std::string_view piece, std::vector<int32_t>& ids) const {
  // ByteLevel's add_prefix_space: each piece between added tokens gets its own space.
  std::string prefixed;
  if (file_.addPrefixSpace && piece.front() != ' ') {
    prefixed = " " + std::string(piece);
    piece = prefixed;
  }
  // Counted here, not in mergeWord: a word the cache holds is not merged again.
  if (!everyByteHasToken_) {
    uint64_t dropped = 0;
    for (const char byte : piece)
      dropped += file_.model.byteIds[static_cast<unsigned char>(byte)] < 0;
    droppedBytes_.fetch_add(dropped, std::memory_order_relaxed);
  }
  const auto merge = [this](std::string_view word) { return mergeWord(word); };
  if (!file_.useRegex) return cache_.append(piece, ids, merge);
  for (const std::string_view word : splitGpt2Words(piece)) cache_.append(word, ids, merge);
}

std::vector<int32_t> HfTokenizer::mergeWord(std::string_view word) const {
  const BpeVocabulary& v = file_.model;
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (const char byte : word) {
    const int32_t id = v.byteIds[static_cast<unsigned char>(byte)];
    if (id < 0) continue;  // no token for this byte: HF leaves it out of the word
    const int i = static_cast<int>(symbols.size());
    if (i > 0) symbols.back().next = i;
    symbols.push_back({id, i - 1, -1, true});
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto consider = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const auto it = v.merges.find(
        BpeVocabulary::pairKey(symbols[left].id, symbols[symbols[left].next].id));
    if (it != v.merges.end()) heap.push({it->second.rank, left, it->second.merged});
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) consider(static_cast<int>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const auto it = v.merges.find(BpeVocabulary::pairKey(left.id, right.id));
    if (it == v.merges.end() || it->second.merged != c.merged) continue;
    left.id = c.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
  std::vector<int32_t> ids;
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text, chunk;
  for (const int32_t id : ids) {
    const auto added = addedById_.find(id);
    if (added != addedById_.end()) {
      if (added->second->special) continue;
      text += lossy(chunk);
      chunk.clear();
      text += added->second->content;
    } else if (id >= 0 && static_cast<size_t>(id) < file_.model.bytesOf.size()) {
      chunk += file_.model.bytesOf[static_cast<size_t>(id)];
    }
  }
  return text + lossy(chunk);
}

}  // namespace ds::runtime
