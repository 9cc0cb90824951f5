// The pieces of the ZeRO strategies that several stages share: bucket planning, the layer's
// gradient scratch, boundary reductions (stages 0, 1), reductions during backward (stages 2, 3),
// shard all-gathers (stages 1, 2), and the factory.
#include "runtime/zero/zero_stage.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "runtime/comm/quantized_collectives.h"
#include "runtime/zero/parallel_passes.h"
#include "runtime/zero/square_sum.h"
#include "runtime/zero/zero_stages.h"

namespace ds::runtime {

std::unique_ptr<ZeroStage> ZeroStage::make(const ZeroContext& context) {
  std::unique_ptr<ZeroStage> stage;
  switch (context.config.zero.stage) {
    case 0:
      stage = std::make_unique<ZeroStage0>(context);
      break;
    case 1:
      stage = std::make_unique<ZeroStage1>(context);
      break;
    case 2:
      stage = std::make_unique<ZeroStage2>(context);
      break;
    case 3:
      stage = std::make_unique<ZeroStage3>(context);
      break;
    default:
      throw Error("zero_optimization.stage: expected 0..3, got " +
                  std::to_string(context.config.zero.stage));
  }
  // The offload axis: any stage with either home.
  stage->states_ = OptimizerStateHome::make(context.config, context.comm.rank());
  return stage;
}

ZeroStage::ZeroStage(const ZeroContext& context, int shardParts) : ctx_(context) {
  Communicator& comm = ctx_.comm;
  layout_ = std::make_unique<PartitionLayout>(ctx_.specs, comm.size(), comm.rank());
  shardLayout_ = shardParts == 1
                     ? std::make_unique<PartitionLayout>(ctx_.specs, 1, 0)
                     : std::make_unique<PartitionLayout>(ctx_.specs, comm.size(), comm.rank());
  // Stages 1, 2: updated shards are all-gathered in runs of allgather_bucket_size elements.
  const auto gatherLimit =
      static_cast<size_t>(std::max<int64_t>(1, ctx_.config.zero.allgatherBucketSize));
  gatherRuns_ = layout_->tensorRuns(gatherLimit / comm.size());
  planBuckets();
}

ZeroStage::~ZeroStage() = default;

void ZeroStage::planBuckets() {
  // Whole layers, in backward order, until a bucket holds reduce_bucket_size elements.
  const int layers = layerCount();
  const size_t limit = static_cast<size_t>(std::max<int64_t>(1, ctx_.config.zero.reduceBucketSize));
  bucketOfLayer_.assign(layers, -1);
  for (int l = layers - 1; l >= 0;) {
    Bucket b{l, l, ctx_.layerTensors[l].first, ctx_.layerTensors[l].second};
    size_t elements = layerNumel(l);
    int next = l - 1;
    while (next >= 0 && elements + layerNumel(next) <= limit) {
      elements += layerNumel(next);
      b.firstLayer = next;
      b.t0 = ctx_.layerTensors[next].first;
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

size_t ZeroStage::layerNumel(int layer) const {
  const auto [t0, t1] = ctx_.layerTensors[layer];
  if (t0 == t1) return 0;
  return layout_->tensor(t1 - 1).flatOffset + layout_->tensor(t1 - 1).numel -
         layout_->tensor(t0).flatOffset;
}

float ZeroStage::preDivide() const {
  const PrecisionConfig& p = ctx_.config.precision;
  return p.prescaleGradients ? static_cast<float>(1.0 / p.gradientPredivideFactor) : 1.0f;
}

void ZeroStage::useLocalGradients(bool local) {
  if (local)
    throw Error("ZeRO stage " + std::to_string(stage()) +
                " partitions what a step reads: only stage 0 can step on a rank's own gradients");
}

float* ZeroStage::layerGradients(int layer) {
  if (keepsWholeGradients() && ctx_.gradType == DType::F32) {
    layerAccumulated_.resize(static_cast<size_t>(layerCount()), 0);
    if (!layerAccumulated_[static_cast<size_t>(layer)]) {
      layersInPlace_.push_back(layer);
      return reinterpret_cast<float*>(grads_.data()) + layerBase(layer);
    }
  }
  return openScratch(layer);
}

float* ZeroStage::openScratch(int layer) {
  closeScratch(layer);  // a backward begun again (a failed pass) starts from zero
  auto free = std::find_if(layerScratch_.begin(), layerScratch_.end(),
                           [](const LayerScratch& s) { return s.layer < 0; });
  if (free == layerScratch_.end()) free = layerScratch_.insert(free, LayerScratch{});
  free->layer = layer;
  free->values.assign(layerNumel(layer), 0.0f);
  return free->values.data();
}

float* ZeroStage::scratchOf(int layer) {
  for (LayerScratch& s : layerScratch_)
    if (s.layer == layer) return s.values.data();
  throw Error("ZeRO: gradientsDone for layer " + std::to_string(layer) +
              " without its layerGradients");
}

void ZeroStage::closeScratch(int layer) {
  for (LayerScratch& s : layerScratch_)
    if (s.layer == layer) s.layer = -1;
}

void ZeroStage::fillMaster(size_t t0, size_t t1, float* out) {
  if (master_.empty()) return;
  // The whole working copy (stages 0-2): the shard's slices of tensors [t0, t1).
  shardLayout_->extractShard(working_.data(), ctx_.modelType, 0, t0, t1, out, DType::F32);
}

float* ZeroStage::masterData() {
  return master_.empty() ? reinterpret_cast<float*>(working_.data()) : master_.data();
}

void ZeroStage::zeroGradients() {
  forEachChunk(grads_.size(), [&](size_t begin, size_t end) {
    std::memset(grads_.data() + begin, 0, end - begin);
  });
  std::fill(layerAccumulated_.begin(), layerAccumulated_.end(), 0);
}

void ZeroStage::allReduceTensorGradient(size_t t, Communicator& group) {
  if (stage() > 1)
    throw Error("ZeRO stage " + std::to_string(stage()) +
                " partitions gradients: a tied tensor's gradient cannot be summed whole");
  const TensorPlacement& tensor = layout_->tensor(t);
  ctx_.queue.run([&] {
    group.allReduce(grads_.data() + tensor.flatOffset * dtypeBytes(ctx_.gradType), tensor.numel,
                    ctx_.gradType);
  });
}

void ZeroStage::reduceBucket(void* staging, void* own, size_t t0, size_t t1) {
  Communicator& comm = ctx_.comm;
  const size_t chunk = layout_->chunk(t0, t1);
  // DeepSpeed's qgZ runs across nodes only: on one node the plain reduce-scatter.
  if (ctx_.config.zero.quantizedGradients && stage() == 3 && ctx_.crossNode &&
      ctx_.crossNode->size() > 1) {
    quantizedReduceBucket(staging, own, t0, t1);
    return;
  }
  if (ctx_.config.zero.reduceScatter) {
    comm.reduceScatter(staging, own, chunk, ctx_.commType);
    return;
  }
  // reduce_scatter: false, DeepSpeed's all-reduce alternative: everyone gets every sum and keeps
  // its own block (twice the traffic; the same bits, since both split the buffer alike).
  const size_t bytes = chunk * dtypeBytes(ctx_.commType);
  comm.allReduce(staging, comm.size() * chunk, ctx_.commType);
  std::memcpy(own, static_cast<const char*>(staging) + comm.rank() * bytes, bytes);
}

void ZeroStage::quantizedReduceBucket(void* staging, void* own, size_t t0, size_t t1) {
  Communicator& comm = ctx_.comm;
  const size_t chunk = layout_->chunk(t0, t1), ranks = static_cast<size_t>(comm.size());
  const size_t bytes = dtypeBytes(ctx_.commType);
  quantizedReduceScatter(*ctx_.node, *ctx_.crossNode, staging, own, chunk, ctx_.commType);
  // The 1-D tensors' slices, where they sit in every rank's block: gathered from the staging and
  // reduce-scattered in the communication dtype, over the quantised sums.
  std::vector<std::pair<size_t, size_t>> exact;  // (offset in the block, elements)
  size_t exactCount = 0;
  for (size_t t = t0; t < t1; ++t) {
    if (ctx_.specs[t].shape.size() != 1) continue;
    const TensorPlacement& p = layout_->tensor(t);
    exact.emplace_back(p.shardOffset - layout_->shardBegin(t0), p.slice);
    exactCount += p.slice;
  }
  if (exactCount == 0) return;
  std::vector<char> packed(ranks * exactCount * bytes), reduced(exactCount * bytes);
  for (size_t r = 0; r < ranks; ++r) {
    char* to = packed.data() + r * exactCount * bytes;
    for (const auto& [offset, count] : exact) {
      std::memcpy(to, static_cast<const char*>(staging) + (r * chunk + offset) * bytes,
                  count * bytes);
      to += count * bytes;
    }
  }
  comm.reduceScatter(packed.data(), reduced.data(), exactCount, ctx_.commType);
  const char* from = reduced.data();
  for (const auto& [offset, count] : exact) {
    std::memcpy(static_cast<char*>(own) + offset * bytes, from, count * bytes);
    from += count * bytes;
  }
}

void ZeroStage::loadGroupGradients(size_t t0, size_t t1, std::vector<float>& out, float unscale) {
  // The shard is the flat buffer (stage 0) or the gradient buffer is the shard (stages 2, 3).
  const size_t chunk = shardLayout_->chunk(t0, t1);
  out.resize(chunk);
  const size_t bytes = dtypeBytes(ctx_.gradType);
  const char* from = grads_.data() + shardLayout_->shardBegin(t0) * bytes;
  forEachChunk(chunk, [&](size_t begin, size_t end) {
    convertElements(from + begin * bytes, ctx_.gradType, out.data() + begin, DType::F32,
                    end - begin, unscale);
  });
}

float* ZeroStage::gradientsInPlace(size_t t0, size_t) {
  if (ctx_.gradType != DType::F32) return nullptr;
  return reinterpret_cast<float*>(grads_.data()) + shardLayout_->shardBegin(t0);
}

double ZeroStage::unscaledSquareSum(const char* from, size_t count, float unscale) const {
  const size_t bytes = dtypeBytes(ctx_.gradType);
  float block[1024];
  SquareSum squares;
  for (size_t i = 0; i < count; i += 1024) {
    const size_t n = std::min<size_t>(1024, count - i);
    convertElements(from + i * bytes, ctx_.gradType, block, DType::F32, n, unscale);
    squares.add(block, n);
  }
  return squares.total();
}

GradientStatistics ZeroStage::gradientStatistics(
    const std::vector<std::pair<size_t, size_t>>& groups, float unscale,
    std::vector<float>& scratch) {
  GradientStatistics out;
  for (const auto& [t0, t1] : groups) {
    // In place, read where they lie; else loaded (for the step to reuse with one sub-group).
    const float* inPlace = gradientsInPlace(t0, t1);
    if (!inPlace) loadGroupGradients(t0, t1, scratch, unscale);
    const size_t groupBegin = shardLayout_->shardBegin(t0);
    auto size = [&](size_t i) {
      return shardLayout_->shardBegin(t0 + i + 1) - shardLayout_->shardBegin(t0 + i);
    };
    const std::vector<double> totals = perTensorTotals(t1 - t0, size, [&](size_t i) {
      const size_t at = shardLayout_->shardBegin(t0 + i) - groupBegin;
      if (inPlace)
        return unscaledSquareSum(reinterpret_cast<const char*>(inPlace + at), size(i), unscale);
      SquareSum squares;
      squares.add(scratch.data() + at, size(i));
      return squares.total();
    });
    for (size_t t = t0; t < t1; ++t)
      addTensorStatistics(out, totals[t - t0], ctx_.specs[t].countInGradNorm);
  }
  return out;
}

std::vector<float> ZeroStage::fullParameters() {
  std::vector<float> out(ctx_.count);
  convertElements(working_.data(), ctx_.modelType, out.data(), DType::F32, ctx_.count);
  return out;
}

MemoryUsage ZeroStage::memory() const {
  MemoryUsage m;
  m.parameters = working_.size();
  m.gradients = grads_.size();
  m.masterWeights = master_.size() * sizeof(float);
  m.buffers = halfShard_.capacity();
  for (const LayerScratch& s : layerScratch_) m.buffers += s.values.capacity() * sizeof(float);
  for (const ConvertedLayer& c : converted_) m.buffers += c.values.capacity() * sizeof(float);
  for (const auto& v : staging_) m.buffers += v.capacity();
  for (const auto& v : received_) m.buffers += v.capacity();
  return m;
}

void ZeroStage::fillWholeWorkingCopy(const InitialValues& draw) {
  const size_t bytes = dtypeBytes(ctx_.modelType);
  working_.resize(ctx_.count * bytes);
  // Every rank keeps all of it, so every rank draws all of it: no collective is needed.
  for (size_t t = 0; t < ctx_.specs.size(); ++t) {
    const TensorPlacement& p = layout_->tensor(t);
    drawInto(draw, t, 0, p.numel, working_.data() + p.flatOffset * bytes);
  }
}

void ZeroStage::drawInto(const InitialValues& draw, size_t t, size_t begin, size_t end, void* out) {
  if (begin >= end) return;
  if (ctx_.modelType == DType::F32) {
    draw(t, begin, end, static_cast<float*>(out));
    return;
  }
  std::vector<float> scratch(std::min(kInitChunk, end - begin));
  char* at = static_cast<char*>(out);
  for (size_t i = begin; i < end; i += kInitChunk) {
    const size_t n = std::min(kInitChunk, end - i);
    draw(t, i, i + n, scratch.data());
    convertElements(scratch.data(), DType::F32, at, ctx_.modelType, n);
    at += n * dtypeBytes(ctx_.modelType);
  }
}

void ZeroStage::accumulateWholeGradients(int layer) {
  if (!layerAccumulated_.empty()) layerAccumulated_[static_cast<size_t>(layer)] = 1;
  if (const auto in = std::find(layersInPlace_.begin(), layersInPlace_.end(), layer);
      in != layersInPlace_.end()) {  // added where they belong already
    layersInPlace_.erase(in);
    return;
  }
  const size_t base = layerBase(layer), numel = layerNumel(layer);
  if (numel > 0)
    accumulateElements(grads_.data() + base * dtypeBytes(ctx_.gradType), ctx_.gradType,
                       scratchOf(layer), DType::F32, numel);
  closeScratch(layer);
}

void ZeroStage::reduceBucketsAtBoundary(bool keepOwnSlicesOnly) {
  // Both stages use the rank-major staging of stage 1, so every element is summed in the same
  // collective position whatever the stage: stage 0 (all-reduce) and 1 (reduce-scatter) agree
  // bit for bit on every backend, ring ones included.
  Communicator& comm = ctx_.comm;
  // Stage 0 on one rank with nothing to convert or pre-divide: the round trip through the staging
  // would copy every gradient twice to change none (bench_gpt's step spent 1.7% of its time there).
  if (!keepOwnSlicesOnly && comm.size() == 1 && ctx_.commType == ctx_.gradType &&
      preDivide() == 1.0f)
    return;
  for (const Bucket& b : buckets_) {
    const size_t chunk = layout_->chunk(b.t0, b.t1);
    std::vector<char>& in = staging_[0];
    in.resize(comm.size() * chunk * dtypeBytes(ctx_.commType));
    layout_->pack(grads_.data(), ctx_.gradType, 0, b.t0, b.t1, in.data(), ctx_.commType,
                  preDivide());
    // The sums go back into the gradient buffer: whole at stage 0, the own slices at stage 1.
    if (!keepOwnSlicesOnly) {
      ctx_.queue.run([&] { comm.allReduce(in.data(), comm.size() * chunk, ctx_.commType); });
      layout_->unpack(in.data(), ctx_.commType, b.t0, b.t1, grads_.data(), ctx_.gradType, 0);
    } else {
      std::vector<char>& reduced = received_[0];
      reduced.resize(chunk * dtypeBytes(ctx_.commType));
      ctx_.queue.run([&] { reduceBucket(in.data(), reduced.data(), b.t0, b.t1); });
      layout_->insertShard(reduced.data(), ctx_.commType, b.t0, b.t1, grads_.data(), ctx_.gradType,
                           0);
    }
  }
}

void ZeroStage::packForReductionDuringBackward(int layer) {
  const size_t base = layerBase(layer);
  const size_t b = static_cast<size_t>(bucketOfLayer_[layer]);
  const Bucket& bucket = buckets_[b];
  if (layer == bucket.lastLayer) {  // first layer of this bucket in backward order
    const size_t slot = nextSlot_;
    nextSlot_ = (nextSlot_ + 1) % staging_.size();
    if (slotBusy_[slot].valid()) slotBusy_[slot].get();
    bucketSlot_[b] = slot;
    const size_t chunk = layout_->chunk(bucket.t0, bucket.t1);
    staging_[slot].resize(ctx_.comm.size() * chunk * dtypeBytes(ctx_.commType));
    received_[slot].resize(chunk * dtypeBytes(ctx_.commType));
  }
  const size_t slot = bucketSlot_[b];
  layout_->packPart(scratchOf(layer), DType::F32, base, ctx_.layerTensors[layer].first,
                    ctx_.layerTensors[layer].second, bucket.t0, bucket.t1, staging_[slot].data(),
                    ctx_.commType, preDivide());
  closeScratch(layer);
  if (layer != bucket.firstLayer) return;
  // The bucket is complete: reduce-scatter it while the backward pass goes on.
  const size_t chunk = layout_->chunk(bucket.t0, bucket.t1);
  char* destination = grads_.data() + layout_->shardBegin(bucket.t0) * dtypeBytes(ctx_.gradType);
  slotBusy_[slot] = ctx_.queue.submit([this, slot, chunk, destination, t0 = bucket.t0,
                                       t1 = bucket.t1] {
    reduceBucket(staging_[slot].data(), received_[slot].data(), t0, t1);
    accumulateElements(destination, ctx_.gradType, received_[slot].data(), ctx_.commType, chunk);
  });
}

void ZeroStage::waitForBackwardReductions() {
  // Every bucket was reduced during the backward passes; wait for the last ones.
  for (auto& busy : slotBusy_)
    if (busy.valid()) busy.get();
}

const float* ZeroStage::convertedParameters(int layer) {
  const size_t base = layerBase(layer);
  if (ctx_.modelType == DType::F32) return reinterpret_cast<const float*>(working_.data()) + base;
  // 16-bit working copy: the model computes in fp32 on the rounded values, in a view of its own
  // until released: an earlier layer's view may still be in use (tied embeddings in the head).
  ConvertedLayer* view = nullptr;
  for (ConvertedLayer& c : converted_)
    if (c.layer == layer) view = &c;
  if (view == nullptr) {
    for (ConvertedLayer& c : converted_)
      if (c.layer < 0 && view == nullptr) view = &c;
    if (view == nullptr) view = &converted_.emplace_back();
    view->layer = layer;
    view->values.resize(layerNumel(layer));
    convertElements(working_.data() + base * dtypeBytes(ctx_.modelType), ctx_.modelType,
                    view->values.data(), DType::F32, view->values.size());
  }
  ++view->holds;
  return view->values.data();
}

void ZeroStage::releaseConverted(int layer) {
  for (ConvertedLayer& c : converted_)
    if (c.layer == layer && --c.holds <= 0) c = {-1, 0, std::move(c.values)};
}

void ZeroStage::allGatherShards(bool halfWritten) {
  // All-gather the updated shards into the whole working copy, bucket by bucket.
  Communicator& comm = ctx_.comm;
  const DType modelType = ctx_.modelType;
  const size_t world = comm.size(), bytes = dtypeBytes(modelType);
  for (const auto& [t0, t1] : gatherRuns_) {
    const size_t chunk = layout_->chunk(t0, t1);
    std::vector<char>& all = staging_[0];
    all.resize(world * chunk * bytes);
    const char* own = halfWritten
                          ? halfShard_.data() + layout_->shardBegin(t0) * bytes
                          : reinterpret_cast<const char*>(master_.data() + layout_->shardBegin(t0));
    if (!halfWritten && modelType != DType::F32) {
      received_[0].resize(chunk * bytes);
      convertElements(own, DType::F32, received_[0].data(), modelType, chunk);
      own = received_[0].data();
    }
    ctx_.queue.run([&] {
      if (ctx_.config.zero.allgatherPartitions) {
        comm.allGather(own, all.data(), chunk, modelType);
      } else {  // DeepSpeed's alternative: one broadcast per rank
        std::memcpy(all.data() + comm.rank() * chunk * bytes, own, chunk * bytes);
        for (size_t q = 0; q < world; ++q)
          comm.broadcast(all.data() + q * chunk * bytes, chunk, modelType, static_cast<int>(q));
      }
    });
    layout_->unpack(all.data(), modelType, t0, t1, working_.data(), modelType, 0);
  }
}

void ZeroStage::convertMasterToWorking(size_t count, bool halfWritten) {
  if (!master_.empty() && !halfWritten)
    convertElements(master_.data(), DType::F32, working_.data(), ctx_.modelType, count);
}

}  // namespace ds::runtime
