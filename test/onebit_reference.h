// A plain one-process reference of DeepSpeed's compressed_allreduce (deepspeed/runtime/comm/
// nccl.py), written from its description, every rank's call at once: worker: add the error,
// scale = ||x|| / sqrt(n), signs with zero as +1, the error keeps the loss; server j: average the
// ranks' scaled signs of chunk j, add its error, compress again; everyone gathers every chunk.
// Shared by the compressed all-reduce's and the 1-bit optimizers' tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "runtime/comm/onebit_allreduce.h"
#include "test/float_arrays.h"

namespace ds::test {

using runtime::OneBitErrors;
using runtime::oneBitPaddedCount;

// ||x|| / sqrt(n) and the signs (+1 for zero) of x; error = x - scale x sign.
inline float referenceCompress(const std::vector<float>& x, std::vector<float>& sign,
                               std::vector<float>& error) {
  double squares = 0.0;
  for (float v : x) squares += static_cast<double>(v) * v;
  const auto scale = static_cast<float>(std::sqrt(squares / static_cast<double>(x.size())));
  sign.resize(x.size());
  error.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    sign[i] = x[i] >= 0.0f ? 1.0f : -1.0f;
    error[i] = x[i] - scale * sign[i];
  }
  return scale;
}

// Step `step`'s gradients of `ranks` ranks (`count` each, drawn per step and rank) and their mean:
// what the 1-bit optimizers' tests feed on local and on averaged steps.
struct StepGradients {
  std::vector<std::vector<float>> local;
  std::vector<float> average;
};
inline StepGradients stepGradients(int ranks, int step, size_t count) {
  StepGradients g{std::vector<std::vector<float>>(static_cast<size_t>(ranks)),
                  std::vector<float>(count, 0.0f)};
  for (int r = 0; r < ranks; ++r) {
    g.local[static_cast<size_t>(r)] = randoms(count, static_cast<unsigned>(10 * step + r));
    for (size_t i = 0; i < count; ++i) g.average[i] += g.local[static_cast<size_t>(r)][i];
  }
  for (float& v : g.average) v /= static_cast<float>(ranks);
  return g;
}

// Every rank's call at once: inputs[r] in place, errors[r] updated.
inline void referenceOneBitAllReduce(std::vector<std::vector<float>>& inputs,
                                     std::vector<OneBitErrors>& errors) {
  const size_t n = inputs.size(), count = inputs[0].size();
  const size_t padded = oneBitPaddedCount(count, static_cast<int>(n)), chunk = padded / n;
  std::vector<std::vector<float>> signs(n);
  std::vector<float> scales(n);
  for (size_t r = 0; r < n; ++r) {
    std::vector<float> x(padded, 0.0f);
    for (size_t i = 0; i < padded; ++i)
      x[i] = (i < count ? inputs[r][i] : 0.0f) + errors[r].worker[i];
    scales[r] = referenceCompress(x, signs[r], errors[r].worker);
  }
  std::vector<float> serverSigns(padded), serverScales(n);
  for (size_t j = 0; j < n; ++j) {
    std::vector<float> m(chunk), sign, error;
    for (size_t i = 0; i < chunk; ++i) {
      float sum = 0.0f;
      for (size_t r = 0; r < n; ++r) sum += scales[r] * signs[r][j * chunk + i];
      m[i] = sum * (1.0f / static_cast<float>(n)) + errors[j].server[i];
    }
    serverScales[j] = referenceCompress(m, sign, errors[j].server);
    std::copy(sign.begin(), sign.end(),
              serverSigns.begin() + static_cast<std::ptrdiff_t>(j * chunk));
  }
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) inputs[r][i] = serverScales[i / chunk] * serverSigns[i];
}

}  // namespace ds::test
