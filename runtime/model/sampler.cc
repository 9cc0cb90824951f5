#include "runtime/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/error.h"
#include "runtime/model/flat_parameters.h"

namespace ds::runtime {

std::vector<int32_t> generateTokens(Gpt& model, const float* params,
                                    const std::vector<int32_t>& prompt,
                                    const SamplingOptions& options) {
  FlatParameters access(model, params);
  return generateTokens(
      model,
      [&](const std::vector<int32_t>& context) { return model.nextTokenLogits(context, access); },
      prompt, options);
}

std::vector<int32_t> generateTokens(const Gpt& model, const NextTokenLogits& nextTokenLogits,
                                    const std::vector<int32_t>& prompt,
                                    const SamplingOptions& options) {
  if (prompt.empty()) throw Error("generation needs a prompt of at least one token");
  if (!(options.temperature >= 0.0)) throw Error("--temperature: expected >= 0");
  std::mt19937_64 rng(options.seed);
  std::vector<int32_t> context = prompt, out;
  const auto window = static_cast<size_t>(model.maxPositions());
  const int vocab = model.config().vocabSize;  // padding rows are never sampled
  for (int n = 0; n < options.maxNewTokens; ++n) {
    if (context.size() > window) context.erase(context.begin(), context.end() - window);
    std::vector<float> logits = nextTokenLogits(context);
    logits.resize(vocab);
    int32_t next = 0;
    if (options.temperature == 0.0) {
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
      std::vector<int32_t> ids(vocab);
      for (int i = 0; i < vocab; ++i) ids[i] = i;
      size_t keep = ids.size();
      if (options.topK > 0 && options.topK < vocab) {
        keep = static_cast<size_t>(options.topK);
        std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(),
                          [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
      }
      double top = -INFINITY;
      for (size_t i = 0; i < keep; ++i) top = std::max(top, static_cast<double>(logits[ids[i]]));
      std::vector<double> weights(keep);
      for (size_t i = 0; i < keep; ++i)
        weights[i] = std::exp((logits[ids[i]] - top) / options.temperature);
      std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
      next = ids[pick(rng)];
    }
    out.push_back(next);
    context.push_back(next);
    if (next == options.stopToken) break;
  }
  return out;
}

}  // namespace ds::runtime
