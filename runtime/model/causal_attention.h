// The GPT block's attention core: causal softmax(q k^T / sqrt(d)) v over [q | k | v] rows, and
// its backward, computed per block of query rows over only the key columns those rows can see
// (the masked upper triangle, and what lies before a sliding window, is never multiplied).
// Rotary, the qk norm and dropout stay in the block (gpt_block.cc), between these calls. The
// products run on `acc` (the model passes its own; tests and bench_attention take the CPU
// backend) and `k` is its kernel table (on the CPU backend any ISA's, which the tests compare).
#pragma once

#include <cstddef>

#include "kernels/accelerator.h"

namespace ds::runtime::gpt {

// Query rows per block. bench_attention on a shared 2-core AVX-512 VM (oneDNN), forward and
// backward against the full [T, T] products, 1 thread: at seq 1024 (12 heads of 64) blocks of
// 32 / 64 / 128 / 256 ran 1.53x / 1.65x / 1.57x / 1.43x faster; at seq 128 (4 heads of 64,
// batch 8) 32 / 64 ran 1.23x / 1.19x. At seq <= kAttentionBlock the attention is one block: the
// full [T, T] products, as before blocking.
constexpr size_t kAttentionBlock = 64;

// One (sample-major) batch of attention: qkv rows are [q (heads * headDim) | k (kvHeads *
// headDim) | v (kvHeads * headDim)], query head i reading key/value head i / (heads / kvHeads).
// Query i sees keys max(0, i - window)..i (window >= seq: the whole prefix). `block` is there for
// tests and bench_attention to vary; the model leaves it at kAttentionBlock.
struct AttentionShape {
  size_t samples, seq, heads, kvHeads, headDim, window;
  size_t block = kAttentionBlock;
  size_t qkvStride() const { return (heads + 2 * kvHeads) * headDim; }
  size_t ctxStride() const { return heads * headDim; }
};

// The row blocks of one [T, T] score block and the rectangle each computes: row block b has
// rows [begin(b), end(b)) and key columns [firstKey(b), end(b)), firstKey aligned down to a block
// start so that key block c's rows [begin(c), lastQuery(c)) all have its columns computed.
class AttentionBlocks {
 public:
  AttentionBlocks(size_t seq, size_t window, size_t block = kAttentionBlock);
  size_t count() const { return count_; }
  size_t begin(size_t b) const { return b * block_; }
  size_t end(size_t b) const { return b + 1 == count_ ? seq_ : (b + 1) * block_; }
  size_t firstKey(size_t b) const;
  size_t lastQuery(size_t c) const;

 private:
  size_t seq_, window_, block_, count_;
};

// probs [samples, heads, T, T] = causal softmax of the scaled scores on the rectangles of
// AttentionBlocks (row block b's rows by columns [firstKey(b), end(b))), exactly zero there where a
// query does not see a key. Nothing outside them is written, and nothing below reads there: at
// GPT-2 small's T = 1024 the zeros beyond them were 47% of the probabilities' writes (the forward
// 7-10% faster without them, bench_attention), with a sliding window of W keys T - W - 64 a row.
// When ctx is not null also ctx [samples * T, heads * headDim] = probs v, while each block is in
// cache (callers with attention dropout pass null and call attentionContext on the dropped-out
// probabilities instead: gpt::dropAttentionProbs keeps to the rectangles too).
void attentionProbs(const kernels::TransformerKernels& k, const AttentionShape& s, const float* qkv,
                    float* probs, float* ctx,
                    kernels::Accelerator& acc = kernels::accelerator(kernels::DeviceKind::Cpu));
void attentionContext(const AttentionShape& s, const float* qkv, const float* probs, float* ctx,
                      kernels::Accelerator& acc = kernels::accelerator(kernels::DeviceKind::Cpu));

// Backward, first half: dProbs = dCtx v^T (on the rectangles attentionProbs computed; the rest of
// dProbs is left as it was) and the v columns of dqkv = sum over the group's heads of probs^T dCtx.
// `probs` is what the forward multiplied v with (after dropout, if any).
void attentionBackwardValues(
    const AttentionShape& s, const float* qkv, const float* probs, const float* dCtx, float* dProbs,
    float* dqkv, kernels::Accelerator& acc = kernels::accelerator(kernels::DeviceKind::Cpu));
// Second half, after the caller applied dropout's mask to dProbs: dProbs becomes d(scores) in
// place, and the q and k columns of dqkv are written from it. `probs` is the softmax (before
// dropout).
void attentionBackwardScores(
    const kernels::TransformerKernels& k, const AttentionShape& s, const float* qkv,
    const float* probs, float* dProbs, float* dqkv,
    kernels::Accelerator& acc = kernels::accelerator(kernels::DeviceKind::Cpu));

}  // namespace ds::runtime::gpt
