// The transformer kernels: every instruction-set path this CPU has gives bitwise the scalar
// path's results (transformer_kernels.h promises it), and the scalar path agrees with plain
// double-precision formulas. Each SIMD path is its own test case, and a path the CPU lacks is
// skipped by name (exit 77 under CTest, test/skip.h), never passed.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/philox.h"
#include "kernels/cpu/transformer_kernels.h"
#include "test/skip.h"
#include "test/float_arrays.h"

using ds::kernels::KernelIsa;
using ds::kernels::TransformerKernels;
using ds::kernels::Unit;

using ds::test::bitwiseEqual;
using ds::test::randoms;

namespace {

std::vector<uint64_t> uniformDraws(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> v(n);
  for (uint64_t& x : v) x = rng();
  return v;
}

// Runs every kernel on fixed inputs (sizes not multiples of 16, so the tails run) and returns
// all their outputs back to back.
std::vector<float> runAll(const TransformerKernels& k) {
  const size_t rows = 7, dim = 37, t = 19, vocab = 53, ff = 29;
  std::vector<float> out;
  auto append = [&](const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); };
  const auto x = randoms(rows * dim, 1), w = randoms(dim, 2), b = randoms(dim, 3),
             g = randoms(rows * dim, 4);
  std::vector<float> y(rows * dim), mean(rows), rstd(rows), dx(rows * dim), dw(dim, 0.5f),
      db(dim, 0.25f);
  k.layerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, dim,
                     1e-5f);
  k.layerNormBackward(dx.data(), dw.data(), db.data(), g.data(), x.data(), mean.data(),
                      rstd.data(), w.data(), rows, dim);
  append(y), append(mean), append(rstd), append(dx), append(dw), append(db);
  k.rmsNormForward(y.data(), mean.data(), x.data(), w.data(), rows, dim, 1e-8f);
  k.rmsNormBackward(dx.data(), dw.data(), g.data(), x.data(), mean.data(), w.data(), rows, dim,
                    1e-8f);
  append(y), append(mean), append(dx), append(dw);
  std::vector<float> a = randoms(rows * 2 * ff, 5, 3.0f), act(rows * 2 * ff), dact(rows * 2 * ff);
  k.unitForward(Unit::Gelu, act.data(), a.data(), a.size());
  k.unitBackward(Unit::Gelu, dact.data(), a.data(), a.data(), a.size());
  append(act), append(dact);
  k.gatedForward(Unit::Gelu, act.data(), a.data(), rows, ff);
  k.gatedBackward(Unit::Gelu, dact.data(), g.data(), a.data(), rows, ff);
  append(act), append(dact);
  for (Unit u :
       {Unit::Relu, Unit::Silu, Unit::Sigmoid, Unit::Identity, Unit::Softsign, Unit::Mish}) {
    k.unitForward(u, act.data(), a.data(), a.size());
    k.unitBackward(u, dact.data(), a.data(), a.data(), a.size());
    append(act), append(dact);
    k.gatedForward(u, act.data(), a.data(), rows, ff);
    k.gatedBackward(u, dact.data(), g.data(), a.data(), rows, ff);
    append(act), append(dact);
  }
  for (float eps : {1e-8f, 6.0f}) {  // 6: some rows' norms are clamped
    float dg = 0.5f;
    k.scaleNormForward(y.data(), mean.data(), x.data(), 1.3f, rows, dim, eps);
    k.scaleNormBackward(dx.data(), &dg, g.data(), x.data(), mean.data(), 1.3f, rows, dim, eps);
    append(y), append(mean), append(dx);
    out.push_back(dg);
  }
  for (size_t window : {t, size_t{0}, size_t{5}, size_t{17}}) {  // full, then sliding windows
    std::vector<float> s = randoms(t * t, 6, 4.0f), dp = randoms(t * t, 7);
    k.causalSoftmaxForward(s.data(), t, window);
    k.softmaxBackward(dp.data(), s.data(), t);
    append(s), append(dp);
    // Flash attention's tiles: rows 5..t-2 against keys 3..t-2 in two tiles, online, then their
    // probabilities recomputed and the scores' gradient.
    const size_t tileRows = t - 6, ld = t;
    std::vector<float> rowMax(tileRows, -INFINITY), rowSum(tileRows), out = randoms(tileRows * 8, 19);
    for (size_t key0 : {size_t{3}, size_t{12}}) {
      s = randoms(tileRows * ld, 16 + key0, 4.0f);
      k.attentionTileSoftmax(s.data(), ld, tileRows, key0 == 3 ? 9 : t - 13, 5, key0, window,
                             rowMax.data(), rowSum.data(), out.data(), 8, 8);
      append(s), append(out), append(rowMax), append(rowSum);
    }
    k.attentionRowsFinish(out.data(), 8, 8, tileRows, rowSum.data());
    append(out), append(rowSum);
    s = randoms(tileRows * ld, 18, 4.0f);
    k.attentionTileProbs(s.data(), ld, tileRows, t - 4, 5, 3, window, rowMax.data(),
                         rowSum.data());
    std::vector<float> dots(tileRows);
    k.rowDots(dots.data(), dp.data(), t, out.data(), 8, tileRows, 8);
    k.attentionTileScoreGrad(dp.data(), s.data(), ld, tileRows, t - 4, dots.data());
    append(s), append(dp), append(dots);
  }
  std::vector<float> r = randoms(rows * 3 * 16, 8), cs = randoms(rows * 3, 9),
                     sn = randoms(rows * 3, 10);
  k.rotary(r.data(), rows, rows, 2, 8, 48, 6, cs.data(), sn.data(), false);
  append(r);
  k.rotary(r.data(), rows, rows, 2, 8, 48, 6, cs.data(), sn.data(), true);
  append(r);
  std::vector<float> logits = randoms(rows * vocab, 11, 5.0f);
  std::vector<int32_t> targets = {0, 52, 3, 17, 9, 9, 40};
  out.push_back(static_cast<float>(k.crossEntropy(logits.data(), targets.data(), rows, vocab, 0.5f)));
  append(logits);
  logits = randoms(rows * vocab, 15, 5.0f);  // NeoX's label -100 and other negatives mask rows
  const std::vector<int32_t> masked = {-100, 52, -1, 17, -100, 9, 40};
  out.push_back(
      static_cast<float>(k.crossEntropy(logits.data(), masked.data(), rows, vocab, 0.5f)));
  append(logits);
  std::vector<float> table = randoms(vocab * dim, 12), pos = randoms(4 * dim, 13);
  k.embeddingForward(y.data(), targets.data(), table.data(), pos.data(), rows, 4, dim);
  append(y);
  std::vector<float> dtable(vocab * dim), dpos(4 * dim);
  k.embeddingBackward(dtable.data(), dpos.data(), targets.data(), g.data(), rows, 4, dim);
  append(dtable), append(dpos);
  k.addBias(y.data(), b.data(), rows, dim);
  k.biasGradient(db.data(), g.data(), rows, dim);
  k.add(y.data(), x.data(), y.size());
  append(y), append(db);
  std::vector<float> dropped(y.size());
  k.dropout(y.data(), dropped.data(), y.size(), 0x9e3779b97f4a7c15ull, 1000003, 5033165, 1.25f);
  std::vector<float> inPlace(x.begin(), x.begin() + 37);
  k.dropout(inPlace.data(), inPlace.data(), 37, 12345, 7, 8388608, 2.0f);
  append(dropped), append(inPlace);
  const std::vector<uint64_t> draws = uniformDraws(38, 14);
  std::vector<float> normal(37);  // odd: the last pair's sine is dropped
  k.normalFromDraws(normal.data(), normal.size(), draws.data(), 0.02f);
  append(normal);
  k.normalFromPhilox(normal.data(), normal.size(), 17, 0x0123456789abcdefull, 2049, 0.02f);
  append(normal);
  return out;
}

// libm's Box-Muller, as Gpt initialised parameters before the kernel existed.
std::vector<float> libmBoxMuller(const std::vector<uint64_t>& draws, size_t n, float scale) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(draws[i] >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(draws[i + 1] >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * M_PI * u2;
    out[i] = static_cast<float>(r * std::cos(a)) * scale;
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(a)) * scale;
  }
  return out;
}

// One test case per instruction-set path, so that CTest shows a path this CPU lacks as skipped
// while the other paths still run.
bool skipUnlessSupported(KernelIsa isa) {
  return ds::test::skipUnless(ds::kernels::kernelIsaSupported(isa),
                              std::string("this CPU lacks ") + ds::kernels::kernelIsaName(isa) +
                                  ": that path of the transformer kernels is not tested here");
}

void checkSimdPath(KernelIsa isa) {
  if (skipUnlessSupported(isa)) return;
  const std::vector<float> scalar = runAll(ds::kernels::transformerKernels(KernelIsa::Scalar));
  CHECK(bitwiseEqual(runAll(ds::kernels::transformerKernels(isa)), scalar));
}

void checkBoxMuller(KernelIsa isa) {
  if (skipUnlessSupported(isa)) return;
  // A million random draws, then the edges: u1 = 1 (radius 0), u1 at its smallest (the largest
  // radius), angles at 0 and at every multiple of pi/2 (where the reduction cancels), and 2 pi.
  std::vector<uint64_t> draws = uniformDraws(1 << 20, 15);
  const uint64_t top = ~0ull, bottom = 0;
  for (uint64_t angle : std::vector<uint64_t>{bottom, top, 1ull << 61, 1ull << 62, 3ull << 61,
                                              (1ull << 61) + 2048, (1ull << 62) - 2048})
    for (uint64_t radius : std::vector<uint64_t>{top, bottom, 1ull << 63})
      draws.insert(draws.end(), {radius, angle});
  const size_t n = draws.size() - 1;  // odd again
  const std::vector<float> want = libmBoxMuller(draws, n, 0.02f);
  std::vector<float> got(n);
  ds::kernels::transformerKernels(isa).normalFromDraws(got.data(), n, draws.data(), 0.02f);
  // fdlibm's functions and glibc's (whose variants differ by CPU) may disagree in a last double
  // bit; after the rounding to float that shows in a few values in a million at most, by one
  // float ulp. Here none differed; a wrong coefficient or reduction would differ in thousands.
  size_t differing = 0;
  for (size_t i = 0; i < n; ++i) {
    if (got[i] == want[i]) continue;
    ++differing;
    CHECK(std::nextafter(got[i], want[i]) == want[i]);
  }
  CHECK(differing <= 4);
  CHECK(got[1 << 20] == 0.0f);  // the first edge pair: u1 = 1, radius 0
}

// Philox's normal draws on a path: any range [first, first + n) is normalFromDraws' pairs on the
// scalar Philox's blocks (draws x1:x0 then x3:x2), and bitwise the scalar path's, odd cuts and
// ranges longer than the kernel's buffer included.
void checkPhiloxNormal(KernelIsa isa) {
  if (skipUnlessSupported(isa)) return;
  const uint64_t seed = 0x5eedull << 40 | 99, stream = 0xfeedfacecafebeefull;
  const size_t total = (1 << 20) + 3;
  std::vector<uint64_t> draws(total + 1);
  for (size_t j = 0; j < draws.size() / 2; ++j) {
    const ds::kernels::PhiloxWords w = ds::kernels::philoxBlock(seed, stream, j);
    draws[2 * j] = static_cast<uint64_t>(w[1]) << 32 | w[0];
    draws[2 * j + 1] = static_cast<uint64_t>(w[3]) << 32 | w[2];
  }
  const TransformerKernels& scalar = ds::kernels::transformerKernels(KernelIsa::Scalar);
  std::vector<float> want(total);
  scalar.normalFromDraws(want.data(), total, draws.data(), 0.5f);
  const TransformerKernels& k = ds::kernels::transformerKernels(isa);
  std::vector<float> whole(total);
  k.normalFromPhilox(whole.data(), total, seed, stream, 0, 0.5f);
  CHECK(bitwiseEqual(whole, want));
  for (const auto& [first, n] : std::vector<std::pair<size_t, size_t>>{
           {1, 1}, {1, 2}, {2, 1}, {7, 2047}, {2047, 2050}, {4096, 4097}, {333333, 100001}}) {
    INFO("elements " << first << " to " << first + n);
    std::vector<float> got(n);
    k.normalFromPhilox(got.data(), n, seed, stream, first, 0.5f);
    CHECK(bitwiseEqual(got, std::vector<float>(want.begin() + first, want.begin() + first + n)));
  }
}

}  // namespace

TEST_CASE("transformer kernels: the scalar path's Philox normals are Box-Muller on Philox's blocks",
          "[kernels]") {
  checkPhiloxNormal(KernelIsa::Scalar);
}

TEST_CASE("transformer kernels: the AVX2 path's Philox normals equal the scalar path's",
          "[kernels]") {
  checkPhiloxNormal(KernelIsa::Avx2);
}

TEST_CASE("transformer kernels: the AVX-512 path's Philox normals equal the scalar path's",
          "[kernels]") {
  checkPhiloxNormal(KernelIsa::Avx512);
}

TEST_CASE("transformer kernels: the AVX2 path equals the scalar path bitwise", "[kernels]") {
  checkSimdPath(KernelIsa::Avx2);
}

TEST_CASE("transformer kernels: the AVX-512 path equals the scalar path bitwise", "[kernels]") {
  checkSimdPath(KernelIsa::Avx512);
}

TEST_CASE("transformer kernels: the scalar path matches double-precision formulas", "[kernels]") {
  const TransformerKernels& k = ds::kernels::transformerKernels(KernelIsa::Scalar);
  SECTION("GeLU (tanh form) and its derivative, including saturated inputs") {
    std::vector<float> x = {-30.0f, -5.0f, -1.0f, -0.1f, 0.0f, 0.3f, 2.0f, 9.0f, 40.0f};
    std::vector<float> y(x.size()), d(x.size());
    k.unitForward(Unit::Gelu, y.data(), x.data(), x.size());
    std::vector<float> ones(x.size(), 1.0f);
    k.unitBackward(Unit::Gelu, d.data(), ones.data(), x.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i], u = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v);
      const double want = 0.5 * v * (1 + std::tanh(u));
      const double dwant = 0.5 * (1 + std::tanh(u)) + 0.5 * v * (1 - std::tanh(u) * std::tanh(u)) *
                                                          std::sqrt(2 / M_PI) *
                                                          (1 + 3 * 0.044715 * v * v);
      CHECK(y[i] == Approx(want).margin(1e-6).epsilon(1e-5));
      CHECK(d[i] == Approx(dwant).margin(1e-6).epsilon(1e-5));
    }
  }
  SECTION("ReLU, SiLU, sigmoid, identity, softsign and Mish, plain and gated, with derivatives") {
    const std::vector<float> x = {-30.0f, -5.0f, -1.0f, -0.1f, 0.0f, 0.3f, 2.0f, 9.0f, 40.0f};
    const std::vector<float> gate = {0.5f, -2.0f, 3.0f, 1.0f, -0.7f, 0.0f, 12.0f, -40.0f, 1.5f};
    const size_t n = x.size();
    std::vector<float> in(x), y(n), d(n), gy(n), gd(2 * n), ones(n, 1.0f);
    in.insert(in.end(), gate.begin(), gate.end());  // one gated row: [x | gate]
    for (Unit u :
         {Unit::Relu, Unit::Silu, Unit::Sigmoid, Unit::Identity, Unit::Softsign, Unit::Mish}) {
      k.unitForward(u, y.data(), x.data(), n);
      k.unitBackward(u, d.data(), ones.data(), x.data(), n);
      k.gatedForward(u, gy.data(), in.data(), 1, n);
      k.gatedBackward(u, gd.data(), ones.data(), in.data(), 1, n);
      auto f = [&](double v) {
        const double s = 1 / (1 + std::exp(-v));
        const double tsp = std::tanh(std::log1p(std::exp(v)));  // Mish's tanh(softplus(v))
        return u == Unit::Relu       ? std::max(v, 0.0)
               : u == Unit::Silu     ? v * s
               : u == Unit::Sigmoid  ? s
               : u == Unit::Softsign ? v / (1 + std::fabs(v))
               : u == Unit::Mish     ? v * tsp
                                     : v;
      };
      auto df = [&](double v) {
        const double s = 1 / (1 + std::exp(-v));
        const double tsp = std::tanh(std::log1p(std::exp(v)));
        return u == Unit::Relu       ? (v > 0 ? 1.0 : 0.0)
               : u == Unit::Silu     ? s * (1 + v * (1 - s))
               : u == Unit::Sigmoid  ? s * (1 - s)
               : u == Unit::Softsign ? 1 / ((1 + std::fabs(v)) * (1 + std::fabs(v)))
               : u == Unit::Mish     ? tsp + v * (1 - tsp * tsp) * s
                                     : 1.0;
      };
      for (size_t i = 0; i < n; ++i) {
        INFO("unit " << static_cast<int>(u) << ", x " << x[i] << ", gate " << gate[i]);
        CHECK(y[i] == Approx(f(x[i])).margin(1e-6).epsilon(1e-5));
        CHECK(d[i] == Approx(df(x[i])).margin(1e-6).epsilon(1e-5));
        CHECK(gy[i] == Approx(x[i] * f(gate[i])).margin(1e-6).epsilon(1e-5));
        CHECK(gd[i] == Approx(f(gate[i])).margin(1e-6).epsilon(1e-5));
        CHECK(gd[n + i] == Approx(x[i] * df(gate[i])).margin(1e-6).epsilon(1e-5));
      }
    }
  }
  SECTION("ScaleNorm: g x / max(|x|, eps), and its gradients by finite differences") {
    const size_t rows = 3, dim = 5;
    std::vector<float> x = randoms(rows * dim, 8), g = randoms(rows * dim, 9);
    for (size_t i = 2 * dim; i < 3 * dim; ++i) x[i] *= 0.01f;  // the last row is clamped
    const float gain = 1.7f, eps = 0.1f;
    std::vector<float> y(rows * dim), norm(rows), dx(rows * dim);
    float dg = 0.0f;
    k.scaleNormForward(y.data(), norm.data(), x.data(), gain, rows, dim, eps);
    k.scaleNormBackward(dx.data(), &dg, g.data(), x.data(), norm.data(), gain, rows, dim, eps);
    auto loss = [&](const std::vector<double>& v, double gg) {  // sum of g * scalenorm(v)
      double total = 0;
      for (size_t r = 0; r < rows; ++r) {
        double n = 0;
        for (size_t i = 0; i < dim; ++i) n += v[r * dim + i] * v[r * dim + i];
        n = std::max(std::sqrt(n), static_cast<double>(eps));
        for (size_t i = 0; i < dim; ++i) total += g[r * dim + i] * gg * v[r * dim + i] / n;
      }
      return total;
    };
    std::vector<double> xd(x.begin(), x.end());
    for (size_t r = 0; r < rows; ++r) {
      double n = 0;
      for (size_t i = 0; i < dim; ++i) n += xd[r * dim + i] * xd[r * dim + i];
      for (size_t i = 0; i < dim; ++i)
        CHECK(y[r * dim + i] ==
              Approx(gain * xd[r * dim + i] / std::max(std::sqrt(n), 0.1)).epsilon(1e-5));
    }
    const double h = 1e-6;
    for (size_t i = 0; i < rows * dim; ++i) {
      std::vector<double> up = xd, down = xd;
      up[i] += h;
      down[i] -= h;
      CHECK(dx[i] ==
            Approx((loss(up, gain) - loss(down, gain)) / (2 * h)).margin(1e-4).epsilon(1e-3));
    }
    CHECK(dg == Approx((loss(xd, gain + h) - loss(xd, gain - h)) / (2 * h)).epsilon(1e-4));
  }
  SECTION("causal softmax rows sum to one over their window (i - W..i), zeros elsewhere") {
    const size_t t = 23;
    for (size_t window : {size_t{100}, t, t - 1, size_t{0}, size_t{1}, size_t{6}}) {
      INFO("window " << window);
      std::vector<float> s = randoms(t * t, 3, 10.0f), orig = s;
      k.causalSoftmaxForward(s.data(), t, window);
      for (size_t i = 0; i < t; ++i) {
        const size_t first = i >= window ? i - window : 0;
        double m = -1e30, sum = 0;
        for (size_t j = first; j <= i; ++j) m = std::max(m, static_cast<double>(orig[i * t + j]));
        for (size_t j = first; j <= i; ++j) sum += std::exp(orig[i * t + j] - m);
        for (size_t j = first; j <= i; ++j)
          CHECK(s[i * t + j] ==
                Approx(std::exp(orig[i * t + j] - m) / sum).margin(1e-7).epsilon(1e-5));
        for (size_t j = 0; j < t; ++j)
          if (j < first || j > i) CHECK(s[i * t + j] == 0.0f);
      }
    }
  }
  SECTION("flash attention's tiles: the online softmax over key tiles is the whole row's") {
    // Values = the identity, so that out (rows x t) accumulates the probabilities themselves.
    const size_t t = 23;
    for (size_t window : {t, size_t{0}, size_t{6}}) {
      INFO("window " << window);
      std::vector<float> whole = randoms(t * t, 3, 10.0f), scores = whole;
      for (size_t i = 0; i < t; ++i)  // scores a row does not see are never read
        for (size_t j = 0; j < t; ++j)
          if (j > i || j + window < i) scores[i * t + j] = NAN;
      k.causalSoftmaxForward(whole.data(), t, window);
      const size_t r0 = 4, rows = t - r0;  // query rows 4..22 against key tiles [0, 5, 13, 23)
      std::vector<float> rowMax(rows, -INFINITY), rowSum(rows), out(rows * t, NAN);
      const size_t bounds[] = {0, 5, 13, t};
      for (size_t c = 0; c < 3; ++c) {
        const size_t key0 = bounds[c], cols = bounds[c + 1] - key0;
        std::vector<float> tile(rows * cols);
        for (size_t i = 0; i < rows; ++i)
          std::copy_n(&scores[(r0 + i) * t + key0], cols, &tile[i * cols]);
        k.attentionTileSoftmax(tile.data(), cols, rows, cols, r0, key0, window, rowMax.data(),
                               rowSum.data(), out.data(), t, t);
        for (size_t i = 0; i < rows; ++i)
          for (size_t j = 0; j < cols; ++j) {
            REQUIRE(!std::isnan(tile[i * cols + j]));  // unseen columns are zeros
            out[i * t + key0 + j] += tile[i * cols + j];
          }
      }
      k.attentionRowsFinish(out.data(), t, t, rows, rowSum.data());
      std::vector<float> again(rows * t);
      for (size_t i = 0; i < rows; ++i)
        std::copy_n(&scores[(r0 + i) * t], t, &again[i * t]);
      k.attentionTileProbs(again.data(), t, rows, t, r0, 0, window, rowMax.data(), rowSum.data());
      for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < t; ++j) {
          INFO("row " << r0 + i << ", column " << j);
          const float want = whole[(r0 + i) * t + j];
          CHECK(out[i * t + j] == Approx(want).margin(1e-7).epsilon(1e-5));
          CHECK(again[i * t + j] == Approx(want).margin(1e-7).epsilon(1e-5));
          if (want == 0.0f) CHECK(again[i * t + j] == 0.0f);
        }
      // The scores' gradient from the row dot, against the whole-row softmax backward.
      std::vector<float> dp = randoms(t * t, 8), tiled(rows * t), dots(rows);
      for (size_t i = 0; i < rows; ++i) std::copy_n(&dp[(r0 + i) * t], t, &tiled[i * t]);
      k.rowDots(dots.data(), again.data(), t, tiled.data(), t, rows, t);
      for (size_t i = 0; i < rows; ++i) {
        double dot = 0.0;
        for (size_t j = 0; j < t; ++j) dot += double(again[i * t + j]) * tiled[i * t + j];
        CHECK(dots[i] == Approx(dot).margin(1e-6).epsilon(1e-5));
      }
      k.softmaxBackward(dp.data(), whole.data(), t);
      k.attentionTileScoreGrad(tiled.data(), again.data(), t, rows, t, dots.data());
      for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < t; ++j)
          CHECK(tiled[i * t + j] == Approx(dp[(r0 + i) * t + j]).margin(1e-6).epsilon(1e-4));
    }
  }
  SECTION("cross-entropy: loss and gradient") {
    const size_t vocab = 41;
    std::vector<float> z = randoms(2 * vocab, 4, 6.0f), orig = z;
    std::vector<int32_t> targets = {5, 40};
    const double loss = k.crossEntropy(z.data(), targets.data(), 2, vocab, 1.0f);
    double want = 0;
    for (size_t r = 0; r < 2; ++r) {
      double m = -1e30, sum = 0;
      for (size_t j = 0; j < vocab; ++j) m = std::max(m, static_cast<double>(orig[r * vocab + j]));
      for (size_t j = 0; j < vocab; ++j) sum += std::exp(orig[r * vocab + j] - m);
      want += std::log(sum) + m - orig[r * vocab + targets[r]];
      for (size_t j = 0; j < vocab; ++j) {
        const double p = std::exp(orig[r * vocab + j] - m) / sum;
        CHECK(z[r * vocab + j] == Approx(p - (j == static_cast<size_t>(targets[r]))).margin(1e-6));
      }
    }
    CHECK(loss == Approx(want).epsilon(1e-6));
  }
  SECTION("cross-entropy: a negative target masks its row (no loss, zero gradient)") {
    const size_t vocab = 41;
    std::vector<float> plain = randoms(3 * vocab, 5, 6.0f), z = plain;
    const std::vector<int32_t> all = {5, 7, 40}, masked = {5, -100, 40};
    const double full = k.crossEntropy(plain.data(), all.data(), 3, vocab, 0.75f);
    const double loss = k.crossEntropy(z.data(), masked.data(), 3, vocab, 0.75f);
    std::vector<float> rows02 = randoms(3 * vocab, 5, 6.0f);
    const std::vector<int32_t> two = {5, 40};
    std::copy(rows02.begin() + 2 * vocab, rows02.end(), rows02.begin() + vocab);
    rows02.resize(2 * vocab);
    CHECK(loss == k.crossEntropy(rows02.data(), two.data(), 2, vocab, 0.75f));
    CHECK(loss < full);
    for (size_t j = 0; j < vocab; ++j) {
      CHECK(z[j] == plain[j]);
      CHECK(z[vocab + j] == 0.0f);
      CHECK(z[2 * vocab + j] == plain[2 * vocab + j]);
    }
  }
  SECTION("dropout: splitmix64's mask, any range of it, in place or not") {
    const size_t n = 10007;
    const uint64_t base = 0x0123456789abcdefull, first = 77;
    const uint32_t threshold = 1u << 22;  // p = 0.25
    const std::vector<float> in = randoms(n, 21);
    std::vector<float> out(n), tail(n - 100), inPlace = in;
    k.dropout(in.data(), out.data(), n, base, first, threshold, 4.0f / 3.0f);
    k.dropout(in.data() + 100, tail.data(), n - 100, base, first + 100, threshold, 4.0f / 3.0f);
    k.dropout(inPlace.data(), inPlace.data(), n, base, first, threshold, 4.0f / 3.0f);
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t h = base + first + i;  // splitmix64's finaliser, written out
      h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
      h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
      h ^= h >> 31;
      const bool keep = (h >> 40) >= threshold;
      kept += keep;
      REQUIRE(out[i] == (keep ? in[i] * (4.0f / 3.0f) : 0.0f));
      REQUIRE(inPlace[i] == out[i]);
      if (i >= 100) REQUIRE(tail[i - 100] == out[i]);
    }
    CHECK(std::fabs(static_cast<double>(kept) / n - 0.75) < 0.02);
  }
  SECTION("exp saturates instead of overflowing; NaN propagates") {
    std::vector<float> s = {1e30f, 0.0f, 0.0f, std::nanf("")};
    k.causalSoftmaxForward(s.data(), 2, 2);
    CHECK(s[0] == 1.0f);
    CHECK(std::isnan(s[3]));
  }
}

TEST_CASE(
    "transformer kernels: the scalar path's normal draws equal libm's Box-Muller after "
    "the rounding to float",
    "[kernels]") {
  checkBoxMuller(KernelIsa::Scalar);
}

TEST_CASE(
    "transformer kernels: the AVX2 path's normal draws equal libm's Box-Muller after the "
    "rounding to float",
    "[kernels]") {
  checkBoxMuller(KernelIsa::Avx2);
}

TEST_CASE(
    "transformer kernels: the AVX-512 path's normal draws equal libm's Box-Muller after "
    "the rounding to float",
    "[kernels]") {
  checkBoxMuller(KernelIsa::Avx512);
}
