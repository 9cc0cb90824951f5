// Which of a GPT's layers each pipeline stage holds: NeoX's GPT2ModelPipe layer list (what
// DeepSpeed's PipelineModule partitions) for a config, cut by pipe-partition-method, and mapped
// onto the Gpt's layers (0 the embedding, 1..L the blocks, L + 1 the head). Building the stage is
// Gpt(config, placement)'s job.
#pragma once

#include <string_view>
#include <vector>

#include "runtime/model/gpt_config.h"
#include "runtime/parallel/layer_partition.h"

namespace ds::runtime {

// GPT2ModelPipe.init_specs' list: EmbeddingPipe, _pre_transformer_block, L x
// ParallelTransformerLayerPipe, _post_transformer_block, NormPipe, then the head (EmbeddingPipe
// again with tied weights, ParallelLinearPipe without), with their trainable parameter counts as
// DeepSpeed counts them (the tied head builds a whole EmbeddingPipe: its count is the embedding's).
std::vector<PipeLayer> gptPipeLayers(const GptConfig& config);

// bounds[0..stages]: stage s holds the Gpt layers [bounds[s], bounds[s+1]), so bounds[0] = 0 and
// bounds[stages] = L + 2. The embedding goes with its list entry; the head (final norm and output,
// one layer here) with the output entry, so a cut between NeoX's NormPipe and its head moves the
// norm to the head's stage. Throws ds::Error naming pipe-partition-method for what
// partitionLayers refuses and for a stage left without layers (DeepSpeed would build an empty
// stage; here every stage must hold at least one layer).
std::vector<int> gptStageBounds(const GptConfig& config, int stages, std::string_view method);

}  // namespace ds::runtime
