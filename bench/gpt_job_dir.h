// The working directory of a benchmark that runs GPT trainer jobs through ds-launch: a fresh
// directory removed when the benchmark ends, holding a synthetic byte-level corpus (an indexed
// dataset at DIR/data/corpus) so that nothing needs downloading.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/data/indexed_dataset.h"

namespace ds::bench {

struct GptJobDir {
  std::filesystem::path path;

  // `documents` documents of `tokens` byte tokens each, a different rhythm per document.
  GptJobDir(const std::string& name, int documents, size_t tokens, int stride)
      : path(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path / "data");
    runtime::IndexedDatasetWriter w((path / "data/corpus").string(), runtime::TokenType::UInt16);
    for (int d = 0; d < documents; ++d) {
      std::vector<int32_t> ids(tokens);
      for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = static_cast<int32_t>((i * static_cast<size_t>(stride) + static_cast<size_t>(d)) % 256);
      w.addSequence(ids);
      w.endDocument();
    }
    w.finish();
  }
  ~GptJobDir() { std::filesystem::remove_all(path); }
  GptJobDir(const GptJobDir&) = delete;
  GptJobDir& operator=(const GptJobDir&) = delete;
};

}  // namespace ds::bench
