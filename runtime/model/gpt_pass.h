// Internal to the GPT model (gpt.cc, gpt_passes.cc): what a pass keeps and shares between its
// pieces (the embedding, the blocks, the head), and the profiler's module numbering.
#pragma once

#include <chrono>
#include <vector>

#include "runtime/model/gpt_block.h"
#include "runtime/model/model.h"
#include "runtime/parallel/vocab_parallel_embedding.h"

namespace ds::runtime {

using gpt::BlockActivations;
using gpt::BlockLayout;
using gpt::sized;
using Clock = std::chrono::steady_clock;

// What one micro-batch keeps between its forward and backward: the whole model uses one; a
// pipeline stage one per pipe buffer (micro-batches in flight).
struct GptBuffer {
  std::vector<BlockActivations> blocks;  // one per block held; only .input when checkpointing
  kernels::DeviceArray<float> last;      // [N, h] the last block's output
  kernels::DeviceArray<float> grad;      // stage with the head: d(loss)/d(last) from its forward
  Batch batch;                           // stage: the micro-batch (ids, sample ids for dropout)
  kernels::DeviceArray<int32_t> inputIds, targetIds;  // the pass's token ids on the device
};

// One pass's shape and switches, shared by its pieces.
struct GptPass {
  const Batch& batch;
  const int32_t* inputIds = nullptr;   // batch's, in device memory (Gpt::deviceIds)
  const int32_t* targetIds = nullptr;  // null where the batch has none
  size_t seq = 0;
  gpt::BlockShape shape{};
  bool train = false, logits = false, checkpointing = false, dropout = false;
  size_t counted = 0;  // targets in the loss
  gpt::DropoutKey keys{};
  double* times = nullptr;
  Clock::time_point forwardStart{};
  // The rows the embedding's output holds: all of them with Megatron's sequence parallelism
  // (scattered after the embedding's dropout, as NeoX does), else the pass's.
  gpt::BlockShape embeddedRows() const {
    return shape.sequence ? gpt::wholeRows(shape.samples, shape.seq) : shape;
  }
  const gpt::DropoutKey* dropoutFor(size_t layer) {
    if (!dropout) return nullptr;
    keys.layer = layer;
    return &keys;
  }
};

// Everything a pass keeps or reuses, sized on first use and kept for the next micro-batch.
class GptActivations {
 public:
  GptActivations(const GptConfig& c, kernels::Accelerator& acc, const gpt::BlockSlice& s,
                 const VocabSlice& v)
      : runner(c, acc, s), moeRunner(c, acc, s, true), moe(c.moe), slice(s), vocab(v) {}
  gpt::BlockRunner runner;     // the dense blocks'
  gpt::BlockRunner moeRunner;  // the MoE layers' (moe-num-experts > 1)
  MoeConfig moe;
  gpt::BlockRunner& runnerFor(size_t block) {
    return moe.isMoeLayer(static_cast<int>(block)) ? moeRunner : runner;
  }
  gpt::BlockSlice slice;           // the rank's heads and MLP columns (everything at model size 1)
  VocabSlice vocab;                // the rank's vocabulary rows
  std::vector<GptBuffer> buffers;  // the whole model: one
  BlockActivations recompute;      // checkpointing: the block being recomputed
  gpt::BlockWorkspace work;
  using Floats = kernels::DeviceArray<float>;
  Floats embedded;                // [N, h] embedding output = block 0's input
  Floats finalNorm, fa, fb;       // head: [N, h], [N], [N] (the rank's rows of them)
  Floats finalNormAll;            // sequence parallel: finalNorm's N rows, gathered
  Floats dxLocal;                 // sequence parallel: the rank's rows of the head's dx
  Batch ulysses;                  // Ulysses: the rank's positions of the pass's batch
  Floats logits;                  // [chunk, vocab]
  std::vector<double> rowLosses;  // [chunk] the loss's terms, summed in row order (host)
  Floats dx, dy;                  // [N, h] gradient flowing down
  Floats tiedGrad;                // tied: the head's word-embedding gradient
  Floats sinusoid;                // [positions, h] fixed position table
  Floats discard;                 // a recomputed block's output (already known)
  size_t peakBytes = 0;
};

namespace gpt_pass {


// Rows of logits computed at once: bounds the [rows, vocab] buffer for large vocabularies.
constexpr size_t kLogitRows = 1024;

// The profiler's module table: root, embed, kTimers per block, final norm, output.
constexpr size_t kRootModule = 0, kEmbedModule = 1, kFirstBlockModule = 2;
inline size_t blockModule(size_t layer) { return kFirstBlockModule + layer * gpt::BlockRunner::kTimers; }

inline double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace gpt_pass
}  // namespace ds::runtime
