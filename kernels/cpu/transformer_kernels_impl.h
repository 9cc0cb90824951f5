// The loops behind transformer_kernels.h, written for the compiler's vectoriser: no intrinsics,
// fixed 16-lane partial sums, a branch-free polynomial exp. Included once per instruction set by
// transformer_kernels_{scalar,avx2,avx512}.cc inside their own namespace, which then export the
// table through DS_TRANSFORMER_KERNELS_TABLE. Nothing here may depend on the instruction set:
// the paths must stay bitwise equal (test_transformer_kernels checks it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/box_muller_impl.h"
#include "kernels/cpu/philox_impl.h"
#include "kernels/cpu/splitmix_impl.h"
#include "kernels/cpu/transformer_kernels.h"

namespace {

constexpr size_t kLanes = 16;

inline float treeSum(const float* a) {  // a[16], combined in one fixed order
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = a[i] + a[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// sum over i < n of term(i), in 16 lanes.
template <class Term>
inline float laneSum(size_t n, Term term) {
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) acc[j] += term(i + j);
  for (size_t j = 0; i + j < n; ++j) acc[j] += term(i + j);
  return treeSum(acc);
}

// The maximum of x[0..n), kept in 16 lanes as two halves of 8 in GCC's vector types: written as
// a plain loop over 16 lanes, GCC (12) would not vectorise this reduction at all (16 scalar loads
// and maxes a step, a quarter of the attention softmax's time), and as one 16-lane vector it
// splits it into scalar code on AVX2. Lane j takes x[j], x[j + 16], ... in order, on every path.
typedef float HalfLanes __attribute__((vector_size(kLanes / 2 * sizeof(float))));
inline float laneMax(const float* x, size_t n) {
  HalfLanes lo, hi;
  for (size_t j = 0; j < kLanes / 2; ++j) lo[j] = hi[j] = -INFINITY;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    HalfLanes a, b;
    std::memcpy(&a, x + i, sizeof a);
    std::memcpy(&b, x + i + kLanes / 2, sizeof b);
    lo = a > lo ? a : lo;
    hi = b > hi ? b : hi;
  }
  float acc[kLanes];
  std::memcpy(acc, &lo, sizeof lo);
  std::memcpy(acc + kLanes / 2, &hi, sizeof hi);
  for (size_t j = 0; i + j < n; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  float m = acc[0];
  for (size_t j = 1; j < kLanes; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

// x[i] = e^(x[i] - m) for i < n, returning their sum in laneSum's lanes and order (one pass: the
// sum takes each value as it is written).
inline float expSum(float* x, size_t n, float m);

// a * b + c rounded once. Every path gives the same bits: the AVX2 and AVX-512 builds emit the
// FMA instruction, the scalar build calls libm's fmaf (exact on any CPU). Only the exp-based
// kernels use it, where their polynomials made them compute-bound (GeLU 25% faster on AVX-512);
// every other multiply and add stays separate (-ffp-contract=off).
inline float mulAdd(float a, float b, float c) { return std::fma(a, b, c); }

// e^x to about 2 ulp (Cody-Waite reduction, Cephes' degree-6 polynomial), branch-free so that it
// vectorises; inputs are clamped to [-80, 80], NaN stays NaN. Not to fp32's own [-87, 88]: the
// vectoriser evaluates a clamped lane's path for every lane, and near those ends its constants
// (1 / (1 + e^88) = 6e-39, e^-87 times a value below 1) are denormals, each a microcode assist that
// cost 10x on SiLU (bench_kernels); the results that change are below 2e-35 and feed only sums of 1.
inline float expApprox(float x) {
  x = x < -80.0f ? -80.0f : x;
  x = x > 80.0f ? 80.0f : x;
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = mulAdd(n, 2.12194440e-4f, mulAdd(n, -0.693359375f, x));
  float p = 1.9875691500e-4f;
  p = mulAdd(p, r, 1.3981999507e-3f);
  p = mulAdd(p, r, 8.3334519073e-3f);
  p = mulAdd(p, r, 4.1665795894e-2f);
  p = mulAdd(p, r, 1.6666665459e-1f);
  p = mulAdd(p, r, 5.0000001201e-1f);
  const float e = mulAdd(p * r, r, r) + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return e * scale;
}

inline float expSum(float* x, size_t n, float m) {
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) {
      const float e = expApprox(x[i + j] - m);
      x[i + j] = e;
      acc[j] += e;
    }
  for (size_t j = 0; i + j < n; ++j) {
    const float e = expApprox(x[i + j] - m);
    x[i + j] = e;
    acc[j] += e;
  }
  return treeSum(acc);
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

// 2 u of GeLU's tanh(u), u = sqrt(2 / pi) (x + 0.044715 x^3).
inline float geluTwiceU(float x) { return 2.0f * kGeluC * mulAdd(kGeluA * x * x, x, x); }

inline float gelu(float x) {
  // 0.5 x (1 + tanh(u)) with tanh(u) = 1 - 2 / (e^2u + 1).
  return 0.5f * x * (2.0f - 2.0f / (expApprox(geluTwiceU(x)) + 1.0f));
}

inline float geluDerivative(float x) {
  // 1 - tanh^2 as 4e / (e + 1)^2 with e = exp(2u): no cancellation where tanh is near -1 or 1.
  const float e = expApprox(geluTwiceU(x));
  const float inv = 1.0f / (e + 1.0f);
  const float t = 1.0f - 2.0f * inv, sech2 = 4.0f * (e * inv) * inv;
  return mulAdd(0.5f, t, 0.5f) + 0.5f * x * sech2 * kGeluC * mulAdd(3.0f * kGeluA * x, x, 1.0f);
}

void layerNormForward(float* out, float* mean, float* rstd, const float* x, const float* w,
                      const float* b, size_t rows, size_t dim, float eps) {
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    const float mu = laneSum(dim, [&](size_t i) { return xr[i]; }) / static_cast<float>(dim);
    const float var =
        laneSum(dim, [&](size_t i) { return (xr[i] - mu) * (xr[i] - mu); }) / static_cast<float>(dim);
    const float s = 1.0f / std::sqrt(var + eps);
    for (size_t i = 0; i < dim; ++i) o[i] = (xr[i] - mu) * s * w[i] + b[i];
    mean[r] = mu;
    rstd[r] = s;
  }
}

void layerNormBackward(float* dx, float* dw, float* db, const float* dout, const float* x,
                       const float* mean, const float* rstd, const float* w, size_t rows,
                       size_t dim) {
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* g = dout + r * dim;
    float* d = dx + r * dim;
    const float mu = mean[r], s = rstd[r];
    const float a = laneSum(dim, [&](size_t i) { return g[i] * w[i]; }) / static_cast<float>(dim);
    const float c = laneSum(dim, [&](size_t i) { return g[i] * w[i] * ((xr[i] - mu) * s); }) /
                    static_cast<float>(dim);
    // Two loops, not one: with three outputs against three inputs GCC has too many pairs to check
    // for aliasing and leaves the single loop scalar (1.3x the scalar path, now ~3x).
    for (size_t i = 0; i < dim; ++i) d[i] = s * (g[i] * w[i] - a - ((xr[i] - mu) * s) * c);
    for (size_t i = 0; i < dim; ++i) {
      dw[i] += g[i] * ((xr[i] - mu) * s);
      db[i] += g[i];
    }
  }
}

void rmsNormForward(float* out, float* norm, const float* x, const float* w, size_t rows,
                    size_t dim, float eps) {
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    const float meanSquare =
        laneSum(dim, [&](size_t i) { return xr[i] * xr[i]; }) / static_cast<float>(dim);
    const float s = 1.0f / std::sqrt(meanSquare + eps);
    for (size_t i = 0; i < dim; ++i) o[i] = xr[i] * s * w[i];
    norm[r] = s;
  }
}

void rmsNormBackward(float* dx, float* dw, const float* dout, const float* x, const float* norm,
                     const float* w, size_t rows, size_t dim, float /*eps: inside norm*/) {
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* g = dout + r * dim;
    float* d = dx + r * dim;
    const float s = norm[r];
    const float gx = laneSum(dim, [&](size_t i) { return g[i] * w[i] * xr[i]; });
    // d s / d x_i = -s^3 x_i / dim.
    const float k = s * s * s * gx / static_cast<float>(dim);
    for (size_t i = 0; i < dim; ++i) {
      d[i] = s * g[i] * w[i] - xr[i] * k;
      dw[i] += g[i] * xr[i] * s;
    }
  }
}

// Sigmoid and Mish take exp at no less than -40 (where sigmoid is 4.2e-18: no result that matters
// in fp32 changes). The vectoriser computes the clamped lanes' path as a constant times x for every
// lane; at exp's own floor that constant is 1.8e-35, and x times it a denormal wherever |x| < 7e-4.
constexpr float kExpFloor = -40.0f;

inline float sigmoid(float x) {
  x = x < kExpFloor ? kExpFloor : x;
  return 1.0f / (1.0f + expApprox(-x));
}

// One struct per ds::kernels::Unit: f and its derivative, branch-free so that loops vectorise.
struct ReluOp {
  static float f(float x) { return x > 0.0f ? x : 0.0f; }
  static float df(float x) { return x > 0.0f ? 1.0f : 0.0f; }
};
struct SiluOp {
  static float f(float x) { return x * sigmoid(x); }
  static float df(float x) {
    const float s = sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
  }
};
struct GeluOp {
  static float f(float x) { return gelu(x); }
  static float df(float x) { return geluDerivative(x); }
};
struct SigmoidOp {
  static float f(float x) { return sigmoid(x); }
  static float df(float x) {
    const float s = sigmoid(x);
    return s * (1.0f - s);
  }
};
struct SoftsignOp {
  static float f(float x) { return x / (1.0f + (x < 0.0f ? -x : x)); }
  static float df(float x) {
    const float a = 1.0f + (x < 0.0f ? -x : x);
    return 1.0f / (a * a);
  }
};
// Mish without a logarithm: with e = exp(x) and n = e (e + 2), tanh(softplus(x)) = n / (n + 2).
// Past x = 20 that ratio is 1 in fp32, so e is taken at min(x, 20), which keeps n finite (and at no
// less than kExpFloor, as sigmoid).
struct MishOp {
  static float tanhSoftplus(float e) {
    const float n = e * (e + 2.0f);
    return n / (n + 2.0f);
  }
  static float expClamped(float x) {
    return expApprox(x < kExpFloor ? kExpFloor : x < 20.0f ? x : 20.0f);
  }
  static float f(float x) { return x * tanhSoftplus(expClamped(x)); }
  static float df(float x) {  // tanh(sp) + x (1 - tanh(sp)^2) sigmoid(x)
    const float e = expClamped(x);
    const float n = e * (e + 2.0f), d = n + 2.0f;
    const float sech2 = (4.0f * n + 4.0f) / (d * d);
    return n / d + x * sech2 * (e / (1.0f + e));
  }
};
struct IdentityOp {
  static float f(float x) { return x; }
  static float df(float) { return 1.0f; }
};

template <class Fn>
inline void withUnit(ds::kernels::Unit u, Fn fn) {
  switch (u) {
    case ds::kernels::Unit::Gelu:
      return fn(GeluOp{});
    case ds::kernels::Unit::Relu:
      return fn(ReluOp{});
    case ds::kernels::Unit::Silu:
      return fn(SiluOp{});
    case ds::kernels::Unit::Sigmoid:
      return fn(SigmoidOp{});
    case ds::kernels::Unit::Identity:
      return fn(IdentityOp{});
    case ds::kernels::Unit::Softsign:
      return fn(SoftsignOp{});
    case ds::kernels::Unit::Mish:
      return fn(MishOp{});
  }
}

void unitForward(ds::kernels::Unit u, float* out, const float* in, size_t n) {
  withUnit(u, [&](auto op) {
    for (size_t i = 0; i < n; ++i) out[i] = op.f(in[i]);
  });
}

void unitBackward(ds::kernels::Unit u, float* din, const float* dout, const float* in, size_t n) {
  withUnit(u, [&](auto op) {
    for (size_t i = 0; i < n; ++i) din[i] = dout[i] * op.df(in[i]);
  });
}

void gatedForward(ds::kernels::Unit u, float* out, const float* in, size_t rows, size_t ff) {
  withUnit(u, [&](auto op) {
    for (size_t r = 0; r < rows; ++r) {
      const float* x = in + r * 2 * ff;
      const float* gate = x + ff;
      float* o = out + r * ff;
      for (size_t i = 0; i < ff; ++i) o[i] = x[i] * op.f(gate[i]);
    }
  });
}

void gatedBackward(ds::kernels::Unit u, float* din, const float* dout, const float* in, size_t rows,
                   size_t ff) {
  withUnit(u, [&](auto op) {
    for (size_t r = 0; r < rows; ++r) {
      const float* x = in + r * 2 * ff;
      const float* gate = x + ff;
      const float* g = dout + r * ff;
      float* dx = din + r * 2 * ff;
      float* dgate = dx + ff;
      for (size_t i = 0; i < ff; ++i) {
        dx[i] = g[i] * op.f(gate[i]);
        dgate[i] = g[i] * x[i] * op.df(gate[i]);
      }
    }
  });
}

void scaleNormForward(float* out, float* norm, const float* x, float g, size_t rows, size_t dim,
                      float eps) {
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    const float n = std::sqrt(laneSum(dim, [&](size_t i) { return xr[i] * xr[i]; }));
    const float s = g / (n > eps ? n : eps);
    for (size_t i = 0; i < dim; ++i) o[i] = xr[i] * s;
    norm[r] = n;
  }
}

void scaleNormBackward(float* dx, float* dg, const float* dout, const float* x, const float* norm,
                       float g, size_t rows, size_t dim, float eps) {
  float gain = 0.0f;  // d(loss)/dg, summed over the rows in order
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* d = dout + r * dim;
    float* o = dx + r * dim;
    const float n = norm[r];
    const float gx = laneSum(dim, [&](size_t i) { return d[i] * xr[i]; });
    if (n > eps) {  // y = g x / |x|: dx = g / n (dout - x (x . dout) / n^2)
      const float s = g / n, k = s * gx / (n * n);
      for (size_t i = 0; i < dim; ++i) o[i] = s * d[i] - xr[i] * k;
      gain += gx / n;
    } else {  // clamped: y = g x / eps
      const float s = g / eps;
      for (size_t i = 0; i < dim; ++i) o[i] = s * d[i];
      gain += gx / eps;
    }
  }
  *dg += gain;
}

void causalSoftmaxForward(float* scores, size_t t, size_t window) {
  for (size_t i = 0; i < t; ++i) {
    float* all = scores + i * t;
    const size_t first = i > window ? i - window : 0, n = i + 1 - first;
    float* row = all + first;  // the keys row i sees: first..i
    const float m = laneMax(row, n);
    for (size_t j = 0; j < n; ++j) row[j] = expApprox(row[j] - m);
    const float inv = 1.0f / laneSum(n, [&](size_t j) { return row[j]; });
    for (size_t j = 0; j < n; ++j) row[j] *= inv;
    for (size_t j = 0; j < first; ++j) all[j] = 0.0f;
    for (size_t j = i + 1; j < t; ++j) all[j] = 0.0f;
  }
}

void softmaxBackward(float* dp, const float* p, size_t t) {
  for (size_t i = 0; i < t; ++i) {
    float* d = dp + i * t;
    const float* pr = p + i * t;
    const float dot = laneSum(t, [&](size_t j) { return pr[j] * d[j]; });
    for (size_t j = 0; j < t; ++j) d[j] = pr[j] * (d[j] - dot);
  }
}

// The keys [lo, hi) of a tile's columns [key0, key0 + cols) that query i sees (lo >= hi: none).
struct VisibleKeys {
  size_t lo, hi;
};
inline VisibleKeys visibleKeys(size_t i, size_t key0, size_t cols, size_t window) {
  const size_t first = i > window ? i - window : 0;
  return {std::max(first, key0) - key0, std::min(i + 1, key0 + cols) - std::min(i + 1, key0)};
}

// Row r's columns outside [lo, hi) set to zero, and hi clamped to at least lo.
inline void zeroOutside(float* row, size_t cols, VisibleKeys& v) {
  v.hi = std::max(v.hi, v.lo);
  v.lo = std::min(v.lo, cols);
  v.hi = std::min(v.hi, cols);
  for (size_t j = 0; j < v.lo; ++j) row[j] = 0.0f;
  for (size_t j = v.hi; j < cols; ++j) row[j] = 0.0f;
}

void attentionTileSoftmax(float* s, size_t ld, size_t rows, size_t cols, size_t query0,
                          size_t key0, size_t window, float* rowMax, float* rowSum, float* out,
                          size_t outLd, size_t dim) {
  for (size_t r = 0; r < rows; ++r) {
    float* row = s + r * ld;
    float* o = out + r * outLd;
    if (rowMax[r] == -INFINITY) {  // nothing seen yet: the output row starts from zero
      rowSum[r] = 0.0f;
      for (size_t j = 0; j < dim; ++j) o[j] = 0.0f;
    }
    VisibleKeys v = visibleKeys(query0 + r, key0, cols, window);
    zeroOutside(row, cols, v);
    if (v.lo == v.hi) continue;
    const size_t n = v.hi - v.lo;
    float* seen = row + v.lo;
    const float m = std::max(rowMax[r], laneMax(seen, n));
    const float sum = expSum(seen, n, m);
    if (m != rowMax[r] && rowMax[r] != -INFINITY) {
      const float c = expApprox(rowMax[r] - m);
      rowSum[r] *= c;
      for (size_t j = 0; j < dim; ++j) o[j] *= c;
    }
    rowSum[r] += sum;
    rowMax[r] = m;
  }
}

void attentionRowsFinish(float* out, size_t outLd, size_t dim, size_t rows, float* rowSum) {
  for (size_t r = 0; r < rows; ++r) {
    const float inv = 1.0f / rowSum[r];
    float* o = out + r * outLd;
    for (size_t j = 0; j < dim; ++j) o[j] *= inv;
    rowSum[r] = inv;
  }
}

void attentionTileProbs(float* s, size_t ld, size_t rows, size_t cols, size_t query0, size_t key0,
                        size_t window, const float* rowMax, const float* rowInvSum) {
  for (size_t r = 0; r < rows; ++r) {
    float* row = s + r * ld;
    VisibleKeys v = visibleKeys(query0 + r, key0, cols, window);
    zeroOutside(row, cols, v);
    const float m = rowMax[r], inv = rowInvSum[r];
    for (size_t j = v.lo; j < v.hi; ++j) row[j] = expApprox(row[j] - m) * inv;
  }
}

void attentionTileScoreGrad(float* dp, const float* p, size_t ld, size_t rows, size_t cols,
                            const float* rowDot) {
  for (size_t r = 0; r < rows; ++r) {
    float* d = dp + r * ld;
    const float* pr = p + r * ld;
    const float dot = rowDot[r];
    for (size_t j = 0; j < cols; ++j) d[j] = pr[j] * (d[j] - dot);
  }
}

void rowDots(float* out, const float* a, size_t lda, const float* b, size_t ldb, size_t rows,
             size_t dim) {
  for (size_t r = 0; r < rows; ++r) {
    const float* x = a + r * lda;
    const float* y = b + r * ldb;
    out[r] = laneSum(dim, [&](size_t j) { return x[j] * y[j]; });
  }
}

void rotary(float* x, size_t rows, size_t seq, size_t heads, size_t headDim, size_t stride,
            size_t rotDim, const float* cos, const float* sin, bool inverse) {
  const size_t half = rotDim / 2;
  const float sign = inverse ? -1.0f : 1.0f;
  for (size_t r = 0; r < rows; ++r) {
    const float* c = cos + (r % seq) * half;
    const float* s = sin + (r % seq) * half;
    for (size_t h = 0; h < heads; ++h) {
      float* v = x + r * stride + h * headDim;
      for (size_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half], si = sign * s[i];
        v[i] = a * c[i] - b * si;
        v[i + half] = b * c[i] + a * si;
      }
    }
  }
}

double crossEntropy(float* logits, const int32_t* targets, size_t rows, size_t vocab,
                    float gradScale) {
  double total = 0.0;
  for (size_t r = 0; r < rows; ++r) {
    float* z = logits + r * vocab;
    if (targets[r] < 0) {  // a masked position: no loss, no gradient
      for (size_t j = 0; j < vocab; ++j) z[j] = 0.0f;
      continue;
    }
    const size_t target = static_cast<size_t>(targets[r]);
    const float m = laneMax(z, vocab);
    const float picked = z[target];
    for (size_t j = 0; j < vocab; ++j) z[j] = expApprox(z[j] - m);
    const float sum = laneSum(vocab, [&](size_t j) { return z[j]; });
    total += std::log(static_cast<double>(sum)) + static_cast<double>(m) - picked;
    const float k = gradScale / sum;
    for (size_t j = 0; j < vocab; ++j) z[j] *= k;
    z[target] -= gradScale;
  }
  return total;
}

void embeddingForward(float* out, const int32_t* ids, const float* table, const float* pos,
                      size_t rows, size_t seq, size_t dim) {
  for (size_t r = 0; r < rows; ++r) {
    const float* e = table + static_cast<size_t>(ids[r]) * dim;
    float* o = out + r * dim;
    if (pos) {
      const float* p = pos + (r % seq) * dim;
      for (size_t i = 0; i < dim; ++i) o[i] = e[i] + p[i];
    } else {
      for (size_t i = 0; i < dim; ++i) o[i] = e[i];
    }
  }
}

void embeddingBackward(float* dtable, float* dpos, const int32_t* ids, const float* dout,
                       size_t rows, size_t seq, size_t dim) {
  for (size_t r = 0; r < rows; ++r) {
    const float* g = dout + r * dim;
    float* d = dtable + static_cast<size_t>(ids[r]) * dim;
    for (size_t i = 0; i < dim; ++i) d[i] += g[i];
    if (dpos) {
      float* p = dpos + (r % seq) * dim;
      for (size_t i = 0; i < dim; ++i) p[i] += g[i];
    }
  }
}

void addBias(float* out, const float* bias, size_t rows, size_t dim) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < dim; ++i) out[r * dim + i] += bias[i];
}

void biasGradient(float* dbias, const float* dout, size_t rows, size_t dim) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < dim; ++i) dbias[i] += dout[r * dim + i];
}

void add(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

void dropout(const float* in, float* out, size_t n, uint64_t base, uint64_t first,
             uint32_t threshold, float keepScale) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = static_cast<uint32_t>(splitmixFinalize(base + first + i) >> 40);
    out[i] = in[i] * (r >= threshold ? keepScale : 0.0f);
  }
}

void normalFromDraws(float* out, size_t n, const uint64_t* draws, float scale) {
  const size_t pairs = n / 2;
  for (size_t p = 0; p < pairs; ++p)
    boxMullerPair(draws[2 * p], draws[2 * p + 1], scale, out[2 * p], out[2 * p + 1]);
  if (n % 2 != 0) {
    float unused;
    boxMullerPair(draws[n - 1], draws[n], scale, out[n - 1], unused);
  }
}

void normalFromPhilox(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t first,
                      float scale) {
  // Whole pairs in blocks of kPairs through a buffer, so that a range starting or ending inside a
  // pair (an odd cut) copies just its half.
  constexpr uint64_t kPairs = 1024;
  uint64_t draws[2 * kPairs];
  float values[2 * kPairs];
  const uint64_t end = first + n;
  for (uint64_t e = first; e < end;) {
    const uint64_t pair = e / 2, pairs = std::min<uint64_t>(kPairs, (end + 1) / 2 - pair);
    philoxDraws(draws, pairs, seed, stream, pair);
    normalFromDraws(values, 2 * pairs, draws, scale);
    const uint64_t stop = std::min(end, 2 * (pair + pairs));
    std::memcpy(out + (e - first), values + (e - 2 * pair), (stop - e) * sizeof(float));
    e = stop;
  }
}

constexpr ds::kernels::TransformerKernels kTable = {layerNormForward,
                                                    layerNormBackward,
                                                    rmsNormForward,
                                                    rmsNormBackward,
                                                    unitForward,
                                                    unitBackward,
                                                    gatedForward,
                                                    gatedBackward,
                                                    scaleNormForward,
                                                    scaleNormBackward,
                                                    causalSoftmaxForward,
                                                    softmaxBackward,
                                                    attentionTileSoftmax,
                                                    attentionRowsFinish,
                                                    attentionTileProbs,
                                                    attentionTileScoreGrad,
                                                    rowDots,
                                                    rotary,
                                                    crossEntropy,
                                                    embeddingForward,
                                                    embeddingBackward,
                                                    addBias,
                                                    biasGradient,
                                                    add,
                                                    dropout,
                                                    normalFromDraws,
                                                    normalFromPhilox};

}  // namespace
