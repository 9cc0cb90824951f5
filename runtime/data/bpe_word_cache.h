// The word -> ids cache both BPE tokenizers (GPT-2's files, tokenizer.json) put in front of their
// merge loop: words repeat (Zipf), so merging each distinct word once is most of encode's speed.
// Bounded in count and word length (a corpus has unboundedly many distinct words, and long ones
// rarely repeat), so it stays within a few tens of MB. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ds::runtime {

class BpeWordCache {
 public:
  static constexpr size_t kMaxWords = size_t{1} << 17;
  static constexpr size_t kMaxWordBytes = 64;

  // Appends the ids of `word` to `ids`: from the cache, or from merge(word) (then remembered).
  template <class Merge>
  void append(std::string_view word, std::vector<int32_t>& ids, const Merge& merge) {
    if (word.size() > kMaxWordBytes) {
      const std::vector<int32_t> pieces = merge(word);
      ids.insert(ids.end(), pieces.begin(), pieces.end());
      return;
    }
    std::string key(word);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = words_.find(key);
      if (it != words_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> pieces = merge(word);
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    std::lock_guard<std::mutex> lock(mutex_);
    if (words_.size() >= kMaxWords) words_.clear();
    words_.emplace(std::move(key), std::move(pieces));
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::vector<int32_t>> words_;
};

}  // namespace ds::runtime
