// A small byte-level corpus for GPT jobs in tests: documents of one repeated sentence, written as
// NeoX's indexed dataset (uint16 tokens, 256 as end of document) at `prefix`.{bin,idx}.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/data/indexed_dataset.h"

namespace ds::test {

// Document d holds the sentence copiesOf(d) times.
inline void writeByteCorpus(const std::string& prefix, int documents,
                            const std::function<int(int)>& copiesOf) {
  std::filesystem::create_directories(std::filesystem::path(prefix).parent_path());
  runtime::IndexedDatasetWriter w(prefix, runtime::TokenType::UInt16);
  const std::string text = "the quick brown fox jumps over the lazy dog; ";
  for (int d = 0; d < documents; ++d) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < copiesOf(d); ++i)
      for (char c : text) tokens.push_back(static_cast<unsigned char>(c));
    tokens.push_back(256);
    w.addSequence(tokens);
    w.endDocument();
  }
  w.finish();
}

}  // namespace ds::test
