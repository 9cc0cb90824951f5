// Shared by the sliced-GPT tests: tiny GPT configs, deterministic token batches keyed by the
// global sample index, and the mapping of a model rank's sliced tensors back into the one-rank
// model's flat layout (through ParamSpec::slice), to compare slices with the unsliced model.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/slice_map.h"
#include "runtime/comm/group_factory.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/model/gpt.h"
#include "runtime/model/model.h"

namespace ds::test {

// An in-process shared-memory group of `size` ranks (threads), with small chunks so that the
// tests' messages cross them.
inline std::vector<runtime::ShmCommunicator> shmGroup(int size) {
  runtime::ShmOptions options;
  options.chunkBytes = 4096;
  options.timeout = std::chrono::seconds(30);
  return runtime::ShmCommunicator::inProcessGroup(size, options);
}

// 256 tokens pad to 256 at every model size up to 4 (make-vocab-size-divisible-by 64 x t), so the
// sliced job's vocabulary is the one-rank job's.
inline runtime::GptConfig tinyGpt() {
  runtime::GptConfig c;
  c.numLayers = 2;
  c.hiddenSize = 32;
  c.numAttentionHeads = 4;
  c.seqLength = 16;
  c.maxPositionEmbeddings = 16;
  c.vocabSize = 256;
  c.makeVocabSizeDivisibleBy = 64;
  return c;
}

// Sample `index`'s seq + 1 tokens: a fixed hash, so every rank builds the same sample.
inline void appendSample(runtime::Batch& b, uint64_t index, size_t seq, int vocab) {
  std::vector<int32_t> tokens(seq + 1);
  for (size_t i = 0; i <= seq; ++i) {
    uint64_t x = (index + 1) * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 29;
    tokens[i] = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
  }
  b.inputIds.insert(b.inputIds.end(), tokens.begin(), tokens.end() - 1);
  b.targetIds.insert(b.targetIds.end(), tokens.begin() + 1, tokens.end());
  b.sampleIds.push_back(index);
  ++b.size;
}

inline runtime::Batch tokenBatch(uint64_t first, size_t samples, size_t seq, int vocab) {
  runtime::Batch b;
  for (size_t s = 0; s < samples; ++s) appendSample(b, first + s, seq, vocab);
  return b;
}

// The full-tensor element index of local element e of a (possibly sliced) tensor: the runs'
// repeats in order hold the local elements.
inline size_t fullIndex(const runtime::ParamSpec& spec, size_t e) {
  const SliceMap& map = spec.slice;
  if (map.whole()) return e;
  for (const StridedRun& run : map.runs) {
    if (e < run.count * run.repeat)
      return run.fullBegin + (e / run.count) * run.stride + e % run.count;
    e -= run.count * run.repeat;
  }
  return ~size_t{0};
}

// Writes a rank's flat values (its parameters() layout: a slice and/or a pipeline stage) into
// `full` (the one-rank model's layout, `reference` its table; tensors matched by name); counts how
// often each full element was written in `writes`. `agree` (if given) turns false when an element
// written before (a replicated tensor, a tied copy) gets a different value, bit for bit.
inline void scatterSlice(const runtime::Gpt& model, const std::vector<float>& local,
                         const std::vector<runtime::ParamSpec>& reference, std::vector<float>& full,
                         std::vector<int>& writes, bool* agree = nullptr) {
  for (const runtime::ParamSpec& spec : model.parameters()) {
    const auto ref = std::find_if(reference.begin(), reference.end(),
                                  [&](const runtime::ParamSpec& r) { return r.name == spec.name; });
    if (ref == reference.end()) throw Error("scatterSlice: " + spec.name + " is not in the model");
    for (size_t e = 0; e < spec.numel; ++e) {
      const size_t at = ref->offset + fullIndex(spec, e);
      const float value = local[spec.offset + e];
      if (agree && writes[at] > 0 && full[at] != value) *agree = false;
      full[at] = value;
      ++writes[at];
    }
  }
}

// max |a - b| / max |b| over one tensor of the one-rank layout.
inline double tensorRelativeDifference(const std::vector<float>& a, const std::vector<float>& b,
                                       const runtime::ParamSpec& spec) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

// ||a - b|| / ||b|| over one tensor of the one-rank layout (Euclidean norms).
inline double tensorNormDifference(const std::vector<float>& a, const std::vector<float>& b,
                                   const runtime::ParamSpec& spec) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    scale += static_cast<double>(b[i]) * b[i];
  }
  return scale > 0.0 ? std::sqrt(diff / scale) : std::sqrt(diff);
}

// ZeRO++'s node groups of `rank` among `world` ranks, `places` to a node (ranks [k p, (k + 1) p)):
// its node, and the ranks of its place in every node, as ds-worker makes them.
struct NodeGroups {
  std::unique_ptr<runtime::Communicator> node, crossNode;
};
inline NodeGroups makeNodeGroups(runtime::GroupFactory& factory, int rank, int world, int places) {
  std::vector<int> node, cross;
  for (int q = rank / places * places; q < rank / places * places + places; ++q) node.push_back(q);
  for (int q = rank % places; q < world; q += places) cross.push_back(q);
  NodeGroups groups;
  groups.node = factory.group(node, "node");
  groups.crossNode = factory.group(cross, "cross_node");
  return groups;
}

inline runtime::GroupOptions loopbackGroupOptions(const std::string& prefix) {
  runtime::GroupOptions options;
  options.bindAddress = "127.0.0.1";
  options.storePrefix = prefix;
  options.timeout = std::chrono::seconds(30);
  return options;
}

}  // namespace ds::test
