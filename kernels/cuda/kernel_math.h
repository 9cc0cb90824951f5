// The per-element maths of the CUDA kernels, as __host__ __device__ inline functions: the same
// operations in the same order as the CPU kernels (kernels/cpu/transformer_kernels_impl.h,
// adam_kernel.cc, half_convert.h), so that test_accelerator checks them here against those kernels
// on the CPU and the GPU kernels call exactly what was checked. A plain C++ compiler includes it.
// Row reductions (sums, maxima) are not here: their order differs on the GPU (block_reduce.cuh).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/adam_kernel.h"
#include "kernels/cpu/transformer_kernels.h"

#if defined(__CUDACC__)
#define DS_HD __host__ __device__
#else
#define DS_HD
#endif

namespace ds::kernels::math {

DS_HD inline uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}

DS_HD inline float bitsFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// a * b + c rounded once: the CPU kernels' mulAdd (their only fused operations). The CUDA sources
// build with --fmad=false, so that no other multiply and add is fused on the GPU either.
DS_HD inline float mulAdd(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

DS_HD inline bool isFinite(float x) { return (floatBits(x) & 0x7f800000u) != 0x7f800000u; }

// e^x as the CPU kernels' expApprox: clamp to [-80, 80], Cody-Waite reduction, Cephes' degree-6
// polynomial; about 2 ulp.
DS_HD inline float expApprox(float x) {
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
  return e * bitsFloat(static_cast<uint32_t>(bits));
}

// GeLU, the tanh approximation (GPT-2's, NeoX's fused bias-GeLU), as 0.5 x (1 + tanh(u)) with
// tanh(u) = 1 - 2 / (e^2u + 1), u = sqrt(2 / pi) (x + 0.044715 x^3).
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

DS_HD inline float geluTwiceU(float x) { return 2.0f * kGeluC * mulAdd(kGeluA * x * x, x, x); }

DS_HD inline float gelu(float x) {
  return 0.5f * x * (2.0f - 2.0f / (expApprox(geluTwiceU(x)) + 1.0f));
}

DS_HD inline float geluDerivative(float x) {
  const float e = expApprox(geluTwiceU(x));
  const float inv = 1.0f / (e + 1.0f);
  const float t = 1.0f - 2.0f * inv, sech2 = 4.0f * (e * inv) * inv;
  return mulAdd(0.5f, t, 0.5f) + 0.5f * x * sech2 * kGeluC * mulAdd(3.0f * kGeluA * x, x, 1.0f);
}

constexpr float kExpFloor = -40.0f;  // sigmoid's and Mish's exp floor, as on the CPU

DS_HD inline float sigmoid(float x) {
  x = x < kExpFloor ? kExpFloor : x;
  return 1.0f / (1.0f + expApprox(-x));
}

DS_HD inline float mishExp(float x) {
  return expApprox(x < kExpFloor ? kExpFloor : x < 20.0f ? x : 20.0f);
}

// f(x) of each ds::kernels::Unit; a template so that a kernel's loop has no switch.
template <Unit U>
DS_HD inline float unitValue(float x) {
  if constexpr (U == Unit::Gelu) {
    return gelu(x);
  } else if constexpr (U == Unit::Relu) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (U == Unit::Silu) {
    return x * sigmoid(x);
  } else if constexpr (U == Unit::Sigmoid) {
    return sigmoid(x);
  } else if constexpr (U == Unit::Softsign) {
    return x / (1.0f + (x < 0.0f ? -x : x));
  } else if constexpr (U == Unit::Mish) {
    const float e = mishExp(x), n = e * (e + 2.0f);
    return x * (n / (n + 2.0f));
  } else {
    return x;
  }
}

// f'(x); ReLU's at 0 is 0 (PyTorch's).
template <Unit U>
DS_HD inline float unitDerivative(float x) {
  if constexpr (U == Unit::Gelu) {
    return geluDerivative(x);
  } else if constexpr (U == Unit::Relu) {
    return x > 0.0f ? 1.0f : 0.0f;
  } else if constexpr (U == Unit::Silu) {
    const float s = sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
  } else if constexpr (U == Unit::Sigmoid) {
    const float s = sigmoid(x);
    return s * (1.0f - s);
  } else if constexpr (U == Unit::Softsign) {
    const float a = 1.0f + (x < 0.0f ? -x : x);
    return 1.0f / (a * a);
  } else if constexpr (U == Unit::Mish) {
    const float e = mishExp(x);
    const float n = e * (e + 2.0f), d = n + 2.0f;
    const float sech2 = (4.0f * n + 4.0f) / (d * d);
    return n / d + x * sech2 * (e / (1.0f + e));
  } else {
    return 1.0f;
  }
}

// The run-time forms, for host code and tests.
DS_HD inline float unitValue(Unit u, float x) {
  switch (u) {
    case Unit::Gelu:
      return unitValue<Unit::Gelu>(x);
    case Unit::Relu:
      return unitValue<Unit::Relu>(x);
    case Unit::Silu:
      return unitValue<Unit::Silu>(x);
    case Unit::Sigmoid:
      return unitValue<Unit::Sigmoid>(x);
    case Unit::Softsign:
      return unitValue<Unit::Softsign>(x);
    case Unit::Mish:
      return unitValue<Unit::Mish>(x);
    case Unit::Identity:
      break;
  }
  return x;
}

DS_HD inline float unitDerivative(Unit u, float x) {
  switch (u) {
    case Unit::Gelu:
      return unitDerivative<Unit::Gelu>(x);
    case Unit::Relu:
      return unitDerivative<Unit::Relu>(x);
    case Unit::Silu:
      return unitDerivative<Unit::Silu>(x);
    case Unit::Sigmoid:
      return unitDerivative<Unit::Sigmoid>(x);
    case Unit::Softsign:
      return unitDerivative<Unit::Softsign>(x);
    case Unit::Mish:
      return unitDerivative<Unit::Mish>(x);
    case Unit::Identity:
      break;
  }
  return 1.0f;
}

// LayerNorm: out = (x - mean) * rstd * w + b; the backward's dx from the row's two sums
// a = mean(g w) and c = mean(g w xhat), and the element's dw term g xhat.
DS_HD inline float layerNormValue(float x, float mean, float rstd, float w, float b) {
  return (x - mean) * rstd * w + b;
}
DS_HD inline float layerNormInputGrad(float g, float x, float w, float mean, float rstd, float a,
                                      float c) {
  return rstd * (g * w - a - ((x - mean) * rstd) * c);
}
DS_HD inline float layerNormWeightGrad(float g, float x, float mean, float rstd) {
  return g * ((x - mean) * rstd);
}

// RMSNorm: out = x * s * w with s = rsqrt(mean(x^2) + eps); dx from k = s^3 sum(g w x) / dim.
DS_HD inline float rmsNormScale(float meanSquare, float eps) {
  return 1.0f / sqrtf(meanSquare + eps);
}
DS_HD inline float rmsNormValue(float x, float s, float w) { return x * s * w; }
DS_HD inline float rmsNormInputGrad(float g, float x, float w, float s, float k) {
  return s * g * w - x * k;
}
DS_HD inline float rmsNormWeightGrad(float g, float x, float s) { return g * x * s; }

// Rotary (NeoX's rotate-half): the pair (a, b) = (v[i], v[i + half]) turned by the angle whose
// cos/sin are c/s; sign -1 applies the transpose (the backward).
DS_HD inline void rotatePair(float& a, float& b, float c, float s, float sign) {
  const float x = a, y = b, si = sign * s;
  a = x * c - y * si;
  b = y * c + x * si;
}

// Dropout's keep test: splitmix64's finaliser of the element's index, top 24 bits against
// threshold (p * 2^24).
DS_HD inline uint64_t splitmixFinalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
DS_HD inline float dropoutValue(float in, uint64_t index, uint32_t threshold, float keepScale) {
  const uint32_t r = static_cast<uint32_t>(splitmixFinalize(index) >> 40);
  return in * (r >= threshold ? keepScale : 0.0f);
}

// One Adam/AdamW element update, adamUpdate's operations in its order.
DS_HD inline void adamElement(float& p, float grad, float& m, float& v,
                              const AdamStepConstants& c) {
  float g = grad;
  if (c.decoupledDecay) {
    p *= c.decayFactor;
  } else {
    g += c.weightDecay * p;
  }
  m = c.beta1 * m + c.oneMinusBeta1 * g;
  v = c.beta2 * v + c.oneMinusBeta2 * g * g;
  const float denom = sqrtf(v) * c.invSqrtBc2 + c.eps;
  p -= c.stepSize * m / denom;
}

// bf16 and IEEE fp16 bits <-> fp32, rounding to nearest even (half_convert.h's results; NaN stays
// NaN, its payload may differ).
DS_HD inline float bf16BitsToFloat(uint16_t bits) {
  return bitsFloat(static_cast<uint32_t>(bits) << 16);
}

DS_HD inline uint16_t floatToBf16Bits(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

DS_HD inline float fp16BitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in fp32
    return bitsFloat(floatBits(static_cast<float>(mantissa) * 5.9604644775390625e-8f) | sign);
  }
  if (exponent == 31) return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
  return bitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

DS_HD inline uint16_t floatToFp16Bits(float value) {
  const uint32_t bits = floatBits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  // 65520 (halfway between fp16's largest, 65504, and 65536) and above round to infinity.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal (units of 2^-24) or zero
    if (magnitude <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: ties to 0
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - (magnitude >> 23);  // 14..24
    uint32_t q = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t rebiased = magnitude - 0x38000000u;  // exponent - 127 + 15
  uint32_t q = rebiased >> 13;
  const uint32_t rest = rebiased & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (q & 1u))) ++q;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | q);
}

}  // namespace ds::kernels::math
