// PartitionLayout: how ZeRO splits the flat parameter space across `parts` ranks. Every tensor is
// padded to a multiple of `parts` and rank q owns the q-th equal slice of each tensor; a rank's
// shard is its slices of all tensors back to back. So any run of consecutive tensors (a layer, a
// bucket) is ONE equal-count reduce-scatter / all-gather through a rank-major staging buffer,
// and a checkpoint written at one size can be re-sliced for another. parts = 1 (ZeRO 0) makes the
// shard the flat buffer itself.
#pragma once

#include <cstddef>
#include <vector>

#include "common/dtype.h"
#include "runtime/model/model.h"

namespace ds::runtime {

struct TensorPlacement {
  size_t flatOffset = 0;   // in the model's flat layout
  size_t numel = 0;        // real elements
  size_t slice = 0;        // elements per rank: ceil(numel / parts)
  size_t shardOffset = 0;  // where this tensor's slice sits in every rank's shard
};

class PartitionLayout {
 public:
  PartitionLayout(const std::vector<ParamSpec>& specs, int parts, int rank);

  int parts() const { return parts_; }
  int rank() const { return rank_; }
  const TensorPlacement& tensor(size_t t) const { return tensors_[t]; }
  size_t shardSize() const { return shardOffsets_.back(); }
  // Elements per rank of tensors [t0, t1): the shard chunk they occupy, starting at shardBegin.
  size_t shardBegin(size_t t0) const { return shardOffsets_[t0]; }
  size_t chunk(size_t t0, size_t t1) const { return shardOffsets_[t1] - shardOffsets_[t0]; }
  // Consecutive runs [t0, t1) of tensors whose chunk is at most maxChunk elements (a tensor
  // bigger than that is a run of its own): buckets, sub-groups.
  std::vector<std::pair<size_t, size_t>> tensorRuns(size_t maxChunk) const;
  // The optimizer's view of this rank's shard: one segment per tensor slice (padding included,
  // where gradients are always zero), with the tensor's weight-decay flag.
  std::vector<ParamSpec> shardSpecs(const std::vector<ParamSpec>& specs) const;

  // Rank-major staging for tensors [t0, t1): rank q's slices at q * chunk(t0, t1), padding zero.
  // `flat` holds tensors [t0, t1) in flat layout starting at element flatBase (any dtype).
  void pack(const void* flat, DType flatType, size_t flatBase, size_t t0, size_t t1, void* staging,
            DType stagingType, float scale = 1.0f) const {
    packPart(flat, flatType, flatBase, t0, t1, t0, t1, staging, stagingType, scale);
  }
  // Packs only tensors [t0, t1) into the staging of the wider run [s0, s1) (s0 <= t0, t1 <= s1):
  // a bucket filled layer by layer.
  void packPart(const void* flat, DType flatType, size_t flatBase, size_t t0, size_t t1, size_t s0,
                size_t s1, void* staging, DType stagingType, float scale) const;
  void unpack(const void* staging, DType stagingType, size_t t0, size_t t1, void* flat,
              DType flatType, size_t flatBase) const;
  // This rank's slices of tensors [t0, t1) taken from (times `scale`, as convertElements
  // applies it) / written to a flat-layout buffer.
  void extractShard(const void* flat, DType flatType, size_t flatBase, size_t t0, size_t t1,
                    void* shard, DType shardType, float scale = 1.0f) const;
  void insertShard(const void* shard, DType shardType, size_t t0, size_t t1, void* flat,
                   DType flatType, size_t flatBase) const;

 private:
  int parts_, rank_;
  std::vector<TensorPlacement> tensors_;
  std::vector<size_t> shardOffsets_;  // size tensors + 1
};

// Copies `count` elements between dtypes (fp32 <-> bf16/fp16 rounding to nearest even), scaling
// by `scale` on the way when it is not 1.
void convertElements(const void* in, DType inType, void* out, DType outType, size_t count,
                     float scale = 1.0f);

}  // namespace ds::runtime

namespace ds::runtime {

// dst[i] += src[i] across dtypes (in fp32, rounded once into dst's dtype).
void accumulateElements(void* dst, DType dstType, const void* src, DType srcType, size_t count);

}  // namespace ds::runtime
