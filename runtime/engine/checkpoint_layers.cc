#include "runtime/engine/checkpoint_layers.h"

#include <algorithm>
#include <filesystem>

#include "common/error.h"

namespace ds::runtime {

namespace fs = std::filesystem;

CheckpointLayers::CheckpointLayers(const Model& model, const std::string& root, DType modelType,
                                   size_t cacheLayers)
    : specs_(model.parameters()),
      modelType_(modelType),
      cacheLayers_(cacheLayers),
      parts_(readCheckpointParts(root)) {
  const std::string& manifestPath = parts_.front().manifestPath;
  // Weights of the right shapes under another activation or norm give fluent nonsense.
  const std::string& saved = parts_.front().manifest.architecture;
  if (!saved.empty() && saved != model.architecture())
    throw Error(manifestPath + ": saved from another model architecture than the config (" +
                architectureDifference(saved, model.architecture()) + ")");
  sources_ = tensorSources(parts_, specs_);
  if (parts_.size() == 1 && specs_.size() != parts_.front().specs.size())
    throw Error(manifestPath + ": the checkpoint has " +
                std::to_string(parts_.front().specs.size()) + " parameter tensors, this model " +
                std::to_string(specs_.size()));
  std::vector<bool> used(parts_.size(), false);
  for (const auto& list : sources_)
    for (const TensorSource& source : list) used[source.part] = true;
  files_.resize(parts_.size());
  for (size_t p = 0; p < parts_.size(); ++p) {
    const CheckpointManifest& m = parts_[p].manifest;
    const int count = static_cast<int>(m.files.size());
    for (int q = 0; q < count && used[p]; ++q) {
      File file{(fs::path(parts_[p].dir) / m.files[q].name).string(),
                PartitionLayout(parts_[p].specs, count, q), nullptr};
      // The master shard, then each optimizer array over the same shard.
      const uint64_t expected =
          (1 + m.optimizerArrays.size()) * file.layout.shardSize() * sizeof(float);
      if (m.files[q].bytes != expected)
        throw Error(file.path + ": the manifest lists " + std::to_string(m.files[q].bytes) +
                    " bytes, expected " + std::to_string(expected));
      verifyCheckpointFile(file.path, m.files[q].bytes, m.files[q].checksum);
      file.reader = std::make_unique<CheckpointReader>(file.path);
      files_[p].push_back(std::move(file));
    }
  }
  layerTensors_.assign(model.layerCount(), {0, 0});  // layers own consecutive runs of the table
  for (size_t t = 0; t < specs_.size(); ++t) {
    auto& range = layerTensors_.at(specs_[t].layer);
    if (range.first == range.second) range.first = t;
    range.second = t + 1;
  }
}

CheckpointLayers::~CheckpointLayers() = default;

const float* CheckpointLayers::acquireParameters(int layer) {
  auto it = layers_.find(layer);
  if (it == layers_.end()) {
    const auto [t0, t1] = layerTensors_.at(layer);
    const size_t numel =
        t0 == t1 ? 0 : specs_[t1 - 1].offset + specs_[t1 - 1].numel - specs_[t0].offset;
    Layer fresh;
    fresh.values.resize(numel);
    read(layer, fresh.values.data());
    resident_ += numel * sizeof(float);
    peak_ = std::max(peak_, resident_);
    it = layers_.emplace(layer, std::move(fresh)).first;
  }
  ++it->second.users;
  it->second.lastUse = ++uses_;
  return it->second.values.data();
}

void CheckpointLayers::releaseParameters(int layer) {
  auto it = layers_.find(layer);
  if (it == layers_.end() || it->second.users == 0)
    throw Error("checkpoint layers: layer " + std::to_string(layer) + " released but not held");
  --it->second.users;
  evict();
}

float* CheckpointLayers::layerGradients(int layer) {
  throw Error("checkpoint layers: layer " + std::to_string(layer) +
              " asked for gradients; a checkpoint read layer by layer serves inference only");
}

void CheckpointLayers::evict() {
  // The least recently used released layers go until at most cacheLayers_ stay.
  for (;;) {
    size_t released = 0;
    auto oldest = layers_.end();
    for (auto it = layers_.begin(); it != layers_.end(); ++it) {
      if (it->second.users > 0) continue;
      ++released;
      if (oldest == layers_.end() || it->second.lastUse < oldest->second.lastUse) oldest = it;
    }
    if (released <= cacheLayers_) return;
    resident_ -= oldest->second.values.size() * sizeof(float);
    layers_.erase(oldest);
  }
}

void CheckpointLayers::read(int layer, float* out) {
  const auto [t0, t1] = layerTensors_.at(layer);
  for (size_t t = t0; t < t1; ++t) {
    const ParamSpec& spec = specs_[t];
    float* dst = out + (spec.offset - specs_[t0].offset);
    uint64_t loaded = 0;
    for (const TensorSource& source : sources_[t]) {
      const ParamSpec& saved = parts_[source.part].specs[source.tensor];
      for (File& file : files_[source.part]) {
        // The saving rank's slice of the tensor: elements [wasBegin, wasEnd) of its local ones,
        // at wasOffset in the master shard (array 0 of the file).
        const TensorPlacement& was = file.layout.tensor(source.tensor);
        const size_t q = static_cast<size_t>(file.layout.rank());
        const size_t wasBegin = std::min(was.numel, q * was.slice);
        const size_t wasEnd = std::min(was.numel, wasBegin + was.slice);
        for (const SliceCopy& c :
             sliceOverlaps(spec.fullSlice(), 0, spec.numel, saved.fullSlice(), wasBegin, wasEnd)) {
          file.reader->read((was.shardOffset + c.fromLocal - wasBegin) * sizeof(float),
                            c.count * sizeof(float), dst + c.toLocal);
          loaded += c.count;
          bytesRead_ += c.count * sizeof(float);
        }
      }
    }
    if (loaded != spec.numel)
      throw Error(parts_.front().manifestPath + ": the checkpoint holds " + std::to_string(loaded) +
                  " of the " + std::to_string(spec.numel) + " elements of tensor \"" + spec.name +
                  "\" (a part of the grid is missing or overlaps)");
  }
  if (modelType_ != DType::F32 && t0 != t1) {
    // The values a 16-bit working copy holds: rounded to the model dtype, as the engine's.
    const size_t numel = specs_[t1 - 1].offset + specs_[t1 - 1].numel - specs_[t0].offset;
    std::vector<uint16_t> half(numel);
    convertElements(out, DType::F32, half.data(), modelType_, numel);
    convertElements(half.data(), modelType_, out, DType::F32, numel);
  }
}

}  // namespace ds::runtime
