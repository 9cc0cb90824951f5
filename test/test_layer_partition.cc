// Layer partitioning against DeepSpeed's partition_uniform / partition_balanced /
// _partition_layers: boundaries worked out from its algorithm (the small ones by hand in the
// comments), its tie rule, NeoX's default "type:transformer|mlp" on NeoX-shaped layer lists, and
// the refusals.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/parallel/layer_partition.h"

using namespace ds;
using namespace ds::runtime;
using Parts = std::vector<int>;
using Weights = std::vector<std::int64_t>;

namespace {

// NeoX's GPT2ModelPipe: embedding, the _pre_transformer_block function, the layers, the
// _post_transformer_block function, the final norm and the output head. The two functions' names
// contain "transformer", so NeoX's default regex counts them as layers.
std::vector<PipeLayer> neoxLayers(int numLayers, std::int64_t embed = 0, std::int64_t layer = 0,
                                  std::int64_t norm = 0) {
  std::vector<PipeLayer> layers = {{"EmbeddingPipe", embed}, {"_pre_transformer_block", 0}};
  for (int i = 0; i < numLayers; ++i) layers.push_back({"ParallelTransformerLayerPipe", layer});
  layers.push_back({"_post_transformer_block", 0});
  layers.push_back({"NormPipe", norm});
  layers.push_back({"ParallelLinearPipe", embed});
  return layers;
}

// The brief's plainer shape: embedding, the layers, norm, head (no functions between).
std::vector<PipeLayer> plainLayers(int numLayers) {
  std::vector<PipeLayer> layers = {{"EmbeddingPipe", 0}};
  for (int i = 0; i < numLayers; ++i) layers.push_back({"ParallelTransformerLayerPipe", 0});
  layers.push_back({"NormPipe", 0});
  layers.push_back({"ParallelLinearPipe", 0});
  return layers;
}

}  // namespace

TEST_CASE("partitionUniform spreads the remainder over the first parts", "[layer_partition]") {
  struct Case {
    int items, parts;
    Parts expected;
  };
  const std::vector<Case> cases = {
      {8, 4, {0, 2, 4, 6, 8}},
      {10, 4, {0, 3, 6, 8, 10}},  // chunk 2, remainder 2: the first two parts get 3
      {7, 3, {0, 3, 5, 7}},
      {5, 1, {0, 5}},
      {4, 4, {0, 1, 2, 3, 4}},
      {2, 4, {0, 1, 2, 2, 2}},  // fewer items than parts: the last parts are empty
      {0, 2, {0, 0, 0}},
  };
  for (const auto& c : cases) {
    INFO(c.items << " items into " << c.parts);
    CHECK(partitionUniform(c.items, c.parts) == c.expected);
  }
  CHECK_THROWS_AS(partitionUniform(3, 0), Error);
}

TEST_CASE("partitionBalanced follows DeepSpeed's dynamic programme and its ties",
          "[layer_partition]") {
  struct Case {
    Weights weights;
    int parts;
    Parts expected;
  };
  const std::vector<Case> cases = {
      // Prefix sums 0 1 2 3 4; the cut at 2 gives parts 2 and 2, cost 0 (cuts 1 and 3 cost 2).
      {{1, 1, 1, 1}, 2, {0, 2, 4}},
      // Cuts 1 (parts 1, 3) and 2 (parts 3, 1) both cost 2: the later cut wins.
      {{1, 2, 1}, 2, {0, 2, 3}},
      // Every cut costs 0: the latest one wins.
      {{0, 0, 0, 0}, 2, {0, 3, 4}},
      {{5, 1, 1, 1, 1, 5}, 3, {0, 1, 5, 6}},
      // The programme extends each prefix's best split, so it is not min-max optimal: DeepSpeed
      // splits 14 / 9 / 8 here.
      {{3, 1, 4, 1, 5, 9, 2, 6}, 3, {0, 5, 6, 8}},
      // No more weights than parts: partition_uniform.
      {{7, 7}, 3, {0, 1, 2, 2}},
      {{1, 2, 3}, 3, {0, 1, 2, 3}},
      {{}, 2, {0, 0, 0}},
  };
  for (const auto& c : cases) {
    INFO(c.weights.size() << " weights into " << c.parts);
    CHECK(partitionBalanced(c.weights, c.parts) == c.expected);
  }
}

TEST_CASE("partitionLayers uniform counts layers whatever their type", "[layer_partition]") {
  CHECK(partitionLayers(neoxLayers(8), 4, "uniform") == Parts{0, 4, 7, 10, 13});
  CHECK(partitionLayers(neoxLayers(8), 4, "UNIFORM") == Parts{0, 4, 7, 10, 13});
  CHECK(partitionLayers(neoxLayers(2), 1, "uniform") == Parts{0, 7});
}

TEST_CASE("partitionLayers type:transformer|mlp on NeoX layer lists", "[layer_partition]") {
  // Weights 0 1 1 1 1 0 0: the cut after 3 layers leaves 2 and 2 transformer layers (cost 0).
  CHECK(partitionLayers(plainLayers(4), 2, "type:transformer|mlp") == Parts{0, 3, 7});
  CHECK(partitionLayers(plainLayers(8), 4, "type:transformer|mlp") == Parts{0, 3, 5, 7, 11});
  CHECK(partitionLayers(plainLayers(24), 4, "type:transformer|mlp") == Parts{0, 7, 13, 19, 27});
  // With NeoX's two functions: weights 0 1 1 1 1 1 1 0 0, total 6, only the cut at 4 splits 3/3.
  CHECK(partitionLayers(neoxLayers(4), 2, "type:transformer|mlp") == Parts{0, 4, 9});
  CHECK(partitionLayers(neoxLayers(8), 2, "type:transformer|mlp") == Parts{0, 6, 13});
  CHECK(partitionLayers(neoxLayers(8), 4, "type:transformer|mlp") == Parts{0, 4, 7, 9, 13});
  CHECK(partitionLayers(neoxLayers(32), 4, "type:transformer|mlp") == Parts{0, 10, 19, 27, 37});
  // Case-insensitive both ways (DeepSpeed lowercases the method and compiles with IGNORECASE).
  CHECK(partitionLayers(plainLayers(4), 2, "Type:TRANSFORMER") == Parts{0, 3, 7});
  // A second ':' ends the pattern, as method.split(':')[1].
  CHECK(partitionLayers(plainLayers(4), 2, "type:transformer:ignored") == Parts{0, 3, 7});
  // Anchored: only EmbeddingPipe weighs 1. Every cut then splits 1 / 0 (cost 1), so the tie rule
  // picks the latest one and the first stage takes all but the head.
  CHECK(partitionLayers(plainLayers(4), 2, "type:^embedding") == Parts{0, 6, 7});
}

TEST_CASE("partitionLayers parameters balances parameter counts", "[layer_partition]") {
  // A NeoX-shaped GPT with hidden 64, vocabulary 512: embedding and head 32768 parameters, each
  // layer 12 h^2 + 13 h = 49984, the norm 128, the two functions none.
  const auto layers = neoxLayers(6, 32768, 49984, 128);
  CHECK(partitionLayers(layers, 2, "parameters") == Parts{0, 5, 11});
  CHECK(partitionLayers(layers, 4, "parameters") == Parts{0, 3, 5, 7, 11});
}

TEST_CASE("partitionLayers refuses what DeepSpeed refuses, naming the key", "[layer_partition]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(partitionLayers(plainLayers(4), 2, "profile"),
                    Contains("pipe-partition-method") && Contains("not implemented"));
  CHECK_THROWS_WITH(partitionLayers(plainLayers(4), 2, "balanced", "partition_method"),
                    Contains("partition_method") && Contains("\"balanced\""));
  CHECK_THROWS_WITH(partitionLayers(plainLayers(4), 2, "type:attention"),
                    Contains("pipe-partition-method") && Contains("matches no layer"));
  CHECK_THROWS_WITH(
      partitionLayers(plainLayers(4), 2, "type:(transformer"),
      Contains("pipe-partition-method") && Contains("not a valid regular expression"));
  CHECK_THROWS_WITH(partitionLayers(plainLayers(4), 0, "uniform"),
                    Contains("pipe-partition-method") && Contains("at least one"));
  // A layer without a type name never matches, even a pattern that matches the empty string.
  CHECK_THROWS_WITH(partitionLayers({{"", 5}, {"", 5}}, 2, "type:.*"),
                    Contains("matches no layer"));
  // Fewer layers than stages is not refused (DeepSpeed neither): the last stages are empty.
  CHECK(partitionLayers(plainLayers(0), 4, "uniform") == Parts{0, 1, 2, 3, 3});
  CHECK(partitionLayers(plainLayers(0), 4, "type:embedding") == Parts{0, 1, 2, 3, 3});
}
