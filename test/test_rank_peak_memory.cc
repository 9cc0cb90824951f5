// The peak-RSS prediction's pieces that need no process: the GPT's shape from its config against
// the model itself, and the launcher's pre-flight against a fake budget (what it refuses, what it
// names, which setting it says would fit). test_rank_peak_memory_launch.cc holds the prediction
// against real ranks' VmHWM.
#include <catch2/catch.hpp>
#include <cmath>

#include "common/error.h"
#include "runtime/config/rank_memory_preflight.h"
#include "runtime/config/rank_peak_memory.h"
#include "runtime/model/gpt.h"

using namespace ds;
using namespace ds::runtime;

namespace {

JobConfig gptJob(int layers, int hidden, int stage) {
  JobConfig job;
  GptTrainConfig t;
  t.tokenizerType = "ByteTokenizer";
  t.model.numLayers = layers;
  t.model.hiddenSize = hidden;
  t.model.numAttentionHeads = 8;
  t.model.seqLength = 16;
  t.model.maxPositionEmbeddings = 16;
  job.gpt = t;
  job.deepspeed.batch = BatchConfig{1, 1, 1};
  job.deepspeed.zero.stage = stage;
  job.deepspeed.zero.subGroupSize = 1'000'000;
  job.deepspeed.zero.reduceBucketSize = 2'000'000;
  job.deepspeed.zero.offloadOptimizer.nvmePath = "/tmp";
  job.deepspeed.zero.offloadParam.nvmePath = "/tmp";
  return job;
}

double predicted(const JobConfig& job, int world) {
  const GptConfig model = modelConfigFor(*job.gpt, *makeJobTokenizer(*job.gpt));
  return estimateRankPeakMemory(job.deepspeed, gptModelShape(model, 1), world).peak();
}

std::string refusal(const JobConfig& job, int world, int ranksHere, double budget) {
  try {
    checkRankMemory(job, world, ranksHere, {static_cast<uint64_t>(budget), "a test budget"},
                    "job.yml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("gptModelShape counts the GPT's parameters as the model does", "[memory]") {
  struct Case {
    int layers, hidden;
    bool tied;
    PositionEmbedding pos;
    int experts = 1, interval = 1;  // MoE layers: every interval-th
    MoeKind kind = MoeKind::Dropless;
    bool residual = false;
  };
  for (const Case c :
       {Case{1, 64, true, PositionEmbedding::Learned},
        Case{4, 384, false, PositionEmbedding::Learned},
        Case{6, 256, true, PositionEmbedding::Rotary},
        Case{4, 128, true, PositionEmbedding::Rotary, 8, 1},
        Case{6, 128, false, PositionEmbedding::Learned, 4, 2, MoeKind::DeepSpeed},
        Case{4, 128, true, PositionEmbedding::Learned, 4, 3, MoeKind::DeepSpeed, true}}) {
    JobConfig job = gptJob(c.layers, c.hidden, 0);
    job.gpt->model.weightTying = c.tied;
    job.gpt->model.posEmb = c.pos;
    job.gpt->model.moe.numExperts = c.experts;
    job.gpt->model.moe.expertInterval = c.interval;
    job.gpt->model.moe.kind = c.kind;
    job.gpt->model.moe.useResidual = c.residual;
    const GptConfig model = modelConfigFor(*job.gpt, *makeJobTokenizer(*job.gpt));
    const double shape = gptModelShape(model, 1).parameters;
    const double real = static_cast<double>(Gpt(model).parameterCount());
    INFO("layers " << c.layers << " hidden " << c.hidden << " experts " << c.experts);
    CHECK(std::abs(shape - real) <= 0.005 * real);
    size_t experts = 0;  // the tensors the engine keeps in the experts' partition
    const Gpt built(model);
    for (const ParamSpec& s : built.parameters())
      if (s.expert) experts += s.numel;
    CHECK(gptModelShape(model, 1).expertParameters == static_cast<double>(experts));
    if (c.experts > 1) {  // the experts are most of it: the two counts agree exactly
      const double dense =
          gptModelShape(
              modelConfigFor(*gptJob(c.layers, c.hidden, 0).gpt, *makeJobTokenizer(*job.gpt)), 1)
              .parameters;
      CHECK(real > 1.5 * dense);
    }
  }
}

TEST_CASE("the 1-bit optimizers' estimates add their error feedback to Adam's moments",
          "[memory][onebit]") {
  const JobConfig job = gptJob(4, 128, 0);
  const GptConfig model = modelConfigFor(*job.gpt, *makeJobTokenizer(*job.gpt));
  const ModelShape shape = gptModelShape(model, 1);
  DeepSpeedConfig adam = job.deepspeed, onebit = job.deepspeed;
  onebit.optimizer = OptimizerConfig{OptimizerType::OneBitAdam, OneBitAdamParams{}};
  const double extra = estimateRankPeakMemory(onebit, shape, 4).optimizerStates -
                       estimateRankPeakMemory(adam, shape, 4).optimizerStates;
  CHECK(extra == Approx(4.0 * (1.0 + 0.25) * shape.parameters));  // worker + server error
  // 0/1 Adam also keeps its accumulated local updates; 1-bit LAMB its fresh variance (a third
  // element-wise state) and the previous momentum.
  DeepSpeedConfig zeroOne = job.deepspeed, lamb = job.deepspeed;
  zeroOne.optimizer = OptimizerConfig{OptimizerType::ZeroOneAdam, ZeroOneAdamParams{}};
  lamb.optimizer = OptimizerConfig{OptimizerType::OneBitLamb, OneBitLambParams{}};
  const double adamStates = estimateRankPeakMemory(adam, shape, 4).optimizerStates;
  CHECK(estimateRankPeakMemory(zeroOne, shape, 4).optimizerStates - adamStates ==
        Approx(4.0 * (1.0 + 0.25 + 1.0) * shape.parameters));
  CHECK(estimateRankPeakMemory(lamb, shape, 4).optimizerStates - adamStates ==
        Approx(4.0 * (1.0 + 1.0 + 0.25 + 1.0) * shape.parameters));
}

TEST_CASE("hpZ's estimate adds the rank's part of its node's secondary weights",
          "[memory][zeropp]") {
  const JobConfig job = gptJob(4, 128, 0);
  const GptConfig model = modelConfigFor(*job.gpt, *makeJobTokenizer(*job.gpt));
  const ModelShape shape = gptModelShape(model, 1);
  DeepSpeedConfig plain = job.deepspeed;
  plain.zero.stage = 3;
  plain.precision.modelDtype = DType::BF16;
  DeepSpeedConfig hpz = plain;
  hpz.zero.hpzPartitionSize = 2;
  const double extra = estimateRankPeakMemory(hpz, shape, 4).buffers -
                       estimateRankPeakMemory(plain, shape, 4).buffers;
  CHECK(extra == Approx(2.0 * shape.parameters / 2));  // bf16 weights over the node's 2 ranks
}

TEST_CASE(
    "with expert parallelism a rank's estimate holds 1/ep of the experts, their states "
    "over the expert-data group",
    "[memory][moe]") {
  JobConfig job = gptJob(4, 128, 2);
  job.gpt->model.moe.numExperts = 8;
  job.gpt->model.moe.kind = MoeKind::DeepSpeed;
  const GptConfig one = modelConfigFor(*job.gpt, *makeJobTokenizer(*job.gpt));
  GptConfig split = one;
  split.moe.expertParallelSize = 4;
  const ModelShape a = gptModelShape(one, 1), b = gptModelShape(split, 1);
  REQUIRE(a.expertParameters > 0.5 * a.parameters);
  for (int stage : {0, 1, 2, 3}) {
    INFO("ZeRO " << stage);
    DeepSpeedConfig c = job.deepspeed;
    c.zero.stage = stage;
    const RankPeakMemory ep1 = estimateRankPeakMemory(c, a, 8),
                         ep4 = estimateRankPeakMemory(c, b, 8);
    // fp32 working copies: whole at stages 0-2 (a rank holds its experts only), a shard at 3
    // (1/8 of all experts either way: 1/4 of them over 2 ranks).
    const double experts = 4.0 * a.expertParameters;
    CHECK(ep1.parameters - ep4.parameters ==
          Approx(stage == 3 ? 0.0 : experts * 3 / 4).epsilon(1e-9));
    // Adam's moments over the shard: the same 1/8 of all experts' on every rank from stage 1.
    if (stage >= 1) CHECK(ep4.optimizerStates == Approx(ep1.optimizerStates).epsilon(1e-9));
    if (stage == 0) CHECK(ep1.optimizerStates - ep4.optimizerStates == Approx(2 * experts * 3 / 4));
  }
}

TEST_CASE(
    "the memory pre-flight refuses a job that cannot fit, naming the need, the budget "
    "and the first setting that fits",
    "[memory]") {
  const JobConfig job = gptJob(4, 384, 1);
  const double need = predicted(job, 1);
  CHECK(refusal(job, 1, 1, need * 1.01).empty());
  // Two ranks on this machine share it: each gets half.
  CHECK_THAT(refusal(job, 2, 2, need * 1.01), Catch::Contains("shared by 2 rank(s)"));

  JobConfig offloaded = job;
  offloaded.deepspeed.zero.offloadOptimizer.device = OffloadDevice::Nvme;
  const double withOffload = predicted(offloaded, 1);
  REQUIRE(withOffload < need);
  const std::string why = refusal(job, 1, 1, (need + withOffload) / 2);
  CHECK_THAT(
      why, Catch::Contains("pre-flight: job.yml: the training state needs") &&
               Catch::Contains("per rank at its peak") && Catch::Contains("under a test budget") &&
               Catch::Contains("offload the optimizer state (zero_optimization.offload_optimizer: "
                               "{device: nvme") &&
               Catch::Contains("would make it fit"));

  // Already offloading: a smaller buffer_count is the next thing that fits.
  JobConfig slots = offloaded;
  slots.deepspeed.zero.offloadParam.device = OffloadDevice::Nvme;  // nothing more to offload
  slots.deepspeed.zero.stage = 3;
  JobConfig fewer = slots;
  fewer.deepspeed.zero.offloadOptimizer.bufferCount = 1;
  const double withFewer = predicted(fewer, 1), withSlots = predicted(slots, 1);
  REQUIRE(withFewer < withSlots);
  CHECK_THAT(refusal(slots, 1, 1, withFewer + 1),
             Catch::Contains("sub_group_size") || Catch::Contains("buffer_count"));

  // Only more ranks: a budget below every single-node setting but above the 2-rank share.
  const std::string ranks = refusal(slots, 1, 1, predicted(slots, 2) + 1);
  CHECK_THAT(ranks, Catch::Contains("would make it fit"));

  // A DeepSpeed JSON job has no model to size: not checked here (the engine checks its states).
  JobConfig json = job;
  json.gpt.reset();
  CHECK(refusal(json, 1, 1, 1).empty());
}
