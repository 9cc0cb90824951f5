// Which layers each pipeline stage owns, as DeepSpeed's PipelineModule._partition_layers decides
// (pipe-partition-method / partition_method): "uniform", "parameters", "type:REGEX". Pure
// arithmetic on a list of layer descriptions; building or moving the layers is not its job.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds::runtime {

// One entry of the pipeline's layer list. typeName is what DeepSpeed matches "type:" against (a
// LayerSpec's class name, a function's __name__); empty for an entry that has none, which never
// matches. paramCount counts trainable parameters, for "parameters".
struct PipeLayer {
  std::string typeName;
  std::int64_t paramCount = 0;
};

// ds_utils.partition_uniform: parts[0..numParts], stage s owning [parts[s], parts[s+1]). With no
// more items than parts, the first numItems parts hold one item each and the rest none.
std::vector<int> partitionUniform(int numItems, int numParts);

// ds_utils.partition_balanced: DeepSpeed's dynamic programme over prefix sums, which extends the
// best (max - min) split of each prefix and, among equal costs, keeps the latest cut. With no more
// weights than parts it is partitionUniform.
std::vector<int> partitionBalanced(const std::vector<std::int64_t>& weights, int numParts);

// The whole of _partition_layers: `method` is matched case-insensitively (DeepSpeed lowercases
// it); "type:" takes the text up to the next ':' as a case-insensitive ECMAScript regex searched
// in each typeName. Throws ds::Error naming `key` for an unknown method, a regex that does not
// compile or matches no layer, or fewer than one stage. Like DeepSpeed, fewer layers than stages
// is not refused here: the last stages get no layers (the caller decides whether it allows that).
std::vector<int> partitionLayers(const std::vector<PipeLayer>& layers, int numStages,
                                 std::string_view method,
                                 std::string_view key = "pipe-partition-method");

}  // namespace ds::runtime
