// Box-Muller in double precision, branch-free for the compiler's vectoriser: part of
// transformer_kernels_impl.h (compiled once per instruction set, inside its anonymous namespace).
// libm's log, sin and cos do not vectorise and are most of an initialisation's time; these are
// fdlibm's algorithms (its minimax coefficients, errors under 1 ulp), written with plain IEEE
// operations so that every path gives the same bits. They agree with glibc's functions to the last
// bit almost always, and after the rounding to float practically always (the kernel tests count).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

inline double bitsToDouble(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

inline uint64_t doubleToBits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

// (double)x for x < 2^52, exactly, with integer operations only (AVX2 and AVX-512F have no 64-bit
// integer conversion): x as the mantissa of 2^52 + x. Selects below are bit masks too, so that
// every instruction set vectorises the loop without branches.
inline double exactDouble52(uint64_t x) { return bitsToDouble(x | 0x4330000000000000ull) - 0x1p52; }

// (double)x for x < 2^53: two exact halves, and their exact sum.
inline double exactDouble53(uint64_t x) {
  return exactDouble52(x >> 26) * 0x1p26 + exactDouble52(x & 0x3ffffffull);
}

// log(x) for a positive normal x: x = 2^k m with m in [sqrt(1/2), sqrt(2)), log(m) = log(1 + f)
// from s = f / (2 + f) and a degree-7 polynomial in s^2 (fdlibm's e_log.c, its general case).
inline double logPositiveNormal(double x) {
  const uint64_t bits = doubleToBits(x), mantissa = bits & 0x000fffffffffffffull;
  const uint64_t above = mantissa > 0x6a09e667f3bcdull ? 1 : 0;  // m above sqrt(2): halve it
  const double k = exactDouble52((bits >> 52) + above) - 1023.0;
  const double m = bitsToDouble(mantissa | (0x3ff0000000000000ull - (above << 52)));
  const double f = m - 1.0;
  const double hfsq = 0.5 * f * f, s = f / (2.0 + f), z = s * s, w = z * z;
  const double t1 = w * (3.999999999940941908e-01 +
                         w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
  const double t2 = z * (6.666666666666735130e-01 +
                         w * (2.857142874366239149e-01 +
                              w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
  return k * 6.93147180369123816490e-01 -
         ((hfsq - (s * (hfsq + (t2 + t1)) + k * 1.90821492927058770002e-10)) - f);
}

// sin and cos of x + y (y the tail of x) for |x| <= pi/4 (fdlibm's k_sin.c, k_cos.c).
inline double kernelSin(double x, double y) {
  const double z = x * x, v = z * x;
  const double r = 8.33333333332248946124e-03 +
                   z * (-1.98412698298579493134e-04 +
                        z * (2.75573137070700676789e-06 +
                             z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)));
  return x - ((z * (0.5 * y - v * r) - y) - v * -1.66666666666666324348e-01);
}

inline double kernelCos(double x, double y) {
  const double z = x * x;
  const double r =
      z * (4.16666666666666019037e-02 +
           z * (-1.38888888888741095749e-03 +
                z * (2.48015872894767294178e-05 +
                     z * (-2.75573143513906633035e-07 +
                          z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))));
  const double hz = 0.5 * z, w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + (z * r - x * y));
}

// sin(a) and cos(a) for Box-Muller's angles, 0 <= a < 2 pi: a = n pi/2 + (y0 + y1) with pi/2 in
// three parts (fdlibm's rem_pio2, its second iteration always: 118 bits of pi/2, ample for n <= 4
// even where a is within an ulp of a multiple of pi/2), then the quadrant n mod 4.
inline void sinCos(double a, double& sine, double& cosine) {
  const double shifted = a * 6.36619772367581382433e-01 + 0x1.8p52;  // round(a * 2/pi) below
  const uint64_t quadrant = doubleToBits(shifted) & 3;
  const double n = shifted - 0x1.8p52;
  const double t = a - n * 1.57079632673412561417e+00;  // exact: 33-bit first part
  double w = n * 6.07710050630396597660e-11;
  const double r = t - w;
  w = n * 2.02226624879595063154e-21 - ((t - r) - w);
  const double y0 = r - w, y1 = (r - y0) - w;
  const uint64_t s = doubleToBits(kernelSin(y0, y1)), c = doubleToBits(kernelCos(y0, y1));
  // Quadrants 1 and 3 swap sine and cosine; 2 and 3 negate the sine, 1 and 2 the cosine.
  const uint64_t swap = 0 - (quadrant & 1);
  sine = bitsToDouble(((c & swap) | (s & ~swap)) ^ ((quadrant & 2) << 62));
  cosine = bitsToDouble(((s & swap) | (c & ~swap)) ^ (((quadrant + 1) & 2) << 62));
}

// One Box-Muller pair from two 64-bit draws, as Gpt has always drawn it: u1 in (0, 1] and u2 in
// [0, 1) from the top 53 bits, radius sqrt(-2 log u1), angle 2 pi u2, each value rounded to float
// and then scaled.
inline void boxMullerPair(uint64_t first, uint64_t second, float scale, float& c, float& s) {
  const double u1 = (exactDouble53(first >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = exactDouble53(second >> 11) * 0x1.0p-53;
  const double radius = std::sqrt(-2.0 * logPositiveNormal(u1));
  double sine, cosine;
  sinCos(2.0 * M_PI * u2, sine, cosine);
  c = static_cast<float>(radius * cosine) * scale;
  s = static_cast<float>(radius * sine) * scale;
}

}  // namespace
