// BpeTokenizer: the merge loop. GPT-2's loop rescans the word for its best pair after every
// merge (quadratic in the word's length; a long run of one character class is one word). This
// one keeps the pairs in a heap and does the same merges in O(n log n).
#include "runtime/data/bpe_tokenizer.h"

#include <functional>
#include <queue>

#include "runtime/data/gpt2_pretokenizer.h"
#include "runtime/data/merge_symbol.h"

namespace ds::runtime {

namespace {

using Symbol = MergeSymbol;

// A pair that can be merged, seen when its two symbols became neighbours. It is stale when
// either symbol has been merged since: merging only makes a symbol longer, so equal ids mean
// the very same two symbols are still there.
struct Candidate {
  uint32_t rank;
  int left;
  int32_t leftId, rightId;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

BpeTokenizer::BpeTokenizer(const std::string& vocabFile, const std::string& mergeFile)
    : vocab_(loadBpeVocabulary(vocabFile, mergeFile)) {}

std::vector<int32_t> BpeTokenizer::mergeWord(std::string_view word) const {
  std::vector<Symbol> symbols(word.size());
  for (size_t i = 0; i < word.size(); ++i)
    symbols[i] = {vocab_.byteIds[static_cast<unsigned char>(word[i])], static_cast<int>(i) - 1,
                  i + 1 < word.size() ? static_cast<int>(i) + 1 : -1, true};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto consider = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const int32_t a = symbols[left].id, b = symbols[symbols[left].next].id;
    const auto it = vocab_.merges.find(BpeVocabulary::pairKey(a, b));
    if (it != vocab_.merges.end()) heap.push({it->second.rank, left, a, b});
  };
  for (size_t i = 0; i + 1 < word.size(); ++i) consider(static_cast<int>(i));

  std::vector<Candidate> batch;
  while (!heap.empty()) {
    // GPT-2 merges every occurrence of the best pair, left to right, before it looks for the
    // next best: a pair made by these merges waits even when its rank is lower. (It cannot
    // have this rank: a merged symbol is longer than either part, so the pair is another one.)
    const uint32_t rank = heap.top().rank;
    batch.clear();
    while (!heap.empty() && heap.top().rank == rank) batch.push_back(heap.top()), heap.pop();
    for (const Candidate& c : batch) {
      Symbol& left = symbols[c.left];
      if (!left.alive || left.id != c.leftId || left.next < 0) continue;
      Symbol& right = symbols[left.next];
      if (right.id != c.rightId) continue;
      left.id = vocab_.merges.at(BpeVocabulary::pairKey(c.leftId, c.rightId)).merged;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = c.left;
      consider(left.prev);
      consider(c.left);
    }
  }
  std::vector<int32_t> ids;
  for (int i = word.empty() ? -1 : 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
  return ids;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  const auto merge = [this](std::string_view word) { return mergeWord(word); };
  for (const std::string_view word : splitGpt2Words(text)) cache_.append(word, ids, merge);
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (const int32_t id : ids)
    if (id >= 0 && static_cast<size_t>(id) < vocab_.bytesOf.size())
      text += vocab_.bytesOf[static_cast<size_t>(id)];
  return text;
}

}  // namespace ds::runtime
