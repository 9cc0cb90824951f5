// checkRankMemory: see the header.
#include "runtime/config/rank_memory_preflight.h"

#include <functional>
#include <optional>
#include <vector>

#include "common/error.h"
#include "runtime/config/neox_config.h"
#include "runtime/config/rank_peak_memory.h"

namespace ds::runtime {
namespace {

struct Candidate {
  std::string setting;  // what to write in the config, or do
  DeepSpeedConfig config;
  int world = 0;
};

// The settings to try, in the order the header gives, each one change from the job as given.
std::vector<Candidate> candidates(const DeepSpeedConfig& c, int world) {
  std::vector<Candidate> out;
  const auto& opt = c.zero.offloadOptimizer;
  if (opt.device != OffloadDevice::Nvme) {
    DeepSpeedConfig n = c;
    n.zero.offloadOptimizer.device = OffloadDevice::Nvme;
    std::string text =
        "offload the optimizer state (zero_optimization.offload_optimizer: {device: nvme, "
        "nvme_path: DIR})";
    if (n.zero.stage == 0) {
      n.zero.stage = 1;
      text = "zero_optimization.stage: 1 and " + text;
    }
    out.push_back({text, n, world});
  }
  if (c.zero.offloadParam.device != OffloadDevice::Nvme) {
    DeepSpeedConfig n = c;
    n.zero.stage = 3;
    n.zero.offloadOptimizer.device = OffloadDevice::Nvme;
    n.zero.offloadParam.device = OffloadDevice::Nvme;
    out.push_back({std::string(c.zero.stage == 3 ? "" : "zero_optimization.stage: 3 with ") +
                       "zero_optimization.offload_param: {device: nvme, nvme_path: DIR} and "
                       "offload_optimizer nvme",
                   n, world});
  }
  const bool swapping = opt.device == OffloadDevice::Nvme;
  for (int64_t size = c.zero.subGroupSize / 2; swapping && size >= 100'000; size /= 2) {
    DeepSpeedConfig n = c;
    n.zero.subGroupSize = size;
    out.push_back({"zero_optimization.sub_group_size: " + std::to_string(size), n, world});
  }
  for (int64_t count = opt.bufferCount - 1; swapping && count >= 1; --count) {
    DeepSpeedConfig n = c;
    n.zero.offloadOptimizer.bufferCount = count;
    out.push_back(
        {"zero_optimization.offload_optimizer.buffer_count: " + std::to_string(count), n, world});
  }
  if (c.zero.stage >= 1)
    for (int more = world * 2; more <= world * 64; more *= 2)
      out.push_back(
          {std::to_string(more) + " ranks (more nodes, the same ranks per node)", c, more});
  return out;
}

}  // namespace

namespace {

// The job's pipe or model slices are not modelled by the estimate yet.
bool sizesJob(const JobConfig& job) {
  return job.gpt && job.gpt->parallel.pipe <= 1 && job.gpt->parallel.model <= 1;
}

// The GPT's shape at the config's micro-batch: what every estimate here starts from.
ModelShape jobShape(const JobConfig& job, const Tokenizer& tokenizer) {
  return gptModelShape(modelConfigFor(*job.gpt, tokenizer),
                       static_cast<double>(job.deepspeed.batch.microBatchPerGpu));
}

}  // namespace

void checkRankMemory(const JobConfig& job, int world, int ranksHere, const MemoryBudget& budget,
                     const std::string& configPath) {
  if (!sizesJob(job)) return;
  checkRankMemory(job, *makeJobTokenizer(*job.gpt), world, ranksHere, budget, configPath);
}

std::optional<double> predictedRankPeak(const JobConfig& job, const Tokenizer& tokenizer,
                                        int world) {
  if (!sizesJob(job)) return std::nullopt;
  return estimateRankPeakMemory(job.deepspeed, jobShape(job, tokenizer), world).peak();
}

void checkRankMemory(const JobConfig& job, const Tokenizer& tokenizer, int world, int ranksHere,
                     const MemoryBudget& budget, const std::string& configPath) {
  if (!sizesJob(job)) return;
  const DeepSpeedConfig& c = job.deepspeed;
  const ModelShape shape = jobShape(job, tokenizer);
  const double perRank = static_cast<double>(budget.availableBytes) / std::max(1, ranksHere);
  const RankPeakMemory need = estimateRankPeakMemory(c, shape, world);
  if (need.peak() <= perRank) return;
  std::string fix =
      "no single setting makes it fit: combine offload_optimizer and offload_param "
      "nvme with more ranks, or a machine with more memory";
  for (const Candidate& k : candidates(c, world)) {
    const double peak = estimateRankPeakMemory(k.config, shape, k.world).peak();
    if (peak <= perRank) {
      fix = k.setting + " would make it fit (" + humanBytes(peak) + " per rank)";
      break;
    }
  }
  throw Error("pre-flight: " + configPath + ": the training state needs " +
              humanBytes(need.peak()) + " of memory per rank at its peak (" + need.peakPhase() +
              ", as `ds-config memory " + configPath + "` predicts), but only " +
              humanBytes(perRank) + " is left under " + budget.source + " for each of the " +
              std::to_string(ranksHere) + " rank(s) on the node (" +
              humanBytes(static_cast<double>(budget.availableBytes)) + " shared by " +
              std::to_string(ranksHere) + " rank(s)); " + fix);
}

}  // namespace ds::runtime
