// The block-skipping causal attention (runtime/model/causal_attention.h) against the full-[T, T]
// computation it replaced, written out here: within rounding above one block, bitwise at or below
// it, masked probabilities exactly zero, for plain and sliding-window attention and for GQA.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/model/causal_attention.h"
#include "runtime/model/gpt_block.h"
#include "test/float_arrays.h"

using ds::kernels::matmul;
using ds::kernels::TransformerKernels;
using ds::runtime::gpt::AttentionBlocks;
using ds::runtime::gpt::AttentionShape;
using ds::runtime::gpt::kAttentionBlock;

using ds::test::bitwiseEqual;
using ds::test::randoms;

namespace {

struct Results {
  std::vector<float> probs, ctx, dProbs, dqkv;
};

// The computation before row blocks: every product over the whole [T, T] score block.
Results fullReference(const TransformerKernels& k, const AttentionShape& s,
                      const std::vector<float>& qkv, const std::vector<float>& dCtx) {
  const size_t T = s.seq, H = s.heads, KV = s.kvHeads, d = s.headDim, Q = s.qkvStride(),
               hq = s.ctxStride(), group = H / KV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Results r{std::vector<float>(s.samples * H * T * T), std::vector<float>(s.samples * T * hq),
            std::vector<float>(s.samples * H * T * T), std::vector<float>(qkv.size())};
  for (size_t b = 0; b < s.samples; ++b)
    for (size_t kvHead = 0; kvHead < KV; ++kvHead)
      for (size_t j = 0; j < group; ++j) {
        const size_t head = kvHead * group + j, pAt = (b * H + head) * T * T;
        const size_t qAt = b * T * Q + head * d, kAt = b * T * Q + hq + kvHead * d,
                     vAt = kAt + KV * d;
        float* p = r.probs.data() + pAt;
        float* dS = r.dProbs.data() + pAt;
        const float* dc = dCtx.data() + b * T * hq + head * d;
        const float beta = j ? 1.0f : 0.0f;
        matmul(false, true, T, T, d, scale, qkv.data() + qAt, Q, qkv.data() + kAt, Q, 0.0f, p, T);
        k.causalSoftmaxForward(p, T, s.window);
        matmul(false, false, T, d, T, 1.0f, p, T, qkv.data() + vAt, Q, 0.0f,
               r.ctx.data() + b * T * hq + head * d, hq);
        matmul(false, true, T, T, d, 1.0f, dc, hq, qkv.data() + vAt, Q, 0.0f, dS, T);
        matmul(true, false, T, d, T, 1.0f, p, T, dc, hq, beta, r.dqkv.data() + vAt, Q);
        k.softmaxBackward(dS, p, T);
        matmul(false, false, T, d, T, scale, dS, T, qkv.data() + kAt, Q, 0.0f, r.dqkv.data() + qAt,
               Q);
        matmul(true, false, T, d, T, scale, dS, T, qkv.data() + qAt, Q, beta, r.dqkv.data() + kAt,
               Q);
      }
  return r;
}

Results blocked(const TransformerKernels& k, const AttentionShape& s, const std::vector<float>& qkv,
                const std::vector<float>& dCtx) {
  const size_t T = s.seq, H = s.heads;
  Results r{std::vector<float>(s.samples * H * T * T, NAN),
            std::vector<float>(s.samples * T * s.ctxStride()),
            std::vector<float>(s.samples * H * T * T, NAN), std::vector<float>(qkv.size())};
  ds::runtime::gpt::attentionProbs(k, s, qkv.data(), r.probs.data(), r.ctx.data());
  ds::runtime::gpt::attentionBackwardValues(s, qkv.data(), r.probs.data(), dCtx.data(),
                                            r.dProbs.data(), r.dqkv.data());
  ds::runtime::gpt::attentionBackwardScores(k, s, qkv.data(), r.probs.data(), r.dProbs.data(),
                                            r.dqkv.data());
  return r;
}

void checkClose(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5f + 1e-4f * std::fabs(want[i])) && bad++ == 0)
      first = i;
  INFO(what << ": " << bad << " of " << got.size() << " differ, first at " << first << ": "
            << got[first] << " against " << want[first]);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("causal attention by row blocks matches the full-T computation", "[attention]") {
  const TransformerKernels& k = ds::kernels::transformerKernels();
  // The model's block size, and a small one for many blocks per sequence. Sequences below, at,
  // and above one block (not a multiple of it); heads 4 over 1, 2 (GQA) or 4 kv heads.
  for (size_t B : {kAttentionBlock, size_t{16}})
    for (size_t T : {B / 2 + 3, B, 2 * B + B / 2 + 1})
      for (size_t kvHeads : {size_t{1}, size_t{2}, size_t{4}})
        for (size_t window : {T, size_t{0}, size_t{5}, B + 6}) {
          AttentionShape s{2, T, 4, kvHeads, 8, std::min(window, T)};
          s.block = B;
          INFO("block " << B << ", seq " << T << ", kv heads " << kvHeads << ", window "
                        << s.window);
          const std::vector<float> qkv = randoms(s.samples * T * s.qkvStride(), T + kvHeads),
                                   dCtx = randoms(s.samples * T * s.ctxStride(), 7 * T + window);
          const Results want = fullReference(k, s, qkv, dCtx), got = blocked(k, s, qkv, dCtx);
          // Within the rectangles every masked probability is exactly zero (the products read
          // them); outside them nothing is written (blocked() filled probs with NaN).
          // Outside them every key is masked, so the reference holds zeros there: compared below
          // with those zeros put in.
          const AttentionBlocks blocks(T, s.window, B);
          std::vector<float> probs = got.probs;
          for (size_t i = 0; i < probs.size(); ++i) {
            const size_t row = i / T % T, col = i % T, rb = row / B;
            if (col < blocks.firstKey(rb) || col >= blocks.end(rb)) {
              REQUIRE(std::isnan(probs[i]));
              probs[i] = 0.0f;
            } else if (col > row || col + s.window < row) {
              REQUIRE(probs[i] == 0.0f);
            }
          }
          if (T <= B) {  // one block: the very same products
            CHECK(bitwiseEqual(probs, want.probs));
            CHECK(bitwiseEqual(got.ctx, want.ctx));
            CHECK(bitwiseEqual(got.dqkv, want.dqkv));
          }
          checkClose(probs, want.probs, "probs");
          checkClose(got.ctx, want.ctx, "ctx");
          checkClose(got.dqkv, want.dqkv, "dqkv");
        }
}

TEST_CASE("causal attention: the context after dropout equals the fused one on the same probs",
          "[attention]") {
  const TransformerKernels& k = ds::kernels::transformerKernels();
  const size_t T = 2 * kAttentionBlock + 9;
  const AttentionShape s{2, T, 4, 2, 8, 40};
  const std::vector<float> qkv = randoms(s.samples * T * s.qkvStride(), 3);
  std::vector<float> probs(s.samples * s.heads * T * T), fused(s.samples * T * s.ctxStride()),
      apart(fused.size());
  ds::runtime::gpt::attentionProbs(k, s, qkv.data(), probs.data(), fused.data());
  ds::runtime::gpt::attentionContext(s, qkv.data(), probs.data(), apart.data());
  CHECK(bitwiseEqual(fused, apart));
}

TEST_CASE("attention blocks: each rectangle holds every key its rows see", "[attention]") {
  for (size_t T : {size_t{1}, size_t{7}, size_t{64}, size_t{65}, size_t{200}, size_t{1024}})
    for (size_t window : {T, size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{100}}) {
      const size_t w = std::min(window, T), B = kAttentionBlock;
      INFO("seq " << T << ", window " << w);
      const AttentionBlocks blocks(T, w);
      CHECK(blocks.count() == (T + B - 1) / B);
      for (size_t c = 0; c < blocks.count(); ++c) {
        CHECK(blocks.begin(c) < blocks.end(c));
        CHECK(blocks.end(c) == (c + 1 == blocks.count() ? T : blocks.begin(c + 1)));
      }
      for (size_t i = 0; i < T; ++i) {
        const size_t rb = i / B, firstSeen = i > w ? i - w : 0;
        CHECK(blocks.firstKey(rb) <= firstSeen);  // the scores and P * V see every visible key
        // The key blocks row i sees: their dV and dK sums run over row i, and its rectangle
        // covers them.
        for (size_t c = firstSeen / B; c <= rb; ++c) {
          CHECK(i < blocks.lastQuery(c));
          CHECK(blocks.firstKey(rb) <= blocks.begin(c));
        }
        // Rows past a key block's lastQuery see none of its keys.
        for (size_t c = 0; c < blocks.count(); ++c)
          if (i >= blocks.lastQuery(c)) CHECK(firstSeen >= blocks.end(c));
      }
      // The rows dK and dV read for a key block all computed its columns.
      for (size_t c = 0; c < blocks.count(); ++c)
        for (size_t i = blocks.begin(c); i < blocks.lastQuery(c); ++i)
          CHECK(blocks.firstKey(i / B) <= blocks.begin(c));
    }
}

TEST_CASE("attention dropout keeps to the rectangles, with the whole tensor's masks there",
          "[attention]") {
  const std::vector<uint64_t> sampleIds{11, 42};
  const ds::runtime::gpt::DropoutKey key{&sampleIds, 3};
  for (size_t window : {size_t{1000}, size_t{20}}) {
    const size_t T = 3 * 16 + 5, H = 3;
    AttentionShape s{2, T, H, H, 8, std::min(window, T)};
    s.block = 16;
    INFO("window " << s.window);
    const AttentionBlocks blocks(T, s.window, s.block);
    const std::vector<float> in = randoms(s.samples * H * T * T, 5);
    std::vector<float> whole = in;
    ds::runtime::gpt::applyDropout(whole.data(), s.samples, H * T * T, 0.3f, key, 1, 7 * T * T);
    std::vector<float> out(in.size(), NAN), inPlace = in;
    ds::runtime::gpt::dropAttentionProbs(s, in.data(), out.data(), 0.3f, key, 1, 7 * T * T);
    ds::runtime::gpt::dropAttentionProbs(s, inPlace.data(), inPlace.data(), 0.3f, key, 1,
                                         7 * T * T);
    size_t dropped = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const size_t row = i / T % T, col = i % T, rb = row / s.block;
      if (col >= blocks.firstKey(rb) && col < blocks.end(rb)) {
        REQUIRE(out[i] == whole[i]);
        REQUIRE(inPlace[i] == whole[i]);
        dropped += whole[i] == 0.0f;
      } else {
        REQUIRE(std::isnan(out[i]));     // not written
        REQUIRE(inPlace[i] == in[i]);    // not touched
      }
    }
    CHECK(dropped > 0);  // the masks did drop something
  }
}
