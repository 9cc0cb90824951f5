// checkTokensFitVocabulary: one token-range scan per dataset prefix, each prefix once.
#include "runtime/data/vocabulary_fit.h"

#include <filesystem>
#include <set>

#include "common/error.h"
#include "runtime/data/indexed_dataset.h"

namespace ds::runtime {

std::vector<std::string> checkTokensFitVocabulary(const std::vector<std::string>& prefixes,
                                                  int64_t vocabularySize) {
  std::set<std::string> seen;
  std::vector<std::string> missing;
  for (const std::string& prefix : prefixes) {
    if (!seen.insert(prefix).second) continue;
    std::error_code ec;
    if (!std::filesystem::exists(prefix + ".idx", ec)) {
      missing.push_back(prefix);
      continue;
    }
    const IndexedDataset data(prefix);
    const TokenRange r = data.tokenRange();
    if (r.empty) continue;
    const std::string fix =
        "; preprocess the data with this job's tokenizer, or set tokenizer-type (and vocab-file) "
        "to the one that made it";
    if (r.min < 0)
      throw Error(data.binPath() + ": token id " + std::to_string(r.min) +
                  " is negative; token ids are 0 .. " + std::to_string(vocabularySize - 1) + fix);
    if (r.max >= vocabularySize)
      throw Error(data.binPath() + ": token id " + std::to_string(r.max) + " (sequence " +
                  std::to_string(r.maxSequence) + ") does not fit the tokenizer's vocabulary of " +
                  std::to_string(vocabularySize) + " ids (0 .. " +
                  std::to_string(vocabularySize - 1) + ")" + fix);
  }
  return missing;
}

}  // namespace ds::runtime
