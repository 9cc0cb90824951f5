// The parts of a saved checkpoint as a loader sees them: the top manifest and, for a grid
// checkpoint, every (pipeline stage, model rank) part beside it, and with expert parallelism each
// one's experts' parts (one per expert-parallel rank), each with its tensor table; and
// for a model's tensors, which parts hold their elements. Shared by the engine's resharding load
// and by the layer-by-layer reader ds-generate uses (checkpoint_layers.h). Reads manifests only,
// never shard files.
#pragma once

#include <string>
#include <vector>

#include "runtime/checkpoint/manifest.h"
#include "runtime/model/model.h"

namespace ds::runtime {

struct CheckpointPart {
  std::string dir, manifestPath;
  CheckpointManifest manifest;
  std::vector<ParamSpec> specs;  // its tensor table (offsets: the part's flat layout)
};

// Every part of the checkpoint in `root` (dir/tag), the top one first; errors name the manifest.
// A part from another save than the top one (partDifference) is refused, naming the part.
std::vector<CheckpointPart> readCheckpointParts(const std::string& root);

// Where one tensor's elements are saved: tensor `tensor` of part `part`.
struct TensorSource {
  size_t part, tensor;
};

// For each of `specs`: the parts of the first pipeline stage that holds a tensor of its name (a
// tied embedding is in two stages, alike), every model rank's slice of it, or one whole copy where
// it was not sliced. Throws naming the manifest for a tensor the checkpoint lacks or one of
// another full size.
std::vector<std::vector<TensorSource>> tensorSources(const std::vector<CheckpointPart>& parts,
                                                     const std::vector<ParamSpec>& specs);

}  // namespace ds::runtime
