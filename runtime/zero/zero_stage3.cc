// ZeRO stage 3: parameters partitioned as well. The working copy is the own shard; each layer is
// all-gathered right before use (prefetched with overlap_comm within stage3_prefetch_bucket_size
// and stage3_max_live_parameters), kept for its backward when reused soon enough
// (stage3_max_reuse_distance), and released after; layers at or under
// stage3_param_persistence_threshold elements stay gathered. With offload_param nvme each layer's
// shard of the working copy lives in a swap file: read into one of buffer_count resident buffers
// ahead of its gather (within the same prefetch budget, with or without overlap_comm) and
// all-gathered from there. The optimizer step streams the shard sub-group by sub-group: the
// layers' shards a sub-group covers are read in (fp32: they are the master) or only rewritten
// (16-bit: the update writes their copy), and written out as soon as complete, while the next
// sub-group is updated (runtime/offload/param_swapper.h).
#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/phase_timer.h"
#include "runtime/comm/quantized_collectives.h"
#include "runtime/zero/zero_stages.h"

namespace ds::runtime {

ZeroStage3::ZeroStage3(const ZeroContext& context) : ZeroStage(context, 0) {
  const int layers = layerCount();
  layerParams_.resize(layers);
  layerReady_.resize(layers);
  secondary_.resize(layers);
  persistent_.assign(layers, false);
  swapGroup_.assign(layers, -1);  // before any gather task reads it
}

ZeroStage3::~ZeroStage3() = default;

void ZeroStage3::initialise(const InitialValues& draw) {
  const size_t shard = shardLayout_->shardSize();
  const size_t bytes = dtypeBytes(ctx_.modelType);
  working_.resize(shard * bytes);
  // The own slice of each tensor, drawn where it lies in the shard; the padding after the last
  // rank's real elements is zero.
  for (size_t t = 0; t < ctx_.specs.size(); ++t) {
    const TensorPlacement& p = layout_->tensor(t);
    const size_t begin = std::min(p.numel, static_cast<size_t>(layout_->rank()) * p.slice),
                 end = std::min(p.numel, begin + p.slice);
    char* at = working_.data() + p.shardOffset * bytes;
    drawInto(draw, t, begin, end, at);
    std::memset(at + (end - begin) * bytes, 0, (p.slice - (end - begin)) * bytes);
  }
  // fp32 working parameters laid out as the shard are the master weights themselves.
  if (ctx_.modelType != DType::F32) master_.resize(shard);  // filled by fillMaster
  // Zero without a touch: the first backward writes every page, and until then (construction,
  // the working shard drawn whole before offload_param moves it out) they cost nothing.
  grads_.resize(shard * dtypeBytes(ctx_.gradType));
  zeroUntouched(grads_.data(), grads_.size());
  for (int l = 0; l < layerCount(); ++l) {
    persistent_[l] =
        static_cast<int64_t>(layerNumel(l)) <= ctx_.config.zero.paramPersistenceThreshold;
    if (persistent_[l]) gatherLayer(l);
  }
}

void ZeroStage3::startParameterOffload() {
  const OffloadParamConfig& c = ctx_.config.zero.offloadParam;
  if (c.device != OffloadDevice::Nvme) return;
  const size_t bytes = dtypeBytes(ctx_.modelType);
  // The first layers stay in memory up to max_in_cpu elements; persistent ones always do. Every
  // other layer's shard must fit one buffer of buffer_size elements (DeepSpeed's rule).
  std::vector<int> swapped;
  size_t inCpu = 0, largest = 0;
  uint64_t fileBytes = 0;
  for (int l = 0; l < layerCount(); ++l) {
    const auto [t0, t1] = ctx_.layerTensors[l];
    const size_t chunk = layout_->chunk(t0, t1);
    if (chunk == 0 || persistent_[l]) continue;
    if (static_cast<int64_t>(inCpu + chunk) <= c.maxInCpu) {
      inCpu += chunk;
      continue;
    }
    if (static_cast<int64_t>(chunk) > c.bufferSize)
      throw Error("zero_optimization.offload_param.buffer_size: layer " + std::to_string(l) +
                  "'s parameter shard has " + std::to_string(chunk) + " elements, more than " +
                  "buffer_size (" + std::to_string(c.bufferSize) +
                  "); raise buffer_size to at least " + std::to_string(chunk) +
                  " (or keep the layer in memory with a larger max_in_cpu)");
    swapped.push_back(l);
    largest = std::max(largest, chunk);
    fileBytes += ParamSwapper::fileBytesFor(chunk * bytes);
  }
  // Made even when every layer stays in memory, so that a bad nvme_path is refused all the same.
  // A buffer holds buffer_size elements, or the largest swapped shard where that is smaller: no
  // layer could use the rest.
  const size_t slotElements = std::min<size_t>(largest, static_cast<size_t>(c.bufferSize));
  paramSwapper_ = std::make_unique<ParamSwapper>(ctx_.config.aio, c.nvmePath, ctx_.comm.rank(),
                                                 fileBytes, static_cast<int>(c.bufferCount),
                                                 slotElements * bytes, c.pinMemory);
  // The homes are touched again, and given back, by every checkpoint (the step updates the layers
  // in their buffers): one fault per 2 MiB, not per 4 KiB.
  preferHugePages(working_.data(), working_.size());
  for (int l : swapped) {
    const auto [t0, t1] = ctx_.layerTensors[l];
    swapGroup_[l] = static_cast<int>(paramSwapper_->addGroup(
        {working_.data() + layout_->shardBegin(t0) * bytes, layout_->chunk(t0, t1) * bytes}));
  }
}

void ZeroStage3::reduceGradientsForStep() { waitForBackwardReductions(); }

template <class Visit>
void ZeroStage3::forEachSwappedLayerIn(TensorRange range, Visit visit) const {
  const size_t begin = layout_->shardBegin(range.first), end = layout_->shardBegin(range.second);
  for (int l = 0; l < layerCount(); ++l) {
    if (swapGroup_[l] < 0) continue;
    const auto [t0, t1] = ctx_.layerTensors[l];
    const size_t layerBegin = layout_->shardBegin(t0),
                 layerEnd = layerBegin + layout_->chunk(t0, t1);
    if (layerBegin < end && layerEnd > begin)
      visit(static_cast<size_t>(swapGroup_[l]), layerEnd <= end);
  }
}

int ZeroStage3::swappedLayerHolding(size_t begin, size_t end) const {
  for (int l = 0; l < layerCount(); ++l) {
    const auto [t0, t1] = ctx_.layerTensors[l];
    const size_t layerBegin = layout_->shardBegin(t0), layerEnd = layerBegin + layout_->chunk(t0, t1);
    if (layerBegin <= begin && end <= layerEnd && begin < layerEnd)
      return swapGroup_[l] >= 0 ? l : -1;
  }
  return -1;
}

void ZeroStage3::readLayersAheadOf(size_t shardEnd) {
  // As far as half the buffers go (the other half take the writes of the layers completed).
  int ahead = std::max(1, paramSwapper_->slotCount() / 2);
  for (int l = 0; l < layerCount() && ahead > 0; ++l) {
    if (swapGroup_[l] < 0 || layout_->shardBegin(ctx_.layerTensors[l].first) < shardEnd) continue;
    const auto g = static_cast<size_t>(swapGroup_[l]);
    if (paramSwapper_->homeIn(g)) continue;
    if (!paramSwapper_->prefetchForStep(g)) break;
    --ahead;
  }
}

ZeroStage::GroupView ZeroStage3::beginGroup(TensorRange group, ShardUse use) {
  if (!paramSwapper_) return {};
  PhaseTimer timer(timed(paramSwapTimes_.inMs));
  const bool workingIsMaster = master_.empty();
  if (use == ShardUse::kRead && !workingIsMaster) return {};  // a 16-bit copy is not saved
  for (int l = 0; l < layerCount(); ++l) waitLayer(l);  // gathers read the swapper too
  paramSwapper_->setScanDirection(1);  // sub-groups go in shard order
  const size_t begin = layout_->shardBegin(group.first), end = layout_->shardBegin(group.second);
  if (use == ShardUse::kUpdate) {
    // The update in the layer's buffer itself: read first for an fp32 master, taken as it is
    // for a 16-bit copy the update rewrites whole. The layer's later sub-groups find it held.
    const int layer = swappedLayerHolding(begin, end);
    if (layer < 0) {
      forEachSwappedLayerIn(group, [](size_t, bool) {
        throw Error("offload_param: an optimizer sub-group straddles a swapped layer (a bug: "
                    "the engine cuts them at layer boundaries)");
      });
      return {};  // its layer stays in memory
    }
    if (updatingLayer_ != layer) {
      if (updatingLayer_ >= 0)
        throw Error("offload_param: a layer's buffer still held by the step (a bug)");
      updatingBuffer_ =
          paramSwapper_->acquireForUpdate(static_cast<size_t>(swapGroup_[layer]), workingIsMaster);
      updatingLayer_ = layer;
      if (workingIsMaster) readLayersAheadOf(end);
    }
    char* at = updatingBuffer_ + (begin - layout_->shardBegin(ctx_.layerTensors[layer].first)) *
                                     dtypeBytes(ctx_.modelType);
    if (workingIsMaster) return {reinterpret_cast<float*>(at), nullptr};
    return {nullptr, at};
  }
  // Checkpoints, through the layers' own arrays: a save reads in an fp32 master, a load writes
  // every value (nothing read).
  if (use == ShardUse::kOverwrite) {
    forEachSwappedLayerIn(group, [&](size_t g, bool) { paramSwapper_->markWritten(g); });
    return {};
  }
  forEachSwappedLayerIn(group, [&](size_t g, bool) { paramSwapper_->swapIn(g); });
  readLayersAheadOf(end);
  return {};
}

void ZeroStage3::endGroup(TensorRange group, ShardUse use) {
  if (!paramSwapper_) return;
  PhaseTimer timer(timed(paramSwapTimes_.outMs));
  if (use == ShardUse::kUpdate) {
    if (updatingLayer_ < 0) return;
    const auto [t0, t1] = ctx_.layerTensors[updatingLayer_];
    if (layout_->shardBegin(group.second) >= layout_->shardBegin(t0) + layout_->chunk(t0, t1)) {
      paramSwapper_->writeBack(static_cast<size_t>(swapGroup_[updatingLayer_]));
      updatingLayer_ = -1;
      updatingBuffer_ = nullptr;
    }
    return;
  }
  forEachSwappedLayerIn(group, [&](size_t g, bool complete) {
    if (!complete) return;
    if (use == ShardUse::kRead)
      paramSwapper_->dropHome(g);
    else
      paramSwapper_->swapOut(g);
  });
}

void ZeroStage3::bringParametersIn() {
  if (!paramSwapper_) return;
  for (int l = 0; l < layerCount(); ++l) waitLayer(l);  // gathers read the swapper too
  paramSwapper_->swapInAll();
}

void ZeroStage3::sendParametersOut() {
  if (!paramSwapper_) return;
  for (int l = 0; l < layerCount(); ++l) waitLayer(l);
  paramSwapper_->swapOutAll();
}

size_t ZeroStage3::parameterSwapBytes() const {
  return paramSwapper_ ? paramSwapper_->fileBytes() : 0;
}

const float* ZeroStage3::acquireParameters(int layer, bool inBackward) {
  if (paramSwapper_) paramSwapper_->setScanDirection(inBackward ? -1 : 1);
  if (layerParams_[layer].empty() && layerNumel(layer) > 0) gatherLayer(layer);
  prefetchFrom(layer, inBackward ? -1 : 1);
  waitLayer(layer);
  return layerParams_[layer].data();
}

void ZeroStage3::fillMaster(size_t t0, size_t t1, float* out) {
  if (master_.empty()) return;
  const size_t begin = shardLayout_->shardBegin(t0);
  convertElements(working_.data() + begin * dtypeBytes(ctx_.modelType), ctx_.modelType, out,
                  DType::F32, shardLayout_->chunk(t0, t1));
}

void ZeroStage3::releaseParameters(int layer) {
  if (persistent_[layer]) return;
  // Its next use is this layer's backward: keep it if that comes soon enough.
  size_t distance = 0;
  for (int k = layer + 1; k < layerCount(); ++k) distance += 2 * layerNumel(k);
  const bool keep = static_cast<int64_t>(distance) <= ctx_.config.zero.maxReuseDistance &&
                    static_cast<int64_t>(liveElements_) <= ctx_.config.zero.maxLiveParameters;
  if (!keep) dropLayer(layer);
}

void ZeroStage3::gradientsDone(int layer) {
  packForReductionDuringBackward(layer);
  dropLayer(layer);
}

void ZeroStage3::publishParameters(bool halfWritten) {
  // Gathered copies (and hpZ's secondary pieces) are stale now; persistent layers are
  // re-gathered below, in full precision as DeepSpeed's after a step.
  for (int l = 0; l < layerCount(); ++l) {
    freeLayer(l);
    std::vector<char>().swap(secondary_[l]);
  }
  convertMasterToWorking(master_.size(), halfWritten);
  // The step and a load wrote the layers out sub-group by sub-group (the engine writes a 16-bit
  // copy group by group where the stage streams): only their last writes are waited for. A
  // whole conversion here would have rewritten every layer in its own arrays.
  if (paramSwapper_) {
    PhaseTimer timer(timed(paramSwapTimes_.outMs));
    if (!master_.empty() && !halfWritten) paramSwapper_->markHomesWritten();
    paramSwapper_->swapOutAll();
  }
  for (int l = 0; l < layerCount(); ++l)
    if (persistent_[l]) gatherLayer(l);
}

std::vector<float> ZeroStage3::fullParameters() {
  bringParametersIn();
  std::vector<float> out(ctx_.count);
  const size_t shard = layout_->shardSize(), bytes = dtypeBytes(ctx_.modelType);
  std::vector<char> all(ctx_.comm.size() * shard * bytes);
  ctx_.queue.run([&] { ctx_.comm.allGather(working_.data(), all.data(), shard, ctx_.modelType); });
  layout_->unpack(all.data(), ctx_.modelType, 0, ctx_.specs.size(), out.data(), DType::F32, 0);
  if (paramSwapper_) paramSwapper_->dropHomes();
  return out;
}

MemoryUsage ZeroStage3::memory() const {
  MemoryUsage m = ZeroStage::memory();
  for (const auto& v : layerParams_) m.buffers += v.capacity() * sizeof(float);
  for (const auto& v : secondary_) m.buffers += v.capacity();
  m.buffers += gatherStaging_.capacity();
  if (paramSwapper_) m.buffers += paramSwapper_->allocatedBytes();
  return m;
}

void ZeroStage3::gatherLayer(int layer) {
  const size_t numel = layerNumel(layer);
  if (numel == 0 || !layerParams_[layer].empty()) return;
  layerParams_[layer].resize(numel);
  liveElements_ += numel;
  const auto [t0, t1] = ctx_.layerTensors[layer];
  layerReady_[layer] = ctx_.queue.submit([this, layer, t0 = t0, t1 = t1] {
    const size_t chunk = layout_->chunk(t0, t1), bytes = dtypeBytes(ctx_.modelType);
    std::vector<char>& all = gatherStaging_;
    all.resize(ctx_.comm.size() * chunk * bytes);
    std::vector<char>& secondary = secondary_[layer];
    if (!secondary.empty()) {
      // hpZ: the node's secondary pieces are the rank-major buffer's consecutive parts.
      gatherPieces(*ctx_.node, secondary.data(), secondary.size() / bytes, all.data(),
                   !persistent_[layer]);
    } else {
      const int swapped = swapGroup_[layer];
      const char* own = swapped >= 0 ? paramSwapper_->acquire(static_cast<size_t>(swapped))
                                     : working_.data() + layout_->shardBegin(t0) * bytes;
      gatherPieces(ctx_.comm, own, chunk, all.data(), !persistent_[layer]);
      if (swapped >= 0) paramSwapper_->release(static_cast<size_t>(swapped));
      if (ctx_.node && ctx_.config.zero.hpzPartitionSize > 1 && !persistent_[layer]) {
        const size_t piece = all.size() / static_cast<size_t>(ctx_.node->size());
        const char* from = all.data() + static_cast<size_t>(ctx_.node->rank()) * piece;
        secondary.assign(from, from + piece);
      }
    }
    ++gathers_;
    layout_->unpack(all.data(), ctx_.modelType, t0, t1, layerParams_[layer].data(), DType::F32,
                    layerBase(layer));
  });
}

void ZeroStage3::gatherPieces(Communicator& group, const char* own, size_t count, char* all,
                              bool mayQuantize) {
  if (!ctx_.config.zero.quantizedWeights || !mayQuantize) {
    group.allGather(own, all, count, ctx_.modelType);
    return;
  }
  // qwZ: int8 blocks of the values, decoded into the working dtype where the plain gather would
  // have delivered them.
  quantizedAllGather(group, own, count, ctx_.modelType, all);
}

void ZeroStage3::waitLayer(int layer) {
  if (layerReady_[layer].valid()) layerReady_[layer].get();
}

void ZeroStage3::dropLayer(int layer) {
  if (!persistent_[layer]) freeLayer(layer);
}

void ZeroStage3::freeLayer(int layer) {
  if (layerParams_[layer].empty()) return;
  waitLayer(layer);  // an in-flight gather still writes into it
  liveElements_ -= layerParams_[layer].size();
  std::vector<float>().swap(layerParams_[layer]);
  layerReady_[layer] = {};
}

void ZeroStage3::prefetchFrom(int layer, int direction) {
  // Gathers ahead need overlap_comm's thread; swap reads ahead have their own.
  const bool gather = ctx_.config.zero.overlapComm;
  if (!gather && !paramSwapper_) return;
  int64_t budget = ctx_.config.zero.prefetchBucketSize;
  size_t readAhead = 0;  // elements read ahead and not gathered yet: live too
  for (int k = layer + direction; k >= 0 && k < layerCount() && budget > 0; k += direction) {
    const size_t numel = layerNumel(k);
    if (!layerParams_[k].empty()) continue;
    if (static_cast<int64_t>(liveElements_ + readAhead + numel) >
        ctx_.config.zero.maxLiveParameters)
      break;
    // The read first: it starts at once on the swapper's threads, before the gather's turn.
    if (swapGroup_[k] >= 0 && !paramSwapper_->prefetch(static_cast<size_t>(swapGroup_[k]))) break;
    if (gather)
      gatherLayer(k);
    else
      readAhead += numel;
    budget -= static_cast<int64_t>(numel);
  }
}

ZeroStage3::OffloadStats ZeroStage3::offloadStats() const {
  OffloadStats out;
  out.gathers = gathers_;
  for (int l = 0; l < layerCount(); ++l)
    if (!layerParams_[l].empty()) out.gatheredLayers.push_back(l);
  if (!paramSwapper_) return out;
  const ParamSwapper::Counters c = paramSwapper_->counters();
  out.reads = c.reads;
  out.readsAhead = c.readsAhead;
  out.hits = c.hits;
  out.bytesRead = c.bytesRead;
  out.bytesWritten = c.bytesWritten;
  out.maxReadsInFlight = c.maxReadsInFlight;
  out.maxHomeBytesIn = c.maxHomeBytesIn;
  out.buffers = paramSwapper_->slotCount();
  out.bufferBytes = paramSwapper_->slotBytes();
  out.buffersLocked = paramSwapper_->slotsLocked();
  for (size_t g : paramSwapper_->slotGroups())
    for (int l = 0; l < layerCount(); ++l)
      if (swapGroup_[l] == static_cast<int>(g)) out.layersInBuffers.push_back(l);
  for (int l = 0; l < layerCount(); ++l)
    if (swapGroup_[l] >= 0) out.swappedLayers.push_back(l);
  return out;
}

}  // namespace ds::runtime
