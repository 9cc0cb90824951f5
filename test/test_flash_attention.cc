// Flash attention (kernels/cpu/flash_attention.h) against a float64 reference written out here
// over the whole [T, T] matrix: forward and backward, plain, sliding-window and grouped-query
// attention, with and without dropout (the mask drawn from the dropout kernel's hash), at
// sequences up to 2048, on every instruction-set path (which must agree bitwise), at several tile
// sizes, and with the backward's two pass layouts (which must agree bitwise).
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/transformer_kernels.h"
#include "test/attention_reference.h"
#include "test/float_arrays.h"
#include "test/skip.h"

using ds::kernels::AttentionBackwardPasses;
using ds::kernels::AttentionDropout;
using ds::kernels::AttentionShape;
using ds::kernels::KernelIsa;
using ds::kernels::TransformerKernels;
using ds::test::AttentionOutputs;
using ds::test::attentionReference;
using ds::test::bitwiseEqual;
using ds::test::ReferenceDropout;
using ds::test::randoms;

namespace {

AttentionOutputs flash(const TransformerKernels& k, const AttentionShape& s, const std::vector<float>& qkv,
              const std::vector<float>& dCtx, const ReferenceDropout* drop) {
  AttentionOutputs o{std::vector<float>(dCtx.size(), NAN), std::vector<float>(qkv.size(), NAN)};
  std::vector<float> stats(s.statsSize(), NAN);
  const AttentionDropout* spec = drop ? &drop->spec : nullptr;
  ds::kernels::flashAttentionForward(k, s, qkv.data(), o.ctx.data(), stats.data(), spec);
  ds::kernels::flashAttentionBackward(k, s, qkv.data(), o.ctx.data(), stats.data(), dCtx.data(),
                                      o.dqkv.data(), spec);
  return o;
}

// |got - want| <= tolerance x (the largest |want| of the array): sums of T terms in fp32.
void checkClose(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                double tolerance) {
  REQUIRE(got.size() == want.size());
  double largest = 0, worst = 0;
  size_t at = 0;
  for (float w : want) largest = std::max(largest, std::fabs(double(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::isnan(got[i]) ? INFINITY : std::fabs(double(got[i]) - want[i]);
    if (e > worst) worst = e, at = i;
  }
  INFO(what << ": worst error " << worst << " at " << at << " (" << got[at] << " against "
            << want[at] << "), largest value " << largest);
  CHECK(worst <= tolerance * largest);
}

struct Case {
  size_t samples, seq, heads, kvHeads, headDim, window;
  double dropout;
  size_t queryBlock, keyBlock;
};

std::string describe(const Case& c) {
  return "samples " + std::to_string(c.samples) + ", seq " + std::to_string(c.seq) + ", heads " +
         std::to_string(c.heads) + "/" + std::to_string(c.kvHeads) + " of " +
         std::to_string(c.headDim) + ", window " + std::to_string(c.window) + ", dropout " +
         std::to_string(c.dropout) + ", tiles " + std::to_string(c.queryBlock) + "x" +
         std::to_string(c.keyBlock);
}

void checkAgainstReference(const TransformerKernels& k, const Case& c) {
  INFO(describe(c));
  AttentionShape s{c.samples, c.seq, c.heads, c.kvHeads, c.headDim, std::min(c.window, c.seq)};
  s.tiling.queryBlock = c.queryBlock;
  s.tiling.keyBlock = c.keyBlock;
  const std::vector<float> qkv = randoms(s.samples * s.seq * s.qkvStride(), c.seq + c.kvHeads),
                           dCtx = randoms(s.samples * s.seq * s.ctxStride(), 3 * c.seq + 1);
  const ReferenceDropout drop(c.dropout, c.samples, 7 * c.seq * c.seq);
  const ReferenceDropout* used = c.dropout > 0 ? &drop : nullptr;
  const AttentionOutputs want = attentionReference(s, qkv, dCtx, used);
  const AttentionOutputs got = flash(k, s, qkv, dCtx, used);
  checkClose(got.ctx, want.ctx, "ctx", 1e-5);
  checkClose(got.dqkv, want.dqkv, "dqkv", 2e-5);
  // The other pass layout gives the very same bits.
  for (AttentionBackwardPasses passes :
       {AttentionBackwardPasses::Fused, AttentionBackwardPasses::Split}) {
    s.tiling.passes = passes;
    CHECK(bitwiseEqual(flash(k, s, qkv, dCtx, used).dqkv, got.dqkv));
  }
}

// Small sequences at many tilings (a tile larger than the sequence, tiles that do not divide it,
// keys wider than queries and narrower), windows inside a tile and across tiles, GQA and
// multi-query, dropout; then the long ones.
const Case kCases[] = {
    {1, 1, 1, 1, 8, 1000, 0.0, 0, 0},     {2, 37, 4, 4, 8, 1000, 0.0, 16, 32},
    {2, 37, 4, 2, 8, 1000, 0.0, 16, 8},   {2, 37, 4, 1, 8, 5, 0.0, 8, 16},
    {2, 37, 4, 2, 8, 0, 0.0, 16, 16},     {1, 100, 2, 1, 16, 20, 0.0, 16, 32},
    {2, 70, 4, 2, 8, 1000, 0.3, 16, 16},  {2, 70, 4, 4, 8, 9, 0.25, 32, 16},
    {1, 130, 3, 3, 24, 1000, 0.0, 0, 0},  {1, 512, 2, 1, 64, 1000, 0.1, 0, 0},
    {1, 2048, 2, 1, 64, 1000, 0.0, 0, 0}, {1, 2048, 1, 1, 64, 300, 0.1, 64, 128},
};

void checkIsa(KernelIsa isa) {
  if (ds::test::skipUnless(ds::kernels::kernelIsaSupported(isa),
                           std::string("this CPU lacks ") + ds::kernels::kernelIsaName(isa) +
                               ": that path of flash attention is not tested here"))
    return;
  const TransformerKernels& k = ds::kernels::transformerKernels(isa);
  for (const Case& c : kCases)
    if (isa == KernelIsa::Scalar || c.seq <= 512) checkAgainstReference(k, c);
  // The paths agree bitwise (the long cases against the scalar path's own results).
  const Case c{2, 300, 4, 2, 32, 40, 0.2, 64, 64};
  AttentionShape s{c.samples, c.seq, c.heads, c.kvHeads, c.headDim, c.window};
  const std::vector<float> qkv = randoms(s.samples * s.seq * s.qkvStride(), 5),
                           dCtx = randoms(s.samples * s.seq * s.ctxStride(), 6);
  const ReferenceDropout drop(c.dropout, c.samples, 0);
  const AttentionOutputs here = flash(k, s, qkv, dCtx, &drop),
                scalar = flash(ds::kernels::transformerKernels(KernelIsa::Scalar), s, qkv, dCtx,
                               &drop);
  CHECK(bitwiseEqual(here.ctx, scalar.ctx));
  CHECK(bitwiseEqual(here.dqkv, scalar.dqkv));
}

}  // namespace

TEST_CASE("flash attention: the scalar path against float64 up to seq 2048", "[attention]") {
  checkIsa(KernelIsa::Scalar);
}

TEST_CASE("flash attention: the AVX2 path against float64 and the scalar path", "[attention]") {
  checkIsa(KernelIsa::Avx2);
}

TEST_CASE("flash attention: the AVX-512 path against float64 and the scalar path",
          "[attention]") {
  checkIsa(KernelIsa::Avx512);
}

TEST_CASE("flash attention: every tiling gives the same attention within rounding",
          "[attention]") {
  const TransformerKernels& k = ds::kernels::transformerKernels();
  AttentionShape s{2, 200, 4, 2, 16, 70};
  const std::vector<float> qkv = randoms(s.samples * s.seq * s.qkvStride(), 8),
                           dCtx = randoms(s.samples * s.seq * s.ctxStride(), 9);
  const AttentionOutputs base = flash(k, s, qkv, dCtx, nullptr);
  for (size_t q : {size_t{16}, size_t{64}, size_t{256}})
    for (size_t key : {size_t{16}, size_t{48}, size_t{512}}) {
      INFO("tiles " << q << "x" << key);
      s.tiling.queryBlock = q;
      s.tiling.keyBlock = key;
      const AttentionOutputs o = flash(k, s, qkv, dCtx, nullptr);
      checkClose(o.ctx, base.ctx, "ctx", 1e-5);
      checkClose(o.dqkv, base.dqkv, "dqkv", 1e-5);
    }
}

TEST_CASE("flash attention: the default tiles follow the L2 cache within 64..512 keys",
          "[attention]") {
  CHECK(ds::kernels::attentionTiles(AttentionShape{8, 1024, 12, 12, 64, 1024}).queryBlock == 64);
  AttentionShape s{1, 4096, 12, 12, 64, 4096};
  const ds::kernels::AttentionTiles t = ds::kernels::attentionTiles(s);
  CHECK(t.queryBlock == 128);
  CHECK(t.keyBlock >= 64);
  CHECK(t.keyBlock <= 512);
  CHECK(t.keyBlock % 64 == 0);
  s.tiling.queryBlock = 32;
  s.tiling.keyBlock = 96;
  CHECK(ds::kernels::attentionTiles(s).queryBlock == 32);
  CHECK(ds::kernels::attentionTiles(s).keyBlock == 96);
}
