// Causal attention over the whole [T, T] matrix in float64, forward and backward, with the
// attention dropout mask drawn as the dropout kernel draws it: the reference flash attention is
// checked against on the CPU (test_flash_attention.cc) and on the GPU (test/cuda). Header-only and
// free of any BLAS or test framework, so that scripts/gpu-check's small build takes it too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/splitmix_impl.h"

namespace ds::test {

struct AttentionOutputs {
  std::vector<float> ctx, dqkv;
};

// A test's dropout: p, and the AttentionDropout the kernels take.
struct ReferenceDropout {
  explicit ReferenceDropout(double p, size_t samples, uint64_t firstElement)
      : keep(1.0 / (1.0 - p)) {
    for (size_t b = 0; b < samples; ++b) bases.push_back(0x1234567 + 977 * b);
    spec = {static_cast<uint32_t>(std::ldexp(p, 24)), static_cast<float>(keep), bases.data(),
            firstElement};
  }
  // The mask's factor for (sample, head, query, key): 0 or 1 / (1 - p).
  double factor(size_t b, size_t head, size_t i, size_t j, size_t T) const {
    const uint64_t element = spec.firstElement + (head * T + i) * T + j;
    const uint32_t r = static_cast<uint32_t>(splitmixFinalize(bases[b] + element) >> 40);
    return r >= spec.threshold ? keep : 0.0;
  }
  double keep;
  std::vector<uint64_t> bases;
  kernels::AttentionDropout spec;
};

// Attention over the whole [T, T] matrix in float64: forward, then the backward from dCtx.
inline AttentionOutputs attentionReference(const kernels::AttentionShape& s, const std::vector<float>& qkv,
                  const std::vector<float>& dCtx, const ReferenceDropout* drop) {
  const size_t T = s.seq, H = s.heads, KV = s.kvHeads, d = s.headDim, Q = s.qkvStride(),
               hq = s.ctxStride(), group = H / KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> ctx(s.samples * T * hq), dqkv(qkv.size());
  std::vector<double> p(T * T), pd(T * T), ds(T * T);
  for (size_t b = 0; b < s.samples; ++b)
    for (size_t head = 0; head < H; ++head) {
      const size_t qAt = b * T * Q + head * d, kAt = b * T * Q + hq + head / group * d,
                   vAt = kAt + KV * d, cAt = b * T * hq + head * d;
      auto seen = [&](size_t i, size_t j) { return j <= i && i - j <= s.window; };
      for (size_t i = 0; i < T; ++i) {
        double m = -INFINITY, sum = 0;
        for (size_t j = 0; j < T; ++j) {
          double dot = 0;
          for (size_t e = 0; e < d; ++e) dot += double(qkv[qAt + i * Q + e]) * qkv[kAt + j * Q + e];
          p[i * T + j] = seen(i, j) ? dot * scale : -INFINITY;
          m = std::max(m, p[i * T + j]);
        }
        for (size_t j = 0; j < T; ++j) sum += p[i * T + j] = std::exp(p[i * T + j] - m);
        for (size_t j = 0; j < T; ++j) {
          p[i * T + j] /= sum;
          pd[i * T + j] = p[i * T + j] * (drop ? drop->factor(b, head, i, j, T) : 1.0);
        }
        for (size_t e = 0; e < d; ++e) {
          double o = 0;
          for (size_t j = 0; j <= i; ++j) o += pd[i * T + j] * qkv[vAt + j * Q + e];
          ctx[cAt + i * hq + e] = o;
        }
      }
      // d(probs) = dCtx v^T through the mask; d(scores) = p (d(probs) - rowsum(p d(probs))).
      for (size_t i = 0; i < T; ++i) {
        double dot = 0;
        for (size_t j = 0; j <= i; ++j) {
          double g = 0;
          for (size_t e = 0; e < d; ++e) g += double(dCtx[cAt + i * hq + e]) * qkv[vAt + j * Q + e];
          ds[i * T + j] = g * (drop ? drop->factor(b, head, i, j, T) : 1.0);
          dot += p[i * T + j] * ds[i * T + j];
        }
        for (size_t j = 0; j <= i; ++j) ds[i * T + j] = p[i * T + j] * (ds[i * T + j] - dot);
      }
      for (size_t i = 0; i < T; ++i)
        for (size_t j = 0; j <= i; ++j)
          for (size_t e = 0; e < d; ++e) {
            dqkv[qAt + i * Q + e] += scale * ds[i * T + j] * qkv[kAt + j * Q + e];
            dqkv[kAt + j * Q + e] += scale * ds[i * T + j] * qkv[qAt + i * Q + e];
            dqkv[vAt + j * Q + e] += pd[i * T + j] * dCtx[cAt + i * hq + e];
          }
    }
  return {std::vector<float>(ctx.begin(), ctx.end()), std::vector<float>(dqkv.begin(), dqkv.end())};
}

}  // namespace ds::test
