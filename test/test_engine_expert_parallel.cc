// DeepSpeed-MoE's expert parallelism through the Engine, 4 ranks as threads (groups over a
// MemoryStore): each rank holds only its 1/ep of every MoE layer's experts, reduced and
// partitioned over its expert-data group.
//   - ep 1, 2 and 4 on data 4 (DeepSpeed's top-2 gating with the residual MLP; NeoX's dropless
//     Sinkhorn MoE at ep 1, as it has no ep group), against ONE rank that holds every expert and
//     runs the same micro-batches as gradient accumulation: the loss of each of 3 steps and every
//     parameter (the experts assembled from their ranks by name) agree within 1e-5 relative. The
//     same micro-batches, because both routers are functions of the micro-batch (Sinkhorn's
//     balance, DeepSpeed's l_aux per rank), exactly as in DeepSpeed.
//   - ZeRO 1, 2 and 3 at ep 2: the experts' states on each rank are 1/edp of its experts' (the
//     per-tensor slices of ZeRO's partition layout), and training equals the ZeRO 0 run within
//     1e-5.
//   - a checkpoint saved at ep 2 (ZeRO 2) holds one experts' part per expert-parallel rank and
//     loads at ep 4 (ZeRO 3), at ep 1 (ZeRO 1) and on one rank, and ds-generate's layer reader
//     reads it: bit for bit the saved parameters.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/memory_store.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/checkpoint_layers.h"
#include "runtime/engine/engine.h"
#include "runtime/zero/partition_layout.h"
#include "test/gpt_parallel_harness.h"
#include "test/rank_threads.h"
#include "test/scratch_dir.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::onThreads;
using ds::test::rankCheck;

namespace {

constexpr int kWorld = 4, kMicro = 2, kSteps = 3;

GptConfig moeGpt(MoeKind kind) {
  GptConfig c = test::tinyGpt();
  c.moe.numExperts = 4;
  c.moe.kind = kind;
  c.moe.topK = 2;
  c.moe.router = MoeRouter::Sinkhorn;
  c.moe.tokenDropping = false;  // DeepSpeed's drop_tokens false: capacity never binds
  return c;
}

// Adam's eps 1e-6 and lr 1e-3: a gradient that is zero but for rounding (the key bias's: softmax
// does not see it) steps by about lr x sign(rounding) with eps 1e-8, which differs between any
// two summation orders (one rank's accumulation against the data group's reduction, an expert's
// rows from two ranks in one product against two); and lr 1e-2 moves a weight of std 0.02 by
// half of itself per step, so such flips show at 1e-4. The gradient norms, which Adam's scale
// invariance would not show, are compared too.
std::string engineJson(int stage, int data) {
  return R"({"train_batch_size": )" + std::to_string(kMicro * kWorld) +
         R"(, "train_micro_batch_size_per_gpu": )" + std::to_string(kMicro) +
         R"(, "gradient_accumulation_steps": )" + std::to_string(kWorld / data) +
         R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decay": 0.01,
                                                        "eps": 1e-6}},
    "gradient_clipping": 1.0,
    "zero_optimization": {"stage": )" +
         std::to_string(stage) + R"(, "reduce_bucket_size": 3000, "allgather_bucket_size": 3000,
    "stage3_param_persistence_threshold": 0}})";
}

// Every tensor by name: a replicated one from any rank (the first), an expert from its rank.
using Tensors = std::map<std::string, std::vector<float>>;

struct Run {
  std::vector<double> losses;     // per step, the data group's mean
  std::vector<double> gradNorms;  // per step, before clipping (every tensor's gradient in it)
  Tensors tensors;
  std::vector<MemoryUsage> expertMemory;      // per rank
  std::vector<std::vector<ParamSpec>> specs;  // per rank: its table
};

void collect(const Gpt& model, const std::vector<float>& flat, Tensors& into) {
  for (const ParamSpec& s : model.parameters())
    into.emplace(
        s.name, std::vector<float>(flat.begin() + static_cast<std::ptrdiff_t>(s.offset),
                                   flat.begin() + static_cast<std::ptrdiff_t>(s.offset + s.numel)));
}

struct Job {
  int world = kWorld, ep = 1, stage = 0;
  std::string save, load;  // checkpoint directory to save to after training / load before it
  int steps = kSteps;
};

// `world` ranks of data parallelism (1: every micro-batch of a step as gradient accumulation),
// the experts split over consecutive groups of `ep`.
Run train(const GptConfig& base, const Job& job) {
  const int world = job.world, ep = job.ep;
  MemoryStore store;
  Run run;
  std::vector<std::vector<double>> losses(world), norms(world);
  std::vector<Tensors> tensors(world);
  run.expertMemory.resize(world);
  run.specs.resize(world);
  onThreads(world, [&](int r) {
    GroupFactory factory(
        store, {r, {world}},
        test::loopbackGroupOptions("ep" + std::to_string(ep) + "w" + std::to_string(world)));
    std::unique_ptr<Communicator> data = factory.world();
    std::unique_ptr<Communicator> experts, expertData;
    GptConfig config = base;
    config.moe.expertParallelSize = ep;
    GptPlacement placement;
    ParallelGroups groups;
    if (ep > 1) {
      std::vector<int> same, spread;
      for (int q = r / ep * ep; q < r / ep * ep + ep; ++q) same.push_back(q);
      for (int q = r % ep; q < world; q += ep) spread.push_back(q);
      experts = factory.group(same, "expert");
      expertData = factory.group(spread, "expert_data");
      placement.experts = groups.experts = experts.get();
      groups.expertData = expertData.get();
    }
    Gpt model(config, placement);
    const auto ds = parseDeepSpeedConfig(engineJson(job.stage, world), world, "ep-test");
    Engine engine(model, ds, *data, 7, groups);
    if (!job.load.empty()) engine.loadCheckpoint(job.load);
    const int gas = kWorld / world;
    for (int step = 0; step < job.steps; ++step) {
      double sum = 0.0;
      for (int m = 0; m < gas; ++m) {
        // Micro-batch k of the step is rank k's in the 4-rank run.
        const uint64_t first = static_cast<uint64_t>((step * kWorld + r * gas + m) * kMicro);
        sum += engine.forwardBackward(
            test::tokenBatch(first, kMicro, config.seqLength, config.vocabSize));
        engine.step();
      }
      norms[r].push_back(engine.lastGradNorm());
      float mean = static_cast<float>(sum / gas);
      data->allReduce(&mean, 1);
      losses[r].push_back(mean / static_cast<float>(world));
    }
    if (!job.save.empty()) engine.saveCheckpoint(job.save, "tag");
    collect(model, engine.fullParameters(), tensors[r]);
    run.expertMemory[r] = engine.expertMemory();
    run.specs[r] = model.parameters();
  });
  run.losses = losses[0];
  run.gradNorms = norms[0];
  for (const Tensors& t : tensors) run.tensors.insert(t.begin(), t.end());
  return run;
}

// ||a - b|| / ||b|| per tensor, every tensor of `want` present in `got`.
void requireSameTraining(const Run& got, const Run& want, double tolerance) {
  REQUIRE(got.losses.size() == want.losses.size());
  REQUIRE(got.gradNorms.size() == want.gradNorms.size());
  for (size_t s = 0; s < want.losses.size(); ++s) {
    INFO("step " << s + 1 << ": loss " << got.losses[s] << " against " << want.losses[s]
                 << ", gradient norm " << got.gradNorms[s] << " against " << want.gradNorms[s]);
    CHECK(std::fabs(got.losses[s] - want.losses[s]) <= tolerance * std::fabs(want.losses[s]));
    CHECK(std::fabs(got.gradNorms[s] - want.gradNorms[s]) <= tolerance * want.gradNorms[s]);
  }
  REQUIRE(got.tensors.size() == want.tensors.size());
  for (const auto& [name, values] : want.tensors) {
    const auto it = got.tensors.find(name);
    REQUIRE(it != got.tensors.end());
    REQUIRE(it->second.size() == values.size());
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < values.size(); ++i) {
      diff += (double(it->second[i]) - values[i]) * (double(it->second[i]) - values[i]);
      scale += double(values[i]) * values[i];
    }
    INFO(name << ": relative difference " << std::sqrt(diff / scale));
    CHECK(std::sqrt(diff) <= tolerance * std::sqrt(scale));
  }
}

}  // namespace

TEST_CASE(
    "expert parallelism: ep 1, 2 and 4 train as one rank holding every expert, both "
    "MoE flavours",
    "[engine][moe]") {
  for (MoeKind kind : {MoeKind::Dropless, MoeKind::DeepSpeed}) {
    INFO("moe-type " << moeKindName(kind));
    const GptConfig config = moeGpt(kind);
    const Run one = train(config, {1, 1, 0});
    REQUIRE(one.losses.size() == kSteps);
    // NeoX's dropless experts are split over the model-parallel ranks, not an ep group (refused
    // in MoeConfig::validate): data parallelism only.
    for (int ep : kind == MoeKind::Dropless ? std::vector<int>{1} : std::vector<int>{1, 2, 4}) {
      INFO("ep " << ep);
      const Run run = train(config, {kWorld, ep, 0});
      requireSameTraining(run, one, 1e-5);
      // Each rank's table holds 4 / ep of the 4 experts of each MoE layer.
      size_t experts = 0;
      for (const ParamSpec& s : run.specs[0])
        if (s.expert && s.name.find("dense_h_to_4h.weight") != std::string::npos) ++experts;
      CHECK(experts == static_cast<size_t>(2 * 4 / ep));  // 2 MoE layers
    }
  }
}

namespace {

// The rank's expert tensors as a table of their own (offsets from 0), and their element count.
std::vector<ParamSpec> expertTable(const std::vector<ParamSpec>& specs, size_t& numel) {
  std::vector<ParamSpec> experts;
  numel = 0;
  for (ParamSpec s : specs)
    if (s.expert) {
      s.offset = numel;
      numel += s.numel;
      experts.push_back(s);
    }
  return experts;
}

// The flat offset of layer l's first tensor (LayerAccess hands a layer out from there).
size_t firstOfLayer(const Gpt& model, int l) {
  for (const ParamSpec& s : model.parameters())
    if (s.layer == l) return s.offset;
  return 0;
}

}  // namespace

TEST_CASE(
    "expert parallelism: at ZeRO 1, 2 and 3 with ep 2 each rank keeps 1/edp of its "
    "experts' states and trains as ZeRO 0",
    "[engine][moe]") {
  const GptConfig config = moeGpt(MoeKind::DeepSpeed);
  // Without expert parallelism every rank holds every expert, its states partitioned over the
  // whole data group.
  const Run ep1 = train(config, {kWorld, 1, 2});
  size_t allExperts = 0;
  const PartitionLayout overData(expertTable(ep1.specs[0], allExperts), kWorld, 0);
  CHECK(ep1.expertMemory[0].optimizerStates == 2 * sizeof(float) * overData.shardSize());
  CHECK(ep1.expertMemory[0].parameters == sizeof(float) * allExperts);

  const Run zero0 = train(config, {kWorld, 2, 0});
  const int ep = 2, edp = kWorld / ep;
  for (int stage : {1, 2, 3}) {
    INFO("ZeRO " << stage);
    const Run run = train(config, {kWorld, ep, stage});
    requireSameTraining(run, zero0, 1e-5);
    for (int r = 0; r < kWorld; ++r) {
      // The rank's experts only, each tensor in edp equal slices (the last one padded).
      size_t whole = 0;
      const PartitionLayout shard(expertTable(run.specs[r], whole), edp, 0);
      const size_t slice = shard.shardSize();
      const MemoryUsage& m = run.expertMemory[r];
      INFO("rank " << r << ": " << whole << " expert parameters, slice " << slice);
      CHECK(whole * ep == allExperts);
      CHECK(m.optimizerStates == 2 * sizeof(float) * slice);  // AdamW's two moments
      CHECK(m.gradients == sizeof(float) * (stage >= 2 ? slice : whole));
      CHECK(m.parameters == sizeof(float) * (stage == 3 ? slice : whole));
      // fp32: a master shard of its own beside the whole working copy at stages 1 and 2; the
      // working shard itself at 3.
      CHECK(m.masterWeights == sizeof(float) * (stage == 3 ? 0 : slice));
    }
  }
}

TEST_CASE("expert parallelism: a checkpoint saved at ep 2 loads at ep 4 and on one rank",
          "[engine][moe][checkpoint]") {
  const std::string dir = test::makeScratchDir("ep-checkpoint");
  const GptConfig config = moeGpt(MoeKind::DeepSpeed);
  Job save{kWorld, 2, 2};
  save.save = dir;
  const Run saved = train(config, save);
  for (const char* part : {"tag/experts_00", "tag/experts_01"})
    CHECK(std::filesystem::exists(std::filesystem::path(dir) / part / "manifest.json"));
  for (const Job& load : {Job{kWorld, 4, 3}, Job{1, 1, 0}, Job{kWorld, 1, 1}}) {
    INFO("ep " << load.ep << ", world " << load.world << ", ZeRO " << load.stage);
    Job j = load;
    j.load = dir;
    j.steps = 0;
    const Run loaded = train(config, j);
    REQUIRE(loaded.tensors.size() == saved.tensors.size());
    for (const auto& [name, values] : saved.tensors) {
      INFO(name);
      CHECK(loaded.tensors.at(name) == values);
    }
  }
  // ds-generate's reader: a one-rank model's layers, each expert from its part.
  const Gpt whole(config);
  CheckpointLayers layers(whole, dir + "/tag", DType::F32);
  size_t checked = 0;
  for (int l = 0; l < whole.layerCount(); ++l) {
    const float* values = layers.acquireParameters(l);
    for (const ParamSpec& s : whole.parameters())
      if (s.layer == l) {
        INFO(s.name);
        const float* at = values + (s.offset - firstOfLayer(whole, l));
        CHECK(std::vector<float>(at, at + s.numel) == saved.tensors.at(s.name));
        ++checked;
      }
    layers.releaseParameters(l);
  }
  CHECK(checked == whole.parameters().size());
}
