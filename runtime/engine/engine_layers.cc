// Engine as the model's LayerAccess: parameters handed out layer by layer (converted from the
// 16-bit working copy, or gathered at stage 3 with prefetch and release), gradients taken right
// after each layer's backward: accumulated whole (stages 0, 1) or packed into a bucket that is
// reduce-scattered while the backward pass goes on (stages 2, 3).
#include <algorithm>
#include <cstring>

#include "runtime/engine/engine.h"

namespace ds::runtime {

void Engine::planBuckets() {
  // Whole layers, in backward order, until a bucket holds reduce_bucket_size elements.
  const int layers = model_.layerCount();
  const size_t limit = static_cast<size_t>(std::max<int64_t>(1, config_.zero.reduceBucketSize));
  bucketOfLayer_.assign(layers, -1);
  for (int l = layers - 1; l >= 0;) {
    Bucket b{l, l, layerTensors_[l].first, layerTensors_[l].second};
    size_t elements = layerNumel(l);
    int next = l - 1;
    while (next >= 0 && elements + layerNumel(next) <= limit) {
      elements += layerNumel(next);
      b.firstLayer = next;
      b.t0 = layerTensors_[next].first;
      --next;
    }
    for (int k = b.firstLayer; k <= b.lastLayer; ++k)
      bucketOfLayer_[k] = static_cast<int>(buckets_.size());
    buckets_.push_back(b);
    l = next;
  }
  staging_.resize(2);
  received_.resize(2);
  slotBusy_.resize(2);
  bucketSlot_.assign(buckets_.size(), 0);
}

const float* Engine::acquireParameters(int layer) {
  if (stage_ == 3) {
    if (layerParams_[layer].empty() && layerNumel(layer) > 0) gatherLayer(layer);
    prefetchFrom(layer, inBackward_ ? -1 : 1);
    waitLayer(layer);
    return layerParams_[layer].data();
  }
  const size_t base = layerBase(layer);
  if (modelType_ == DType::F32) return reinterpret_cast<const float*>(working_.data()) + base;
  // 16-bit working copy: the model computes in fp32 on the rounded values.
  converted_.resize(layerNumel(layer));
  convertElements(working_.data() + base * dtypeBytes(modelType_), modelType_, converted_.data(),
                  DType::F32, converted_.size());
  return converted_.data();
}

void Engine::releaseParameters(int layer) {
  if (stage_ != 3 || persistent_[layer]) return;
  // Its next use is this layer's backward: keep it if that comes soon enough.
  size_t distance = 0;
  for (int k = layer + 1; k < model_.layerCount(); ++k) distance += 2 * layerNumel(k);
  const bool keep = static_cast<int64_t>(distance) <= config_.zero.maxReuseDistance &&
                    static_cast<int64_t>(liveElements_) <= config_.zero.maxLiveParameters;
  if (!keep) dropLayer(layer);
}

float* Engine::layerGradients(int layer) {
  if (!inBackward_) {
    const auto now = std::chrono::steady_clock::now();
    times_.forwardMs += std::chrono::duration<double, std::milli>(now - forwardStart_).count();
    backwardStart_ = now;
  }
  inBackward_ = true;
  layerScratch_.assign(layerNumel(layer), 0.0f);
  return layerScratch_.data();
}

void Engine::gradientsDone(int layer) {
  const size_t base = layerBase(layer), numel = layerNumel(layer);
  if (numel == 0 && stage_ < 2) return;
  if (stage_ < 2) {
    accumulateElements(grads_.data() + base * dtypeBytes(gradType_), gradType_,
                       layerScratch_.data(), DType::F32, numel);
  } else {
    const size_t b = static_cast<size_t>(bucketOfLayer_[layer]);
    const Bucket& bucket = buckets_[b];
    if (layer == bucket.lastLayer) {  // first layer of this bucket in backward order
      const size_t slot = nextSlot_;
      nextSlot_ = (nextSlot_ + 1) % staging_.size();
      if (slotBusy_[slot].valid()) slotBusy_[slot].get();
      bucketSlot_[b] = slot;
      const size_t chunk = layout_->chunk(bucket.t0, bucket.t1);
      staging_[slot].resize(comm_.size() * chunk * dtypeBytes(commType_));
      received_[slot].resize(chunk * dtypeBytes(commType_));
    }
    const size_t slot = bucketSlot_[b];
    layout_->packPart(layerScratch_.data(), DType::F32, base, layerTensors_[layer].first,
                      layerTensors_[layer].second, bucket.t0, bucket.t1, staging_[slot].data(),
                      commType_, preDivide());
    if (layer == bucket.firstLayer) reduceBucketDuringBackward(b);
  }
  if (stage_ == 3) dropLayer(layer);
}

void Engine::reduceBucketDuringBackward(size_t b) {
  const Bucket& bucket = buckets_[b];
  const size_t slot = bucketSlot_[b];
  const size_t chunk = layout_->chunk(bucket.t0, bucket.t1);
  char* destination = grads_.data() + layout_->shardBegin(bucket.t0) * dtypeBytes(gradType_);
  slotBusy_[slot] = queue_->submit([this, slot, chunk, destination] {
    reduceBucket(staging_[slot].data(), received_[slot].data(), chunk);
    accumulateElements(destination, gradType_, received_[slot].data(), commType_, chunk);
  });
}

void Engine::gatherLayer(int layer) {
  const size_t numel = layerNumel(layer);
  if (numel == 0 || !layerParams_[layer].empty()) return;
  layerParams_[layer].resize(numel);
  liveElements_ += numel;
  const auto [t0, t1] = layerTensors_[layer];
  layerReady_[layer] = queue_->submit([this, layer, t0 = t0, t1 = t1] {
    const size_t chunk = layout_->chunk(t0, t1), bytes = dtypeBytes(modelType_);
    std::vector<char> all(comm_.size() * chunk * bytes);
    comm_.allGather(working_.data() + layout_->shardBegin(t0) * bytes, all.data(), chunk,
                    modelType_);
    layout_->unpack(all.data(), modelType_, t0, t1, layerParams_[layer].data(), DType::F32,
                    layerBase(layer));
  });
}

void Engine::waitLayer(int layer) {
  if (layerReady_[layer].valid()) layerReady_[layer].get();
}

void Engine::dropLayer(int layer) {
  if (!persistent_[layer]) freeLayer(layer);
}

void Engine::freeLayer(int layer) {
  if (layerParams_[layer].empty()) return;
  waitLayer(layer);  // an in-flight gather still writes into it
  liveElements_ -= layerParams_[layer].size();
  std::vector<float>().swap(layerParams_[layer]);
  layerReady_[layer] = {};
}

void Engine::prefetchFrom(int layer, int direction) {
  if (!config_.zero.overlapComm) return;
  int64_t budget = config_.zero.prefetchBucketSize;
  for (int k = layer + direction; k >= 0 && k < model_.layerCount() && budget > 0; k += direction) {
    const size_t numel = layerNumel(k);
    if (!layerParams_[k].empty()) continue;
    if (static_cast<int64_t>(liveElements_ + numel) > config_.zero.maxLiveParameters) break;
    gatherLayer(k);
    budget -= static_cast<int64_t>(numel);
  }
}

}  // namespace ds::runtime
