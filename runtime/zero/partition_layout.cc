// PartitionLayout: slices, staging pack/unpack and dtype conversion for ZeRO's buffers.
#include "runtime/zero/partition_layout.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "runtime/comm/elementwise_reduce.h"

namespace ds::runtime {
namespace {

char* bytesAt(void* base, DType type, size_t index) {
  return static_cast<char*>(base) + index * dtypeBytes(type);
}
const char* bytesAt(const void* base, DType type, size_t index) {
  return static_cast<const char*>(base) + index * dtypeBytes(type);
}

// Part q's slice of tensor p, from `flat` (elements from flatBase on, times `scale`) to element
// `at` of `out`; the slice's padding past the tensor's end is zeroed.
void copySliceOut(const TensorPlacement& p, size_t q, const void* flat, DType flatType,
                  size_t flatBase, void* out, DType outType, size_t at, float scale) {
  const size_t begin = std::min(p.numel, q * p.slice), end = std::min(p.numel, begin + p.slice);
  convertElements(bytesAt(flat, flatType, p.flatOffset - flatBase + begin), flatType,
                  bytesAt(out, outType, at), outType, end - begin, scale);
  std::memset(bytesAt(out, outType, at + end - begin), 0,
              (p.slice - (end - begin)) * dtypeBytes(outType));
}

// The way back: part q's slice from element `at` of `in` into `flat`, its padding dropped.
void copySliceIn(const TensorPlacement& p, size_t q, const void* in, DType inType, size_t at,
                 void* flat, DType flatType, size_t flatBase) {
  const size_t begin = std::min(p.numel, q * p.slice), end = std::min(p.numel, begin + p.slice);
  convertElements(bytesAt(in, inType, at), inType,
                  bytesAt(flat, flatType, p.flatOffset - flatBase + begin), flatType, end - begin);
}

}  // namespace

void convertElements(const void* in, DType inType, void* out, DType outType, size_t count,
                     float scale) {
  if (count == 0) return;
  if (inType == outType && scale == 1.0f) {
    std::memmove(out, in, count * dtypeBytes(inType));
    return;
  }
  if (inType == DType::F32 && outType == DType::F32) {
    const float* src = static_cast<const float*>(in);
    float* dst = static_cast<float*>(out);
    for (size_t i = 0; i < count; ++i) dst[i] = src[i] * scale;
    return;
  }
  // Through fp32 in blocks that stay in L1.
  constexpr size_t kBlock = 4096;
  float block[kBlock];
  for (size_t done = 0; done < count; done += kBlock) {
    const size_t n = std::min(kBlock, count - done);
    toFloat(bytesAt(in, inType, done), block, n, inType);
    if (scale != 1.0f)
      for (size_t i = 0; i < n; ++i) block[i] *= scale;
    fromFloat(block, bytesAt(out, outType, done), n, outType);
  }
}

PartitionLayout::PartitionLayout(const std::vector<ParamSpec>& specs, int parts, int rank)
    : parts_(parts), rank_(rank) {
  if (parts < 1 || rank < 0 || rank >= parts)
    throw Error("PartitionLayout: rank " + std::to_string(rank) + " of " + std::to_string(parts));
  shardOffsets_.push_back(0);
  for (const auto& spec : specs) {
    TensorPlacement t;
    t.flatOffset = spec.offset;
    t.numel = spec.numel;
    t.slice = (spec.numel + parts - 1) / parts;
    t.shardOffset = shardOffsets_.back();
    tensors_.push_back(t);
    shardOffsets_.push_back(t.shardOffset + t.slice);
  }
}

std::vector<std::pair<size_t, size_t>> PartitionLayout::tensorRuns(size_t maxChunk) const {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t t0 = 0; t0 < tensors_.size();) {
    size_t t1 = t0 + 1;
    while (t1 < tensors_.size() && chunk(t0, t1 + 1) <= maxChunk) ++t1;
    runs.push_back({t0, t1});
    t0 = t1;
  }
  return runs;
}

std::vector<ParamSpec> PartitionLayout::shardSpecs(const std::vector<ParamSpec>& specs) const {
  std::vector<ParamSpec> out;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    ParamSpec s = specs[t];
    s.shape = {static_cast<int64_t>(tensors_[t].slice)};
    s.offset = tensors_[t].shardOffset;
    s.numel = tensors_[t].slice;
    out.push_back(std::move(s));
  }
  return out;
}

void PartitionLayout::packPart(const void* flat, DType flatType, size_t flatBase, size_t t0,
                               size_t t1, size_t s0, size_t s1, void* staging, DType stagingType,
                               float scale) const {
  const size_t chunkSize = chunk(s0, s1);
  for (int q = 0; q < parts_; ++q)
    for (size_t t = t0; t < t1; ++t) {
      const TensorPlacement& p = tensors_[t];
      copySliceOut(p, q, flat, flatType, flatBase, staging, stagingType,
                   q * chunkSize + p.shardOffset - shardOffsets_[s0], scale);
    }
}

void PartitionLayout::unpack(const void* staging, DType stagingType, size_t t0, size_t t1,
                             void* flat, DType flatType, size_t flatBase) const {
  const size_t chunkSize = chunk(t0, t1);
  for (int q = 0; q < parts_; ++q)
    for (size_t t = t0; t < t1; ++t) {
      const TensorPlacement& p = tensors_[t];
      copySliceIn(p, q, staging, stagingType, q * chunkSize + p.shardOffset - shardOffsets_[t0],
                  flat, flatType, flatBase);
    }
}

void PartitionLayout::extractShard(const void* flat, DType flatType, size_t flatBase, size_t t0,
                                   size_t t1, void* shard, DType shardType, float scale) const {
  for (size_t t = t0; t < t1; ++t)
    copySliceOut(tensors_[t], rank_, flat, flatType, flatBase, shard, shardType,
                 tensors_[t].shardOffset - shardOffsets_[t0], scale);
}

void PartitionLayout::insertShard(const void* shard, DType shardType, size_t t0, size_t t1,
                                  void* flat, DType flatType, size_t flatBase) const {
  for (size_t t = t0; t < t1; ++t)
    copySliceIn(tensors_[t], rank_, shard, shardType, tensors_[t].shardOffset - shardOffsets_[t0],
                flat, flatType, flatBase);
}

}  // namespace ds::runtime

namespace ds::runtime {

void accumulateElements(void* dst, DType dstType, const void* src, DType srcType, size_t count) {
  if (dstType == DType::F32 && srcType == DType::F32) {
    float* d = static_cast<float*>(dst);
    const float* s = static_cast<const float*>(src);
    for (size_t i = 0; i < count; ++i) d[i] += s[i];
    return;
  }
  constexpr size_t kBlock = 2048;
  float a[kBlock], b[kBlock];
  for (size_t done = 0; done < count; done += kBlock) {
    const size_t n = std::min(kBlock, count - done);
    toFloat(bytesAt(dst, dstType, done), a, n, dstType);
    toFloat(bytesAt(src, srcType, done), b, n, srcType);
    for (size_t i = 0; i < n; ++i) a[i] += b[i];
    fromFloat(a, bytesAt(dst, dstType, done), n, dstType);
  }
}

}  // namespace ds::runtime
