// A model's parameters read layer by layer from a saved checkpoint, as a LayerAccess: each layer
// is read from the shard files when the model asks for it (the pieces of every saving rank's
// slices that hold it: any world size, ZeRO stage and grid, as the engine's resharding load) and
// dropped when released, keeping at most `cacheLayers` released layers. So generation from a
// checkpoint (ds-generate) holds a few layers, never the whole model. Parameters only: it gives no
// gradients, and the values are the ones an engine's working copy in `modelType` would hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "runtime/checkpoint/checkpoint_files.h"
#include "runtime/engine/checkpoint_parts.h"
#include "runtime/model/model.h"
#include "runtime/zero/partition_layout.h"

namespace ds::runtime {

class CheckpointLayers : public LayerAccess {
 public:
  // `root`: the checkpoint's directory (dir/tag). Reads its manifests and verifies every shard
  // file it will read from (size and checksum, streaming); errors name the file.
  CheckpointLayers(const Model& model, const std::string& root, DType modelType,
                   size_t cacheLayers = 2);
  ~CheckpointLayers() override;

  const float* acquireParameters(int layer) override;
  void releaseParameters(int layer) override;
  float* layerGradients(int layer) override;  // throws: inference only
  void gradientsDone(int) override {}

  const CheckpointManifest& manifest() const { return parts_.front().manifest; }
  // Bytes of layer parameters held (in use or cached): now and at most so far.
  size_t residentBytes() const { return resident_; }
  size_t peakResidentBytes() const { return peak_; }
  uint64_t bytesRead() const { return bytesRead_; }

 private:
  struct File {
    std::string path;
    PartitionLayout layout;  // the saving rank's shard
    std::unique_ptr<CheckpointReader> reader;
  };
  struct Layer {
    std::vector<float> values;
    int users = 0;
    uint64_t lastUse = 0;
  };
  void read(int layer, float* out);
  void evict();

  const std::vector<ParamSpec>& specs_;
  DType modelType_;
  size_t cacheLayers_;
  std::vector<CheckpointPart> parts_;
  std::vector<std::vector<TensorSource>> sources_;  // by tensor
  std::vector<std::vector<File>> files_;            // by part, by saving rank
  std::vector<std::pair<size_t, size_t>> layerTensors_;
  std::map<int, Layer> layers_;
  uint64_t uses_ = 0;
  size_t resident_ = 0, peak_ = 0;
  uint64_t bytesRead_ = 0;
};

}  // namespace ds::runtime
