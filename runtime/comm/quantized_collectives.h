// ZeRO++'s quantised collectives (Wang et al., 2023; DeepSpeed's partition_parameters.py and
// coalesced_collectives.py), over any Communicator, in block-quantised form
// (runtime/comm/block_quantize.h):
// - qwZ: an all-gather of each rank's weights as int8 in blocks of at most 8000, dequantised on
//   arrival: a quarter of an fp32 gather's bytes (half of a 16-bit one's).
// - qgZ: a reduce-scatter as two all-to-alls of int4 blocks: within each node every rank sends
//   each node peer the chunks of every rank that shares that peer's place in its node; the
//   receiver sums what its node sent (dequantised, in fp32) and quantises the node's partial sums
//   again for the second all-to-all, across nodes among the ranks of its place; the final sum is
//   of the nodes' partial sums. An eighth of an fp32 reduce-scatter's bytes on each hop.
#pragma once

#include <cstddef>

#include "runtime/comm/communicator.h"

namespace ds::runtime {

// qgZ's gradient blocks. DeepSpeed's are about a tensor's shorter side (768 for GPT-2's
// 768 x 3072); int4 rounds every element under a sixteenth of its block's largest to zero, which
// Adam then never moves. With blocks of 512 the 4-rank toy of test_engine_zeropp.cc trained 4%
// behind fp32 in 12 steps, with 64 within 2%, for an eighth more bytes (0.5625 a gradient).
inline constexpr size_t kGradientQuantBlock = 64;

// In `all` (comm.size() x chunk of `type`, rank-major): every rank's `own` chunk (of `type`) as its
// int8 blocks decode it. Collective over comm. Beside the int8 buffers it holds one chunk of fp32.
void quantizedAllGather(Communicator& comm, const void* own, size_t chunk, DType type, void* all);

// `in` (W x chunk of `type`, rank-major over the data group's W = nodes x ranks-per-node ranks,
// data rank d = node(d) x ranks-per-node + place(d)): every rank's contribution to every rank's
// chunk. `out` (chunk of `type`): the sum over the W ranks of their contributions to this rank's
// chunk, through int4 blocks of `block` elements on both hops. `node`: this rank's node (ranks by
// place), `crossNode`: the ranks of its place (ranks by node). Collective over both. Beside the
// int4 buffers (about 0.14 x the fp32 input) it holds two chunks of fp32.
void quantizedReduceScatter(Communicator& node, Communicator& crossNode, const void* in, void* out,
                            size_t chunk, DType type, size_t block = kGradientQuantBlock);

}  // namespace ds::runtime
