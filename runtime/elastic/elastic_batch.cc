// computeElasticBatch: DeepSpeed's elasticity.py step by step (section numbers of
// ../shared/DEEPSPEED-SEMANTICS.md in the comments), including its float arithmetic in v0.2's
// fallback and its list-order quirks.
#include "runtime/elastic/elastic_batch.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <set>

#include "common/error.h"

namespace ds::runtime {
namespace {

// Highly composite numbers up to 720720 (elasticity.py's HCN_LIST).
constexpr int64_t kHighlyComposite[] = {
    1,      2,      4,      6,      12,     24,     36,     48,     60,     120,    180,
    240,    360,    720,    840,    1260,   1680,   2520,   5040,   7560,   10080,  15120,
    20160,  25200,  27720,  45360,  50400,  55440,  83160,  110880, 166320, 221760, 277200,
    332640, 498960, 554400, 665280, 720720};

// The largest HCN <= v; DeepSpeed's argmax trick gives 720720 from v >= 720720 on.
int64_t highlyCompositeAtMost(int64_t v) {
  int64_t best = kHighlyComposite[0];
  for (int64_t h : kHighlyComposite)
    if (h <= v) best = h;
  return best;
}

// Union over micro-batch sizes mb dividing bs of the divisors of bs / mb within [min, max].
std::vector<int64_t> validGpuCounts(int64_t bs, const std::vector<int64_t>& micro, int64_t minGpus,
                                    int64_t maxGpus) {
  std::set<int64_t> valid;
  for (int64_t mb : micro) {
    if (bs % mb != 0) continue;
    const int64_t q = bs / mb;
    for (int64_t i = 1; i * i <= q; ++i) {
      if (q % i != 0) continue;
      for (int64_t d : {i, q / i})
        if (d >= minGpus && d <= maxGpus) valid.insert(d);
    }
  }
  return {valid.begin(), valid.end()};
}

double floorDiv(double a, double b) { return std::floor(a / b); }

}  // namespace

std::string pythonList(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

// §14.3
ElasticV01 elasticV01(const std::vector<int64_t>& micro, int64_t maxBatch, int64_t minGpus,
                      int64_t maxGpus, bool preferLarger) {
  if (micro.empty()) throw Error("elasticity.micro_batch_sizes: expected at least one size");
  const int64_t smallest = *std::min_element(micro.begin(), micro.end());
  if (minGpus == 0) minGpus = 1;
  if (maxGpus == 0) maxGpus = maxBatch / smallest;
  for (int64_t mb : micro)
    if (mb > maxBatch)
      throw Error("All micro batches must be less than or equal to max_acceptable_batch_size: " +
                  std::to_string(maxBatch) + " (elasticity.micro_batch_sizes has " +
                  std::to_string(mb) + "; raise elasticity.max_train_batch_size or drop it)");
  std::vector<int64_t> bases = micro;
  int64_t lcm = 1;
  for (int64_t mb : micro) {
    lcm = std::lcm(lcm, mb);
    if (lcm > (int64_t{1} << 50)) break;  // beyond any max_train_batch_size: skipped below
  }
  bases.push_back(lcm);
  std::set<int64_t> candidates;
  for (int64_t base : bases) {
    if (base > maxBatch) continue;  // HEAD behaviour (PR #8237)
    if (base == maxBatch) {
      candidates.insert(base);
    } else {
      candidates.insert(highlyCompositeAtMost(maxBatch / base) * base);
    }
  }
  ElasticV01 best{smallest, std::nullopt};
  size_t bestCount = 0;
  for (int64_t bs : candidates) {
    std::vector<int64_t> valid = validGpuCounts(bs, micro, minGpus, maxGpus);
    const bool better = valid.size() > bestCount ||
                        (valid.size() == bestCount &&
                         (preferLarger ? bs > best.finalBatchSize : bs < best.finalBatchSize));
    if (better) {
      bestCount = valid.size();
      best = {bs, std::move(valid)};
    }
  }
  return best;
}

ElasticBatch computeElasticBatch(const ElasticityConfig& c, int64_t worldSize,
                                 const char* envWorldSize) {
  // §14.2 steps 3-8 (the config's own rules were checked when it was parsed).
  if (!c.enabled)
    throw Error("Elasticity is disabled, please enable it (\"enabled\": true in the elasticity "
                "block) if running an elastic training job.");
  const std::vector<int64_t>& micro = c.microBatchSizes;
  double finalBatch = 0;
  std::vector<int64_t> valid;
  if (c.version == 0.1) {
    const ElasticV01 r = elasticV01(micro, c.maxTrainBatchSize, c.minGpus, c.maxGpus,
                                    c.preferLargerBatch);
    finalBatch = static_cast<double>(r.finalBatchSize);
    if (!r.validGpus) {
      if (worldSize > 0)  // DeepSpeed: TypeError ('NoneType' is not iterable)
        throw Error("no candidate batch size of at most " + std::to_string(c.maxTrainBatchSize) +
                    " runs on any GPU count in [" + std::to_string(c.minGpus) + ", " +
                    std::to_string(c.maxGpus) +
                    "]; widen min_gpus/max_gpus or change micro_batch_sizes");
    } else {
      valid = *r.validGpus;
    }
  } else {
    // §14.4
    const int64_t ngpn = c.numGpusPerNode, mp = c.modelParallelSize;
    if (ngpn % mp != 0)
      throw Error("In Elasticity v0.2, number of GPUs per node:" + std::to_string(ngpn) +
                  " should be divisible by model parallel size " + std::to_string(mp));
    int64_t current = worldSize;
    if (current == 0) {
      const std::string env = envWorldSize ? envWorldSize : "";
      const bool numeric = !env.empty() && env.find_first_not_of("0123456789") == std::string::npos;
      if (!numeric || env.size() > 15)
        throw Error("Elasticity V 0.2 needs WORLD_SIZE to compute valid batch size. Either give it "
                    "(-w/--world-size) or set it as an environment variable. Value of WORLD_SIZE "
                    "as environment variable is " +
                    (envWorldSize ? "'" + env + "'" : std::string("None")));
      current = std::stoll(env);
    }
    if (current <= 0)
      throw Error("elasticity v0.2: the world size must be positive, got " + std::to_string(current));
    const int64_t dpPerNode = ngpn / mp;
    const ElasticV01 nodes =
        elasticV01(micro, static_cast<int64_t>(static_cast<double>(c.maxTrainBatchSize) / dpPerNode),
                   static_cast<int64_t>(static_cast<double>(c.minGpus) / ngpn),
                   static_cast<int64_t>(static_cast<double>(c.maxGpus) / ngpn), c.preferLargerBatch);
    if (!nodes.validGpus)  // DeepSpeed: TypeError ('NoneType' object is not iterable)
      throw Error("no candidate batch size runs on any node count in [" +
                  std::to_string(c.minGpus / ngpn) + ", " + std::to_string(c.maxGpus / ngpn) +
                  "]; widen min_gpus/max_gpus or change micro_batch_sizes");
    finalBatch = static_cast<double>(nodes.finalBatchSize * dpPerNode);
    for (int64_t n : *nodes.validGpus) valid.push_back(n * dpPerNode);
    if (std::find(valid.begin(), valid.end(), current / mp) == valid.end()) {
      // The fallback: any world size, with the float arithmetic DeepSpeed does.
      const double curDp = static_cast<double>(current) / ngpn * dpPerNode;
      std::vector<double> cands;
      for (int64_t mb : micro)
        cands.push_back(floorDiv(static_cast<double>(c.maxTrainBatchSize), mb * curDp) * (mb * curDp));
      finalBatch = c.preferLargerBatch ? *std::max_element(cands.begin(), cands.end())
                                       : *std::min_element(cands.begin(), cands.end());
      valid = {static_cast<int64_t>(curDp)};
    }
    // v0.2's own micro-batch choice (get_microbatch) is not part of what compute_elastic_config
    // returns without return_microbatch: with a world size the step below replaces it.
  }

  ElasticBatch out;
  out.finalBatchSize = static_cast<int64_t>(finalBatch);  // §14.2 step 10
  out.validGpus = valid;
  if (worldSize > 0) {  // §14.2 step 11
    if (std::find(valid.begin(), valid.end(), worldSize) == valid.end())
      throw Error("World size (" + std::to_string(worldSize) +
                  ") is not valid with the current list of valid GPU counts: " + pythonList(valid));
    std::set<int64_t> sizes(micro.begin(), micro.end());
    for (auto it = sizes.rbegin(); it != sizes.rend(); ++it)
      if ((out.finalBatchSize / worldSize) % *it == 0) {
        out.microBatchSize = *it;
        break;
      }
    if (!out.microBatchSize)
      throw Error("Unable to find divisible micro batch size world_size=" +
                  std::to_string(worldSize) + ", final_batch_size=" +
                  std::to_string(out.finalBatchSize) + ", and micro_batches=" + pythonList(micro) +
                  ".");
    out.gradientAccumulationSteps = out.finalBatchSize / (*out.microBatchSize * worldSize);
  }
  return out;
}

ElasticBatch elasticReplicaBatch(const ElasticityConfig& c, int64_t worldSize) {
  const int64_t mp = c.modelParallelSize;
  if (mp == 1) return computeElasticBatch(c, worldSize, nullptr);
  if (worldSize < mp || worldSize % mp != 0)
    throw Error("world size " + std::to_string(worldSize) +
                " is not a whole number of model replicas of " + std::to_string(mp) +
                " ranks (elasticity.model_parallel_size): an elastic job with model or pipeline "
                "parallelism grows and shrinks by whole data-parallel replicas; run a multiple "
                "of " + std::to_string(mp) + " ranks");
  // Section 14.2 step 9: v0.2 takes the whole world (model-parallel ranks included) this way.
  const std::string total = std::to_string(worldSize);
  ElasticBatch out = computeElasticBatch(c, 0, total.c_str());
  const int64_t dp = worldSize / mp;
  if (std::find(out.validGpus.begin(), out.validGpus.end(), dp) == out.validGpus.end()) {
    std::vector<int64_t> worlds;
    for (int64_t v : out.validGpus) worlds.push_back(v * mp);
    throw Error("World size (" + total + ") is " + std::to_string(dp) +
                " data-parallel replicas of " + std::to_string(mp) +
                " ranks, which is not among the valid data-parallel sizes " +
                pythonList(out.validGpus) + " (world sizes " + pythonList(worlds) + ")");
  }
  std::set<int64_t> sizes(c.microBatchSizes.begin(), c.microBatchSizes.end());
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it)
    if ((out.finalBatchSize / dp) % *it == 0) {
      out.microBatchSize = *it;
      break;
    }
  if (!out.microBatchSize)
    throw Error("Unable to find divisible micro batch size data-parallel size=" +
                std::to_string(dp) + ", final_batch_size=" + std::to_string(out.finalBatchSize) +
                ", and micro_batches=" + pythonList(c.microBatchSizes) + ".");
  out.gradientAccumulationSteps = out.finalBatchSize / (*out.microBatchSize * dp);
  return out;
}

}  // namespace ds::runtime
