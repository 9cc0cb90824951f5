// Whether a job's datasets fit its tokenizer: every token id in 0 .. vocabulary size - 1. A run
// finds a bad id only when a batch reaches it; `ds-config check` scans every file up front.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime {

// Throws ds::Error naming the first dataset (its .bin), the id out of range and the vocabulary
// size. Reads every token of every dataset (see IndexedDataset::tokenRange). Returns the prefixes
// with no PREFIX.idx here, unchecked: a config may be checked away from its data (a login node,
// or before ds-preprocess made it), and the run refuses a missing dataset by name anyway.
std::vector<std::string> checkTokensFitVocabulary(const std::vector<std::string>& prefixes,
                                                  int64_t vocabularySize);

}  // namespace ds::runtime
