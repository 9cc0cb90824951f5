// The ZeRO engine end to end on the built-in MLP, ranks as threads: stages agree with each other,
// per-rank model-state bytes follow the ZeRO formulas, overlap and stage-3 knobs change nothing
// numerically, fp16 overflows skip steps without advancing the schedule, accumulation matches a
// bigger micro-batch.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>

#include "engine_harness.h"
#include "runtime/config/model_state_estimate.h"

using namespace ds::test;
using ds::runtime::MemoryUsage;

namespace {

constexpr size_t kPsi = 5508;  // MLP 16-64-64-4; every tensor divides by 1, 2 and 4

double maxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / (std::fabs(double(b[i])) + 1e-3));
  return worst;
}

}  // namespace

TEST_CASE("engine: ZeRO stages 0-3 train to bitwise identical parameters on every rank") {
  for (int world : {1, 2, 3, 4}) {
    for (const char* precision : {"fp32", "bf16"}) {
      INFO("world " << world << " " << precision);
      const auto reference = trainRanks(world, engineConfig(0, precision), 6);
      for (int stage = 1; stage <= 3; ++stage) {
        INFO("stage " << stage);
        const auto runs = trainRanks(world, engineConfig(stage, precision), 6);
        for (int r = 0; r < world; ++r) {
          CHECK(runs[r].params == reference[0].params);
          CHECK(runs[r].losses == reference[r].losses);
        }
      }
      CHECK(reference[0].losses.back() < reference[0].losses.front());
    }
  }
}

TEST_CASE(
    "engine: each rank draws only the elements it keeps, and all start from the model's values") {
  // The MLP, recording the element ranges this rank drew.
  struct RecordingMlp : ds::runtime::Mlp {
    using Mlp::Mlp;
    void initTensorRange(const ds::runtime::ParamSpec& spec, float* values, uint64_t seed,
                         size_t begin, size_t end) const override {
      drawn.push_back({spec.name, begin, end});
      Mlp::initTensorRange(spec, values, seed, begin, end);
    }
    struct Range {
      std::string name;
      size_t begin, end;
    };
    mutable std::vector<Range> drawn;
  };
  const std::vector<int> widths = {16, 64, 64, 4};
  const ds::runtime::Mlp reference(widths);
  std::vector<float> expected(reference.parameterCount());
  reference.initParameters(expected.data(), 7);
  for (int world : {1, 2, 3, 4}) {
    for (int stage : {0, 2, 3}) {
      for (const char* precision : {"fp32", "bf16"}) {
        INFO("world " << world << " stage " << stage << " " << precision);
        // A 16-bit working copy holds the values rounded.
        std::vector<float> want = expected;
        if (std::string(precision) == "bf16") {
          std::vector<uint16_t> half(want.size());
          ds::runtime::convertElements(want.data(), ds::DType::F32, half.data(), ds::DType::BF16,
                                       want.size());
          ds::runtime::convertElements(half.data(), ds::DType::BF16, want.data(), ds::DType::F32,
                                       want.size());
        }
        ds::runtime::ShmOptions options;
        options.chunkBytes = kTestChunkBytes;
        auto group = ds::runtime::ShmCommunicator::inProcessGroup(world, options);
        std::vector<std::vector<float>> params(world);
        std::vector<std::vector<RecordingMlp::Range>> drawn(world);
        onThreads(world, [&](int r) {
          const auto config = ds::runtime::parseDeepSpeedConfig(engineConfig(stage, precision),
                                                                world, "test-config");
          RecordingMlp model(widths);
          ds::runtime::Engine engine(model, config, group[r], 7);
          drawn[r] = model.drawn;  // before fullParameters, which draws nothing either
          params[r] = engine.fullParameters();
        });
        // Per tensor, how many times each element was drawn over all ranks.
        std::map<std::string, std::vector<int>> times;
        for (const auto& spec : reference.parameters()) times[spec.name].assign(spec.numel, 0);
        for (int r = 0; r < world; ++r) {
          CHECK(params[r] == want);
          size_t elements = 0;
          for (const auto& d : drawn[r]) {
            elements += d.end - d.begin;
            for (size_t e = d.begin; e < d.end; ++e) ++times[d.name][e];
          }
          // Stages 0-2 keep the whole working copy, stage 3 its slices of each tensor.
          size_t kept = 0;
          for (const auto& spec : reference.parameters()) {
            const size_t slice = (spec.numel + world - 1) / world;
            kept += stage < 3
                        ? spec.numel
                        : std::min(spec.numel, (r + 1) * slice) - std::min(spec.numel, r * slice);
          }
          CHECK(elements == kept);
        }
        const int each = stage < 3 ? world : 1;
        for (const auto& [name, counts] : times)
          CHECK(std::count(counts.begin(), counts.end(), each) == long(counts.size()));
      }
    }
  }
}

TEST_CASE("engine: gradient clipping applies the global norm across shards") {
  const std::string clip = R"("gradient_clipping": 0.05)";
  const auto whole = trainRanks(1, engineConfig(0, "fp32", clip), 5);
  for (int stage : {1, 2, 3}) {
    const auto sharded = trainRanks(4, engineConfig(stage, "fp32", clip), 5);
    // Same data (24 samples a step), the norm summed in another order: equal within rounding.
    CHECK(maxRelativeDifference(sharded[3].params, whole[0].params) < 1e-4);
  }
  const auto unclipped = trainRanks(1, engineConfig(0, "fp32"), 5);
  CHECK(maxRelativeDifference(unclipped[0].params, whole[0].params) > 1e-3);
}

TEST_CASE(
    "engine: fp32 gradients added, unscaled and clipped in place give the bits of the scratch and "
    "copy paths, and the step keeps no fp32 copy of a sub-group") {
  // Stage 2 adds each layer's backward into a scratch and steps on the gradients in place; stage
  // 1 adds into the gradient buffer itself (first micro-batch of the window) and steps on a copy;
  // stage 0 does both in place, stage 3 as stage 2. 4 ranks: the unscale is 1/4; 0.05 clips every
  // step. fp16 with fp32 accumulation adds a loss scale to undo (the norm is taken from the same
  // slices at every stage). With 3 micro-batches a step stages 2 and 3 sum in another order (they
  // reduce each micro-batch), so there stage 0 is held to stage 1: the later micro-batches add
  // through the scratch into gradients already there, the step reads them in place or copied.
  for (const char* precision : {"fp32", "fp16"})
    for (int accumulation : {1, 3}) {
      INFO(precision << ", " << accumulation << " micro-batches a step");
      const std::string extra =
          std::string(R"("gradient_clipping": 0.05, "gradient_accumulation_steps": )") +
          std::to_string(accumulation) +
          (std::string(precision) == "fp16" ? R"(, "data_types": {"grad_accum_dtype": "fp32"})"
                                            : "");
      const int referenceStage = accumulation == 1 ? 2 : 1;
      const auto reference = trainRanks(4, engineConfig(referenceStage, precision, extra), 4);
      for (int stage : {0, 1, 3}) {
        if (stage == referenceStage || (accumulation > 1 && stage == 3)) continue;
        INFO("stage " << stage << " against stage " << referenceStage);
        const auto runs = trainRanks(4, engineConfig(stage, precision, extra), 4);
        CHECK(runs[0].params == reference[0].params);
        CHECK(runs[0].losses == reference[0].losses);
      }
    }
  // In place, sub_group_size changes no buffer: no group-sized fp32 copy exists to bound.
  for (int stage : {0, 2}) {
    INFO("stage " << stage);
    std::string grouped = engineConfig(stage, "fp32");
    const std::string key = R"("stage": )" + std::to_string(stage) + ",";
    grouped.replace(grouped.find(key), key.size(), key + R"( "sub_group_size": 600,)");
    const auto whole = trainRanks(2, engineConfig(stage, "fp32"), 2);
    const auto runs = trainRanks(2, grouped, 2);
    CHECK(runs[0].params == whole[0].params);
    CHECK(runs[0].memory.buffers == whole[0].memory.buffers);
  }
}

TEST_CASE("engine: per-rank model-state bytes follow the ZeRO formulas") {
  struct Row {
    int stage;
    const char* precision;
    double whole, perRank;  // bytes per parameter: whole + perRank / N
  };
  // Mixed precision with Adam: 2 (16-bit params) + 2 (16-bit grads) + 12 (fp32 master, m, v).
  // fp32: the working parameters are their own master at stages 0 and 3.
  const Row rows[] = {{0, "bf16", 16, 0}, {1, "bf16", 4, 12}, {2, "bf16", 2, 14},
                      {3, "bf16", 0, 16}, {0, "fp32", 16, 0}, {1, "fp32", 8, 12},
                      {2, "fp32", 4, 16}, {3, "fp32", 0, 16}, {2, "fp16", 2, 14}};
  for (const Row& row : rows)
    for (int world : {1, 2, 4}) {
      INFO("stage " << row.stage << " " << row.precision << " world " << world);
      const auto runs = trainRanks(world, engineConfig(row.stage, row.precision), 1);
      const double expected = kPsi * (row.whole + row.perRank / world);
      for (const auto& run : runs) CHECK(run.memory.modelState() == expected);
      const ds::DType type = std::string(row.precision) == "fp32"   ? ds::DType::F32
                             : std::string(row.precision) == "bf16" ? ds::DType::BF16
                                                                    : ds::DType::F16;
      // `ds-config memory` prints the same estimate.
      CHECK(ds::runtime::estimateModelState(row.stage, type, type, kPsi, world, 8).total() ==
            expected);
    }
}

TEST_CASE("engine: overlap_comm and stage-3 live/prefetch limits change nothing numerically") {
  const auto plain = trainRanks(3, engineConfig(3, "fp32"), 5);
  const std::string knobs[] = {
      R"("zero_optimization": {"stage": 3, "overlap_comm": true, "reduce_bucket_size": 500,
         "stage3_param_persistence_threshold": 0})",
      R"("zero_optimization": {"stage": 3, "overlap_comm": true, "stage3_max_live_parameters": 100,
         "stage3_prefetch_bucket_size": 10, "stage3_max_reuse_distance": 0,
         "stage3_param_persistence_threshold": 0})",
      R"("zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 100000})",
      R"("zero_optimization": {"stage": 2, "overlap_comm": true, "reduce_bucket_size": 1})",
      R"("zero_optimization": {"stage": 1, "allgather_partitions": false, "allgather_bucket_size": 7})",
      R"("zero_optimization": {"stage": 2, "reduce_scatter": false, "overlap_comm": true})",
      R"("zero_optimization": {"stage": 2, "sub_group_size": 100})",
      R"("zero_optimization": {"stage": 3, "sub_group_size": 1, "stage3_param_persistence_threshold": 0})",
      R"("zero_optimization": {"stage": 3, "reduce_scatter": false, "stage3_param_persistence_threshold": 0})"};
  for (const std::string& zero : knobs) {
    INFO(zero);
    std::string json = engineConfig(3, "fp32");
    // Replace the zero block: the harness's default one comes first in the object.
    const size_t begin = json.find(R"("zero_optimization")");
    const size_t end = json.find('}', begin) + 1;
    json.replace(begin, end - begin, zero);
    const auto runs = trainRanks(3, json, 5);
    for (const auto& run : runs) CHECK(run.params == plain[0].params);
  }
}

TEST_CASE("engine: gradient accumulation equals the same samples in one micro-batch") {
  const auto one = trainRanks(2, engineConfig(2, "fp32"), 4);
  const auto accumulated =
      trainRanks(2, engineConfig(2, "fp32", R"("gradient_accumulation_steps": 4)"), 4);
  CHECK(maxRelativeDifference(accumulated[0].params, one[0].params) < 1e-4);
  CHECK(accumulated[0].params == accumulated[1].params);
}

TEST_CASE("engine: fp16 overflow skips the step, halves the scale, and holds the schedule") {
  const std::string extra =
      R"("fp16": {"enabled": true, "initial_scale_power": 40, "hysteresis": 1},
         "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.01, "warmup_num_steps": 10,
         "warmup_type": "linear"}})";
  for (int stage : {0, 2, 3}) {
    INFO("stage " << stage);
    const auto runs = trainRanks(2, engineConfig(stage, "fp32", extra), 40);
    // 2^40 overflows fp16 gradients: the first steps are skipped while the scale halves.
    CHECK(runs[0].skipped > 5);
    CHECK(runs[0].skipped < 40);
    CHECK(runs[0].lossScale < std::ldexp(1.0, 40));
    // WarmupLR advanced only on applied steps: lr = 0.01 * (applied - 1) / 10 capped at 0.01.
    const double applied = 40 - runs[0].skipped;
    CHECK(runs[0].lr == Approx(std::min(0.01, 0.01 * (applied - 1) / 10.0)));
  }
}

TEST_CASE("engine: communication / accumulation dtypes and gradient pre-division are honoured") {
  // Pre-dividing by a power of two and post-scaling by factor / N is exact: the same bits.
  const auto plain = trainRanks(4, engineConfig(2, "fp32"), 4);
  const auto predivided = trainRanks(
      4, engineConfig(2, "fp32", R"("prescale_gradients": true, "gradient_predivide_factor": 2.0)"),
      4);
  CHECK(predivided[0].params == plain[0].params);

  // bf16 model, fp32 gradient accumulation and communication: 4-byte gradients, and closer to
  // the fp32 run than bf16 communication is.
  const auto fp32Grads = trainRanks(
      2,
      engineConfig(
          0, "bf16",
          R"("data_types": {"grad_accum_dtype": "fp32"}, "communication_data_type": "fp32")"),
      4);
  CHECK(fp32Grads[0].memory.gradients == kPsi * 4);
  const auto bf16Grads = trainRanks(2, engineConfig(0, "bf16"), 4);
  CHECK(bf16Grads[0].memory.gradients == kPsi * 2);
  CHECK(fp32Grads[0].params != bf16Grads[0].params);
  const auto fp32 = trainRanks(2, engineConfig(0, "fp32"), 4);
  CHECK(maxRelativeDifference(fp32Grads[0].params, fp32[0].params) <=
        maxRelativeDifference(bf16Grads[0].params, fp32[0].params));
}

TEST_CASE("engine: sub_group_size bounds the fp32 gradient buffer and changes no result") {
  for (const char* optimizer : {"AdamW", "Lamb", "SGD"}) {
    INFO(optimizer);
    std::string json = engineConfig(2, "bf16");
    const std::string adamw = R"("type": "AdamW")";
    json.replace(json.find(adamw), adamw.size(), std::string(R"("type": ")") + optimizer + "\"");
    if (std::string(optimizer) == "SGD") {
      const std::string params = R"("weight_decay": 0.01)";
      json.replace(json.find(params), params.size(), R"("weight_decay": 0.01, "momentum": 0.9)");
    }
    const auto whole = trainRanks(2, json, 4);
    std::string grouped = json;
    const std::string stage = R"("stage": 2,)";
    grouped.replace(grouped.find(stage), stage.size(), R"("stage": 2, "sub_group_size": 600,)");
    const auto runs = trainRanks(2, grouped, 4);
    CHECK(runs[0].params == whole[0].params);
    CHECK(runs[0].memory.optimizerStates == whole[0].memory.optimizerStates);
    // The largest slice here is 4096 / 2 = 2048 elements: the buffer holds at most that, not the
    // whole 2754-element shard.
    CHECK(runs[0].memory.buffers + (2754 - 2048) * sizeof(float) <= whole[0].memory.buffers);
  }
}

TEST_CASE(
    "engine: wall_clock_breakdown's optimizer timers are measured only when on and change "
    "nothing numerically") {
  for (int stage = 0; stage <= 3; ++stage) {
    INFO("stage " << stage);
    std::vector<ds::runtime::OptimizerTimes> seen(2);
    auto record = [&](ds::runtime::Engine& engine, int rank) {
      if (rank == 0) seen[engine.config().wallClockBreakdown ? 1 : 0] = engine.lastOptimizerTimes();
    };
    const auto off = trainRanks(2, engineConfig(stage, "bf16"), 3, {}, record);
    const auto on = trainRanks(2, engineConfig(stage, "bf16", R"("wall_clock_breakdown": true)"), 3,
                               {}, record);
    for (int r = 0; r < 2; ++r) {
      CHECK(on[r].params == off[r].params);
      CHECK(on[r].losses == off[r].losses);
    }
    CHECK(seen[0].applied);
    CHECK(seen[0].stage == stage);
    CHECK(seen[0].gradientsMs + seen[0].updateMs + seen[0].loopMs + seen[0].allgatherMs +
              seen[0].swapInMs + seen[0].swapOutMs ==
          0.0);
    CHECK(seen[1].applied);
    CHECK(seen[1].updateMs > 0.0);
    CHECK(seen[1].loopMs >= seen[1].updateMs);
    CHECK(seen[1].gradientsMs > 0.0);
    CHECK(!seen[1].statesSwapped);
  }
}
