// Text generation from a GPT: repeated next-token prediction with temperature and top-k sampling
// (temperature 0: greedy), seeded so that the same call gives the same text.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/model/gpt.h"

namespace ds::runtime {

struct SamplingOptions {
  int maxNewTokens = 64;
  double temperature = 1.0;
  int topK = 0;  // 0: the whole vocabulary
  uint64_t seed = 1234;
  int32_t stopToken = -1;  // generation ends after emitting it (e.g. end of document)
};

// The next-token logits after `context` (at least vocabSize values): where the model's
// parameters come from is the caller's (a whole buffer, an engine's layer access, a checkpoint
// read layer by layer).
using NextTokenLogits = std::function<std::vector<float>(const std::vector<int32_t>& context)>;

// Returns the new tokens only. The context is cut to the model's last maxPositions() tokens.
// Throws ds::Error on an empty prompt.
std::vector<int32_t> generateTokens(const Gpt& model, const NextTokenLogits& nextTokenLogits,
                                    const std::vector<int32_t>& prompt,
                                    const SamplingOptions& options);
// The same from the whole flat fp32 parameter buffer `params`.
std::vector<int32_t> generateTokens(Gpt& model, const float* params,
                                    const std::vector<int32_t>& prompt,
                                    const SamplingOptions& options);

}  // namespace ds::runtime
