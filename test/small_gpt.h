// The small GPT the model tests share: 2 layers of width 32 (4 heads), seq 12, a 50-token
// vocabulary padded to 64 rows (the 14 padding rows get gradients too), and an init std large
// enough that every path matters to the loss; and a batch of random tokens for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>

#include "runtime/model/gpt_config.h"
#include "runtime/model/model.h"

namespace ds::test {

inline runtime::GptConfig smallConfig() {
  runtime::GptConfig c;
  c.numLayers = 2;
  c.hiddenSize = 32;
  c.numAttentionHeads = 4;
  c.seqLength = 12;
  c.maxPositionEmbeddings = 16;
  c.vocabSize = 50;
  c.makeVocabSizeDivisibleBy = 16;
  c.initMethodStd = 0.2;
  return c;
}

// `samples` sequences of `seq` random input and target tokens, sample ids from 1000 (dropout masks).
inline runtime::Batch randomBatch(const runtime::GptConfig& c, size_t samples, size_t seq,
                                  uint64_t seed) {
  std::mt19937_64 rng(seed);
  runtime::Batch b;
  b.size = samples;
  for (size_t i = 0; i < samples * seq; ++i) {
    b.inputIds.push_back(static_cast<int32_t>(rng() % c.vocabSize));
    b.targetIds.push_back(static_cast<int32_t>(rng() % c.vocabSize));
  }
  for (size_t s = 0; s < samples; ++s) b.sampleIds.push_back(1000 + s);
  return b;
}

}  // namespace ds::test
