// NeoX's pipeline layer list for a GPT config and its cut into stages of the Gpt's layers.
#include "runtime/model/gpt_stage_partition.h"

#include "common/error.h"
#include "runtime/model/gpt_block.h"

namespace ds::runtime {

std::vector<PipeLayer> gptPipeLayers(const GptConfig& c) {
  const int64_t h = c.hiddenSize, vocab = c.paddedVocabSize();
  const int64_t embedding =
      vocab * h + (c.posEmb == PositionEmbedding::Learned ? c.maxPositionEmbeddings * h : 0);
  const int64_t norm = c.normWeightSize() + (c.normHasBias() ? h : 0);
  std::vector<PipeLayer> layers;
  layers.push_back({"EmbeddingPipe", embedding});
  layers.push_back({"_pre_transformer_block", 0});  // a function: its __name__ is matched
  const auto block = static_cast<int64_t>(gpt::blockLayout(c).numel);
  for (int l = 0; l < c.numLayers; ++l) layers.push_back({"ParallelTransformerLayerPipe", block});
  layers.push_back({"_post_transformer_block", 0});
  layers.push_back({"NormPipe", norm});
  if (c.weightTying)
    layers.push_back({"EmbeddingPipe", embedding});
  else
    layers.push_back({"ParallelLinearPipe", vocab * h});
  return layers;
}

std::vector<int> gptStageBounds(const GptConfig& c, int stages, std::string_view method) {
  const std::vector<int> parts = partitionLayers(gptPipeLayers(c), stages, method);
  const int L = c.numLayers;
  // The list entry each Gpt layer follows: the embedding entry 0, block l entry l + 1, the head
  // the output entry L + 4.
  auto entryOf = [&](int layer) { return layer == L + 1 ? L + 4 : layer == 0 ? 0 : layer + 1; };
  auto stageOf = [&](int entry) {
    int s = 0;
    while (s + 1 < stages && parts[s + 1] <= entry) ++s;
    return s;
  };
  std::vector<int> bounds(static_cast<size_t>(stages) + 1, 0);
  for (int layer = 0; layer < L + 2; ++layer) bounds[stageOf(entryOf(layer)) + 1] = layer + 1;
  for (int s = 1; s <= stages; ++s) bounds[s] = std::max(bounds[s], bounds[s - 1]);
  for (int s = 0; s < stages; ++s)
    if (bounds[s] == bounds[s + 1])
      throw Error("pipe-partition-method: \"" + std::string(method) + "\" leaves pipeline stage " +
                  std::to_string(s) + " of " + std::to_string(stages) + " without layers (" +
                  std::to_string(L) + " transformer layers, the embedding and the head); use " +
                  "fewer stages or another method");
  return bounds;
}

}  // namespace ds::runtime
