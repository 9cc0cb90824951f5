// Label datasets: the alignment check (reads only the .idx tables) and ds-config check's scan of
// every label id (reads the .bin once).
#include "runtime/data/label_dataset.h"

#include <filesystem>

#include "common/error.h"

namespace ds::runtime {

void checkLabelsAligned(const IndexedDataset& text, const std::string& textPrefix,
                        const IndexedDataset& labels, const std::string& labelPrefix,
                        const std::string& key) {
  const std::string both = key + ": label dataset " + labelPrefix + " does not line up with its " +
                           "text dataset " + textPrefix + ": ";
  const std::string fix =
      " (a label dataset holds one label per text token, document for document; make both from "
      "the same documents)";
  if (labels.documents() != text.documents())
    throw Error(both + std::to_string(labels.documents()) + " documents against " +
                std::to_string(text.documents()) + fix);
  if (labels.sequences() != text.sequences() || labels.documentIndex() != text.documentIndex())
    throw Error(both + std::to_string(labels.sequences()) + " sequences against " +
                std::to_string(text.sequences()) + fix);
  for (size_t s = 0; s < text.sequences(); ++s)
    if (labels.sequenceLength(s) != text.sequenceLength(s))
      throw Error(both + "sequence " + std::to_string(s) + " has " +
                  std::to_string(labels.sequenceLength(s)) + " labels against " +
                  std::to_string(text.sequenceLength(s)) + " tokens" + fix);
}

std::vector<std::string> checkLabelDatasets(const std::vector<std::string>& textPrefixes,
                                            const std::vector<std::string>& labelPrefixes,
                                            const std::string& key, int64_t vocabularySize) {
  std::vector<std::string> missing;
  for (size_t i = 0; i < labelPrefixes.size() && i < textPrefixes.size(); ++i) {
    bool here = true;
    for (const std::string& prefix : {textPrefixes[i], labelPrefixes[i]}) {
      std::error_code ec;
      if (!std::filesystem::exists(prefix + ".idx", ec)) {
        missing.push_back(prefix);
        here = false;
      }
    }
    if (!here) continue;
    const IndexedDataset text(textPrefixes[i]), labels(labelPrefixes[i]);
    checkLabelsAligned(text, textPrefixes[i], labels, labelPrefixes[i], key);
    const TokenRange r = labels.tokenRange();
    if (!r.empty && r.max >= vocabularySize)
      throw Error(key + ": " + labels.binPath() + ": label " + std::to_string(r.max) +
                  " (sequence " + std::to_string(r.maxSequence) +
                  ") does not fit the tokenizer's vocabulary of " + std::to_string(vocabularySize) +
                  " ids; a label is a token id 0 .. " + std::to_string(vocabularySize - 1) +
                  ", or negative (-100) to mask it");
  }
  return missing;
}

}  // namespace ds::runtime
