// Causal attention's shape, tiling and dropout as every backend takes them
// (Accelerator::attentionForward/Backward). Attention never stores its [T, T] probabilities: only
// two floats per query row (the softmax's row maximum and 1 / row sum) are kept for the backward,
// which recomputes the probabilities tile by tile (flash attention). The CPU implementation is
// kernels/cpu/flash_attention.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::kernels {

// How the backward spreads its work: Fused, one task per (sample, key/value head) computing dQ,
// dK and dV in one sweep of the tiles (no tile computed twice); Split, one pass of tasks per
// (sample, key/value head, key tile) for dK and dV, then one per (sample, head, query tile) for dQ,
// which recomputes the scores and their gradient a second time but gives every thread work when
// samples x heads is small. Both give the same bits. Auto picks Split when samples x key/value
// heads is below twice the threads.
enum class AttentionBackwardPasses { Auto, Fused, Split };

// The CPU backend's tiles: queryBlock query rows against keyBlock keys at a time (0: its own
// choice, flash_attention.h's attentionTiles). A GPU kernel tiles as it must and ignores these.
struct AttentionTiling {
  size_t queryBlock = 0, keyBlock = 0;
  AttentionBackwardPasses passes = AttentionBackwardPasses::Auto;
};

// One (sample-major) batch of attention: qkv rows are [q (heads * headDim) | k (kvHeads *
// headDim) | v (kvHeads * headDim)], query head i reading key/value head i / (heads / kvHeads).
// Query i sees keys max(0, i - window)..i (window >= seq: the whole prefix), as flash-attention's
// window_size (window, 0), which NeoX's sliding-window-width sets.
struct AttentionShape {
  size_t samples, seq, heads, kvHeads, headDim, window;
  AttentionTiling tiling = {};
  size_t qkvStride() const { return (heads + 2 * kvHeads) * headDim; }
  size_t ctxStride() const { return heads * headDim; }
  // Floats of the softmax statistics the forward writes and the backward reads: [samples, heads,
  // 2, seq], the row maxima then 1 / row sums of each (sample, head).
  size_t statsSize() const { return samples * heads * 2 * seq; }
};

// Attention dropout on the probabilities, with the mask the dropout kernel draws
// (TransformerKernels::dropout): element (sample b, head h, query i, key j) is element
// firstElement + (h * seq + i) * seq + j of sample b's mask, drawn from sampleBases[b]. A model
// rank holding heads from g on passes firstElement = g * seq * seq, so every rank draws the masks
// the whole model would.
struct AttentionDropout {
  uint32_t threshold;  // the dropout kernel's: drop when the hash's top 24 bits are below p * 2^24
  float keepScale;     // 1 / (1 - p)
  const uint64_t* sampleBases;
  uint64_t firstElement;
};

}  // namespace ds::kernels
