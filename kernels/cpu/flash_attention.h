// Flash attention on the CPU: causal (optionally sliding-window, grouped-query) attention computed
// tile by tile, queryBlock query rows against keyBlock keys, with an online softmax, so that
// nothing of size [T, T] is ever stored: memory O(T) per (sample, head). Tiles that no query of the
// tile sees are never computed. The backward recomputes each tile's probabilities from the two
// floats per row the forward kept. Products go to matmul (single-threaded inside the tasks), the
// row work to a TransformerKernels table (any ISA: the tests compare them). Past one key tile,
// each thread reads its task's heads from head-major copies it keeps between calls: 2 seq x
// headDim floats in the forward (k, v), (3 group + 4) in the backward (q, dCtx, dq of each query
// head of the group; k, v, dk, dv), 59 MB a thread at seq 32768 and headDim 64.
#pragma once

#include <cstddef>

#include "kernels/attention.h"
#include "kernels/cpu/transformer_kernels.h"

namespace ds::kernels {

// The tile sizes `s` runs with: its tiling's where set, else 64 query rows (128 from seq 2048 on)
// against as many keys as keep the backward's working set of a tile (see flash_attention.cc)
// within half the L2 cache.
struct AttentionTiles {
  size_t queryBlock, keyBlock;
};
AttentionTiles attentionTiles(const AttentionShape& s);

// ctx [samples * seq, heads * headDim] = softmax(q k^T / sqrt(headDim)) v, with dropout on the
// probabilities when `dropout` is not null; stats [statsSize()] receive each row's softmax
// statistics for the backward.
void flashAttentionForward(const TransformerKernels& k, const AttentionShape& s, const float* qkv,
                           float* ctx, float* stats, const AttentionDropout* dropout);

// dqkv [samples * seq, qkvStride] (every column written) from dCtx, given the forward's qkv, ctx
// and stats and the same dropout.
void flashAttentionBackward(const TransformerKernels& k, const AttentionShape& s,
                            const float* qkv, const float* ctx, const float* stats,
                            const float* dCtx, float* dqkv, const AttentionDropout* dropout);

}  // namespace ds::kernels
