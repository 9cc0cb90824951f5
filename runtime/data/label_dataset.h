// NeoX's label datasets (train-/valid-/test-label-data-paths): an indexed dataset beside each text
// dataset holding one label per text token, read at the text's own positions; a sample's targets
// are its labels shifted by one, and a negative label (NeoX writes -100) masks that position out
// of the loss. This file checks that a label dataset lines up with its text dataset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/indexed_dataset.h"

namespace ds::runtime {

// Throws ds::Error naming `key` and both prefixes unless `labels` has the same documents, the same
// sequences and each sequence the same token count as `text` (NeoX reads both at the same offsets
// and would silently pair the wrong labels with the text otherwise).
void checkLabelsAligned(const IndexedDataset& text, const std::string& textPrefix,
                        const IndexedDataset& labels, const std::string& labelPrefix,
                        const std::string& key);

// ds-config check's scan of one split: each label dataset against its text dataset (as above)
// and its every label id below vocabularySize or negative (masked). Pairs whose files are not
// here are skipped and their prefixes returned, as checkTokensFitVocabulary does.
std::vector<std::string> checkLabelDatasets(const std::vector<std::string>& textPrefixes,
                                            const std::vector<std::string>& labelPrefixes,
                                            const std::string& key, int64_t vocabularySize);

}  // namespace ds::runtime
