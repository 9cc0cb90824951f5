// Issue 28's process-level checks: GPT jobs on a pipe x model x data grid, started by ds-launch
// on one host (shared memory) and on 2 loopback nodes, train as the data-parallel job does; a
// grid checkpoint resumes at another grid and ds-generate samples from it.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "runtime/comm/shm_communicator.h"
#include "runtime/config/neox_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"
#include "test/byte_corpus.h"
#include "test/launch_harness.h"
#include "test/scratch_dir.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

const char* kOneHost = "localhost slots=4\n";
const char* kTwoNodes = "127.0.0.1 slots=2\n127.0.0.2 slots=2\n";

struct Grid {
  int pipe, model, data;
};

// Rotary and GQA, fp32 (no precision key), no dropout. 8 heads over 4 kv heads, so that model-
// parallel-size 4 still slices whole kv heads (Megatron's rule). The global batch is 8 samples
// whatever the grid: micro-batch 2 x accumulation (4 / data) x data.
std::string gridYaml(const Grid& g, int zero, const std::string& extra) {
  return R"(num-layers: 4
hidden-size: 64
num-attention-heads: 8
num-kv-heads: 4
seq-length: 16
max-position-embeddings: 16
pos-emb: rotary
attention-dropout: 0.0
hidden-dropout: 0.0
data-path: data/corpus
tokenizer-type: ByteTokenizer
split: "90,10,0"
train-iters: 6
lr-decay-iters: 6
lr: 0.01
warmup: 0.2
log-interval: 1
eval-interval: 100
eval-iters: 1
batch-size: 2
gradient_accumulation_steps: )" +
         std::to_string(4 / g.data) + "\npipe-parallel-size: " + std::to_string(g.pipe) +
         "\nmodel-parallel-size: " + std::to_string(g.model) +
         "\nzero_optimization:\n  stage: " + std::to_string(zero) + "\n" + extra;
}

std::string gridName(const Grid& g, int zero) {
  return "p" + std::to_string(g.pipe) + "m" + std::to_string(g.model) + "d" +
         std::to_string(g.data) + "z" + std::to_string(zero);
}

// Runs one job in `dir` (which holds data/corpus); returns its stdout.
std::string runJob(const std::string& dir, const char* hostfile, const std::string& name,
                   const std::string& yaml) {
  writeFile(dir + "/hostfile", hostfile);
  writeFile(dir + "/" + name + ".yml", yaml);
  const auto job = startLaunch(dir, {"--hostfile", "hostfile", "--master_port", "0", "--log_dir",
                                     "logs-" + name, "train", "--config", name + ".yml"});
  const auto status = waitExit(job, 180s);
  const std::string out = readFile(dir + "/stdout");
  INFO(name << "\n" << out << readFile(dir + "/stderr"));
  REQUIRE(status == 0);
  return out;
}

std::map<int, double> losses(const std::string& out) {
  std::map<int, double> at;
  const std::regex loss(R"(\[rank 0\] iteration (\d+)/6 \| lm_loss ([0-9.]+))");
  for (std::sregex_iterator it(out.begin(), out.end(), loss), end; it != end; ++it)
    at[std::stoi((*it)[1])] = std::stod((*it)[2]);
  return at;
}

// A checkpoint's whole model, loaded as ds-generate loads it: one rank, the unsliced GPT rebuilt
// from the save directory's neox_config.json, ZeRO 0, through the engine's resharding loader.
struct WholeModel {
  std::vector<ds::runtime::ParamSpec> specs;
  std::vector<float> params;
};

WholeModel loadWhole(const std::string& saveDir) {
  using namespace ds::runtime;
  nlohmann::json merged = nlohmann::json::parse(readFile(saveDir + "/neox_config.json"));
  merged["zero_optimization"] = {{"stage", 0}};
  merged.erase("gradient_accumulation_steps");
  merged["batch-size"] = 1;
  const NeoxConfig neox = parseNeoxConfig(merged, kOneReplica);
  const auto tokenizer = makeJobTokenizer(neox.train);
  Gpt model(modelConfigFor(neox.train, *tokenizer));
  auto group = ShmCommunicator::inProcessGroup(1);
  Engine engine(model, neox.deepspeed, group[0], neox.train.seed);
  engine.loadCheckpoint(saveDir);
  return {model.parameters(), engine.fullParameters()};
}

// fp32 on both sides, yet not bit for bit: the grid sums partial products in another order (row-
// parallel all-reduces, vocabulary-parallel softmax, micro-batches accumulated on one rank
// instead of over four), and AdamW's first steps divide by sqrt(v) + eps with v still tiny,
// which amplifies that rounding noise in elements whose gradients are near zero. Hence per tensor
// ||diff|| / ||tensor|| < 1e-5 and any single element within 1e-4 (absolute; the weights are of
// order 1e-2 to 1). The key bias is left out of the norm-wise bound: its true gradient is zero
// (a query's scores all shift by q.b, which the softmax cancels), so its values are AdamW's
// normalisation of rounding noise alone (about lr in size, differing by ~1e-4 relative between
// reduction orders); it still meets the element bound.
constexpr size_t kQueryWidth = 64, kKeyWidth = 32;  // hidden 64; 4 kv heads x head size 8

void requireSameParameters(const WholeModel& got, const WholeModel& want) {
  REQUIRE(got.params.size() == want.params.size());
  REQUIRE(got.specs.size() == want.specs.size());
  for (size_t t = 0; t < want.specs.size(); ++t) {
    const ds::runtime::ParamSpec& spec = want.specs[t];
    INFO(spec.name);
    REQUIRE(got.specs[t].name == spec.name);
    REQUIRE(got.specs[t].offset == spec.offset);
    const bool qkvBias = spec.name.ends_with(".attention.query_key_value.bias");
    if (qkvBias) REQUIRE(spec.numel == kQueryWidth + 2 * kKeyWidth);
    double diff = 0.0, norm = 0.0, worst = 0.0;
    for (size_t e = 0; e < spec.numel; ++e) {
      const double a = got.params[spec.offset + e], b = want.params[spec.offset + e];
      worst = std::max(worst, std::fabs(a - b));
      if (qkvBias && e >= kQueryWidth && e < kQueryWidth + kKeyWidth) continue;
      diff += (a - b) * (a - b);
      norm += b * b;
    }
    CHECK(std::sqrt(diff) <= 1e-5 * std::sqrt(norm));
    CHECK(worst < 1e-4);
  }
}

void requireSameLosses(const std::map<int, double>& got, const std::map<int, double>& want,
                       const std::vector<int>& iterations) {
  for (int it : iterations) {
    INFO("iteration " << it);
    REQUIRE(got.count(it) == 1);
    REQUIRE(want.count(it) == 1);
    CHECK(std::fabs(got.at(it) - want.at(it)) <= 1e-5 * std::fabs(want.at(it)));
  }
}

// Every grid of the issue at ZeRO 0 and 1 against the data-parallel job (1, 1, 4) at the same
// stage: the losses of iterations 1 to 3 and every parameter after step 3 (each job saves then).
void checkGrids(const char* hostfile, const std::string& scratch) {
  const std::string dir = makeScratchDir(scratch);
  writeByteCorpus(dir + "/data/corpus", 40, [](int d) { return 3 + d % 4; });
  const std::string saveAt3 = "exit-interval: 3\n";
  for (int zero : {0, 1}) {
    const Grid dp{1, 1, 4};
    const std::string dpName = gridName(dp, zero);
    const auto want =
        losses(runJob(dir, hostfile, dpName, gridYaml(dp, zero, "save: " + dpName + "\n" + saveAt3)));
    const WholeModel wantParams = loadWhole(dir + "/" + dpName);
    for (const Grid g : {Grid{2, 1, 2}, Grid{1, 2, 2}, Grid{2, 2, 1}, Grid{4, 1, 1}, Grid{1, 4, 1}}) {
      const std::string name = gridName(g, zero);
      INFO(name);
      const std::string out =
          runJob(dir, hostfile, name, gridYaml(g, zero, "save: " + name + "\n" + saveAt3));
      // The model line names the grid.
      CHECK_THAT(out, Catch::Contains(
                          "micro 2 x accumulation " + std::to_string(4 / g.data) + " x " +
                          std::to_string(g.data) + " data-parallel replicas (pipe " +
                          std::to_string(g.pipe) + " x model " + std::to_string(g.model) +
                          " ranks each)"));
      CHECK_THAT(out, Catch::Contains("ZeRO stage " + std::to_string(zero) + ", fp32"));
      requireSameLosses(losses(out), want, {1, 2, 3});
      requireSameParameters(loadWhole(dir + "/" + name), wantParams);
    }
  }
  std::filesystem::remove_all(dir);
}

// Megatron's sequence parallelism (sequence-parallel: true) at model 2 x data 2, model 4 and
// pipe 2 x model 2, without ZeRO and at ZeRO 2 (not with stages), against the data-parallel job
// at the same stage.
void checkSequenceParallel(const char* hostfile, const std::string& scratch) {
  const std::string dir = makeScratchDir(scratch);
  writeByteCorpus(dir + "/data/corpus", 40, [](int d) { return 3 + d % 4; });
  const std::string saveAt3 = "exit-interval: 3\n";
  for (int zero : {0, 2}) {
    const Grid dp{1, 1, 4};
    const std::string dpName = gridName(dp, zero);
    const auto want =
        losses(runJob(dir, hostfile, dpName, gridYaml(dp, zero, "save: " + dpName + "\n" + saveAt3)));
    const WholeModel wantParams = loadWhole(dir + "/" + dpName);
    for (const Grid g : {Grid{1, 2, 2}, Grid{1, 4, 1}, Grid{2, 2, 1}}) {
      if (g.pipe > 1 && zero >= 2) continue;  // DeepSpeed's pipeline engine: ZeRO 0 or 1
      const std::string name = gridName(g, zero) + "sp";
      INFO(name);
      const std::string out = runJob(
          dir, hostfile, name,
          gridYaml(g, zero, "sequence-parallel: true\nsave: " + name + "\n" + saveAt3));
      CHECK_THAT(out, Catch::Contains("model " + std::to_string(g.model) +
                                      " ranks each, sequence parallel)"));
      requireSameLosses(losses(out), want, {1, 2, 3});
      requireSameParameters(loadWhole(dir + "/" + name), wantParams);
    }
  }
  std::filesystem::remove_all(dir);
}

// DeepSpeed-Ulysses (sequence_parallel_size) at sequence 2 x data 2 and sequence 4, without ZeRO
// and at ZeRO 2 and 3, against the data-parallel job at the same stage.
void checkUlysses(const char* hostfile, const std::string& scratch) {
  const std::string dir = makeScratchDir(scratch);
  writeByteCorpus(dir + "/data/corpus", 40, [](int d) { return 3 + d % 4; });
  const std::string saveAt3 = "exit-interval: 3\n";
  for (int zero : {0, 2, 3}) {
    const Grid dp{1, 1, 4};
    const std::string dpName = gridName(dp, zero);
    const auto want =
        losses(runJob(dir, hostfile, dpName, gridYaml(dp, zero, "save: " + dpName + "\n" + saveAt3)));
    const WholeModel wantParams = loadWhole(dir + "/" + dpName);
    for (const int u : {2, 4}) {
      const Grid g{1, 1, 4 / u};
      const std::string name = gridName(g, zero) + "u" + std::to_string(u);
      INFO(name);
      const std::string out = runJob(dir, hostfile, name,
                                     gridYaml(g, zero,
                                              "sequence_parallel_size: " + std::to_string(u) +
                                                  "\nsave: " + name + "\n" + saveAt3));
      CHECK_THAT(out, Catch::Contains(std::to_string(4 / u) + " data-parallel replicas (sequence " +
                                      std::to_string(u) + " ranks each, Ulysses)"));
      requireSameLosses(losses(out), want, {1, 2, 3});
      requireSameParameters(loadWhole(dir + "/" + name), wantParams);
    }
  }
  // MoE layers on each rank's positions: top-k routing (NeoX's topk router, DeepSpeed's gating
  // without dropping or its l_aux, experts over ep 2) is per token, so the same as data 4.
  for (const std::string& keys :
       {std::string("moe-num-experts: 4\nmoe-router-type: topk\nmoe-top-k: 2\n"),
        std::string("moe-num-experts: 4\nmoe-type: deepspeed\nmoe-top-k: 2\nmoe-loss-coeff: 0\n"
                    "moe-expert-parallel-size: 2\n")}) {
    const Grid dp{1, 1, 4}, g{1, 1, 2};
    const std::string dpName = "moe" + gridName(dp, 2), name = "moe" + gridName(g, 2) + "u2";
    INFO(keys);
    const std::string dpKeys = keys.substr(0, keys.find("moe-expert-parallel-size"));
    const auto want = losses(runJob(dir, hostfile, dpName,
                                    gridYaml(dp, 2, dpKeys + "save: " + dpName + "\n" + saveAt3)));
    const std::string out =
        runJob(dir, hostfile, name,
               gridYaml(g, 2, keys + "sequence_parallel_size: 2\nsave: " + name + "\n" + saveAt3));
    requireSameLosses(losses(out), want, {1, 2, 3});
    requireSameParameters(loadWhole(dir + "/" + name), loadWhole(dir + "/" + dpName));
  }
  std::filesystem::remove_all(dir);
}

// Mixture of experts, NeoX's dropless (top-2 Sinkhorn, every layer) and DeepSpeed's gating (top-2
// with dropping and the residual MLP, every other layer), on data 4 at ZeRO 1, 2 and 3 and on
// pipe 2 x data 2 against data 4 at ZeRO 0: the experts' parameters through each stage's
// partitioning, gathering and checkpoint, and MoE layers in pipeline stages.
void checkMoeZero(const char* hostfile, const std::string& scratch) {
  const std::string dir = makeScratchDir(scratch);
  writeByteCorpus(dir + "/data/corpus", 40, [](int d) { return 3 + d % 4; });
  const std::string saveAt3 = "exit-interval: 3\n";
  const std::vector<std::pair<std::string, std::string>> flavours = {
      {"dropless", "moe-num-experts: 4\nmoe-top-k: 2\n"},
      {"deepspeed",
       "moe-num-experts: 4\nmoe-type: deepspeed\nmoe-top-k: 2\nmoe-token-dropping: true\n"
       "moe-expert-interval: 2\nmoe-train-capacity-factor: 0.75\n"}};
  const Grid dp{1, 1, 4};
  for (const auto& [flavour, keys] : flavours) {
    const std::string base = flavour + gridName(dp, 0);
    const std::string first =
        runJob(dir, hostfile, base, gridYaml(dp, 0, keys + "save: " + base + "\n" + saveAt3));
    CHECK_THAT(first, Catch::Contains("expert tokens"));
    const auto want = losses(first);
    const WholeModel wantParams = loadWhole(dir + "/" + base);
    // ZeRO 1-3 on data 4, two pipeline stages (ZeRO 0, DeepSpeed's pipe engine allows 0-1), and
    // the experts split over model 2 x data 2 (NeoX's layout) at ZeRO 0 and 2.
    for (const auto& [g, zero] : std::vector<std::pair<Grid, int>>{{dp, 1},
                                                                   {dp, 2},
                                                                   {dp, 3},
                                                                   {Grid{2, 1, 2}, 0},
                                                                   {Grid{1, 2, 2}, 0},
                                                                   {Grid{1, 2, 2}, 2}}) {
      const std::string name = flavour + gridName(g, zero);
      INFO(name);
      const std::string out =
          runJob(dir, hostfile, name, gridYaml(g, zero, keys + "save: " + name + "\n" + saveAt3));
      requireSameLosses(losses(out), want, {1, 2, 3});
      requireSameParameters(loadWhole(dir + "/" + name), wantParams);
    }
  }
  std::filesystem::remove_all(dir);
}

// DeepSpeed-MoE's expert parallelism (no token dropping, so routing is per token whatever the
// rank) at ep 2 and 4 on data 4, without ZeRO and at ZeRO 2 and 3, against ep 1 at the same stage:
// the experts computed on their ranks train as the ones every rank computes.
void checkExpertParallel(const char* hostfile, const std::string& scratch) {
  const std::string dir = makeScratchDir(scratch);
  writeByteCorpus(dir + "/data/corpus", 40, [](int d) { return 3 + d % 4; });
  const std::string saveAt3 = "exit-interval: 3\n";
  const std::string keys =
      "moe-num-experts: 4\nmoe-type: deepspeed\nmoe-top-k: 2\nmoe-loss-coeff: 0.1\n";
  const Grid dp{1, 1, 4};
  std::map<int, std::map<int, double>> ep1Losses;  // by ZeRO stage
  auto ep1 = [&](int zero) {
    const std::string base = "ep1" + gridName(dp, zero);
    ep1Losses[zero] = losses(
        runJob(dir, hostfile, base, gridYaml(dp, zero, keys + "save: " + base + "\n" + saveAt3)));
    return base;
  };
  for (int zero : {0, 2, 3}) {
    const std::string base = ep1(zero);
    const auto& want = ep1Losses[zero];
    const WholeModel wantParams = loadWhole(dir + "/" + base);
    for (int ep : {2, 4}) {
      const std::string name = "ep" + std::to_string(ep) + gridName(dp, zero);
      INFO(name);
      const std::string out =
          runJob(dir, hostfile, name,
                 gridYaml(dp, zero,
                          keys + "moe-expert-parallel-size: " + std::to_string(ep) +
                              "\nsave: " + name + "\n" + saveAt3));
      CHECK_THAT(out, Catch::Contains("x 4 ranks (the experts split over " + std::to_string(ep) +
                                      " each)"));
      requireSameLosses(losses(out), want, {1, 2, 3});
      requireSameParameters(loadWhole(dir + "/" + name), wantParams);
    }
  }
  // Expert parallelism within each data group: pipe 2 x data 2 (each stage's), ep 2, at ZeRO 0
  // and 1; model 2 x data 2 (the experts split over the model ranks, each rank's half over ep 2),
  // at ZeRO 0 and 2.
  for (const auto& [g, zero] : std::vector<std::pair<Grid, int>>{
           {{2, 1, 2}, 0}, {{2, 1, 2}, 1}, {{1, 2, 2}, 0}, {{1, 2, 2}, 2}}) {
    const std::string base = ep1Losses.count(zero) ? "ep1" + gridName(dp, zero) : ep1(zero);
    const auto& want = ep1Losses[zero];
    const std::string name = "ep2" + gridName(g, zero);
    INFO(name);
    const std::string out = runJob(
        dir, hostfile, name,
        gridYaml(g, zero, keys + "moe-expert-parallel-size: 2\nsave: " + name + "\n" + saveAt3));
    requireSameLosses(losses(out), want, {1, 2, 3});
    // Each model part's two experts' parts beside it.
    const std::string other = g.pipe > 1 ? "pipe_01-model_00" : "pipe_00-model_01";
    for (const std::string& part :
         {std::string("experts_00"), std::string("experts_01"), other + "/experts_01"})
      CHECK(std::filesystem::exists(dir + "/" + name + "/global_step3/" + part + "/manifest.json"));
    requireSameParameters(loadWhole(dir + "/" + name), loadWhole(dir + "/" + base));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

TEST_CASE(
    "grid launch: DeepSpeed-MoE's expert parallelism (ep 2 and 4, and 2 on pipe 2 x data 2 and "
    "model 2 x data 2) on 2 loopback nodes trains as ep 1 without ZeRO and at ZeRO 1, 2 and 3",
    "[gpt][launch][grid][moe]") {
  checkExpertParallel(kTwoNodes, "grid-expert-parallel");
}

TEST_CASE(
    "grid launch: mixture of experts (both flavours) on 2 loopback nodes trains at ZeRO 1, "
    "2 and 3, on two pipeline stages and over 2 model ranks as at ZeRO 0",
    "[gpt][launch][grid][moe]") {
  checkMoeZero(kTwoNodes, "grid-moe");
}

TEST_CASE(
    "grid launch: Ulysses (sequence 2 x data 2, sequence 4, and with MoE) on 2 loopback "
    "nodes trains as data 4 without ZeRO and at ZeRO 2 and 3",
    "[gpt][launch][grid]") {
  checkUlysses(kTwoNodes, "grid-ulysses");
}

TEST_CASE("grid launch: sequence parallelism (model 2 x data 2, model 4, pipe 2 x model 2) on 2 "
          "loopback nodes trains as data 4 without ZeRO and at ZeRO 2",
          "[gpt][launch][grid]") {
  checkSequenceParallel(kTwoNodes, "grid-sequence-parallel");
}

TEST_CASE(
    "grid launch: ZeRO++ (hpZ over each node, qwZ, qgZ) and the 1-bit optimizers on 2 loopback "
    "nodes x 2 ranks train as ZeRO 3 and AdamW do",
    "[gpt][launch][grid][zeropp][onebit]") {
  const std::string dir = makeScratchDir("grid-zeropp");
  writeByteCorpus(dir + "/data/corpus", 40, [](int d) { return 3 + d % 4; });
  const Grid dp{1, 1, 4};
  // Every layer gathered for each use (none kept, none persistent): the backward's gathers are
  // hpZ's. The comms logger names the groups each collective ran on.
  const std::string gathers =
      "  stage3_param_persistence_threshold: 0\n  stage3_max_reuse_distance: 0\n";
  const std::string logging = "bf16:\n  enabled: true\ncomms_logger:\n  enabled: true\n";
  const auto plain = losses(runJob(dir, kTwoNodes, "zero3", gridYaml(dp, 3, gathers + logging)));
  const std::string out = runJob(
      dir, kTwoNodes, "zeropp",
      gridYaml(dp, 3,
               gathers +
                   "  zero_hpz_partition_size: 2\n  zero_quantized_weights: true\n"
                   "  zero_quantized_gradients: true\n" +
                   logging));
  CHECK_THAT(out, Catch::Contains("zero_node"));        // hpZ's gathers and qgZ's first hop
  CHECK_THAT(out, Catch::Contains("zero_cross_node"));  // qgZ's second hop
  const auto zeropp = losses(out);
  REQUIRE((plain.count(6) && zeropp.count(6)));
  INFO("loss at step 6: ZeRO 3 " << plain.at(6) << ", ZeRO++ " << zeropp.at(6));
  CHECK(std::fabs(zeropp.at(6) - plain.at(6)) < 0.03 * plain.at(6));
  // The 1-bit optimizers with DeepSpeed's keys through the launcher, past their freeze within the
  // 6 steps (how close they train to Adam: test_engine_onebit.cc and the demo's figures).
  for (const std::string& optimizer :
       {std::string("{type: OneBitAdam, params: {lr: 0.01, freeze_step: 3}}"),
        std::string("{type: ZeroOneAdam, params: {lr: 0.01, var_freeze_step: 3, "
                    "var_update_scaler: 8, local_step_scaler: 1, local_step_clipper: 2}}"),
        std::string("{type: OneBitLamb, params: {lr: 0.01, freeze_step: 3, max_coeff: 0.3}}")}) {
    INFO(optimizer);
    const auto got = losses(runJob(dir, kTwoNodes, "onebit",
                                   gridYaml(dp, 0, "optimizer: " + optimizer + "\n")));
    REQUIRE(got.count(6));
    CHECK(got.at(6) < got.at(1));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("grid launch: every pipe x model x data grid on one host trains as data 4",
          "[gpt][launch][grid]") {
  checkGrids(kOneHost, "grid-one-host");
}

TEST_CASE("grid launch: every pipe x model x data grid on 2 loopback nodes trains as data 4",
          "[gpt][launch][grid]") {
  checkGrids(kTwoNodes, "grid-two-nodes");
}

TEST_CASE("grid launch: a pipe 2 x model 2 checkpoint resumes at data 4 and ds-generate samples it",
          "[gpt][launch][grid]") {
  const std::string dir = makeScratchDir("grid-resume");
  writeByteCorpus(dir + "/data/corpus", 40, [](int d) { return 3 + d % 4; });
  const Grid grid{2, 2, 1}, dp{1, 1, 4};
  const auto straight = losses(runJob(dir, kTwoNodes, "straight", gridYaml(dp, 1, "")));
  REQUIRE(straight.size() == 6);
  runJob(dir, kTwoNodes, "grid", gridYaml(grid, 1, "save: ckpt\nexit-interval: 3\n"));
  REQUIRE(readFile(dir + "/ckpt/latest") == "global_step3\n");
  // One part per (stage, model rank): the first at the top, the others in pipe_SS-model_MM/.
  for (const char* part : {"pipe_00-model_01", "pipe_01-model_00", "pipe_01-model_01"})
    CHECK(std::filesystem::is_directory(dir + "/ckpt/global_step3/" + part));

  const std::string out = runJob(dir, kTwoNodes, "resumed", gridYaml(dp, 1, "load: ckpt\n"));
  CHECK_THAT(out, Catch::Contains("resumed from ckpt/global_step3 at iteration 3"));
  CHECK_THAT(out, Catch::Contains("micro 2 x accumulation 1 x 4 ranks"));
  const auto resumed = losses(out);
  CHECK(resumed.count(1) == 0);  // it did not start over
  requireSameLosses(resumed, straight, {4, 5, 6});

  // ds-generate rebuilds the whole model from the grid's parts at world 1: every parameter (the
  // data-parallel job's count), a prompt continued by the tokens asked for.
  const std::string gen = "cd " + dir + " && " + DS_BIN_DIR +
                          "/ds-generate ckpt --prompt 'the quick' --max-new-tokens 8 --no-stop "
                          ">gen.out 2>gen.err";
  const int status = std::system(gen.c_str());
  INFO(readFile(dir + "/gen.out") << readFile(dir + "/gen.err"));
  REQUIRE(WEXITSTATUS(status) == 0);
  const std::regex count(R"(, (\d+) parameters \(4 layers)");
  std::smatch m;
  REQUIRE(std::regex_search(out, m, count));
  CHECK_THAT(readFile(dir + "/gen.err"),
             Catch::Contains("ds-generate: ckpt/global_step3, " + m[1].str() +
                             " parameters, 8 new tokens"));
  const std::string text = readFile(dir + "/gen.out");
  CHECK(text.rfind("the quick", 0) == 0);
  CHECK(text.size() > std::string("the quick\n").size());
  std::filesystem::remove_all(dir);
}

namespace {

// Runs a job expected to be refused; returns its stdout and stderr together.
std::string runRefusedJob(const std::string& dir, const std::string& name, const std::string& yaml) {
  writeFile(dir + "/hostfile", kOneHost);
  writeFile(dir + "/" + name + ".yml", yaml);
  const auto job = startLaunch(dir, {"--hostfile", "hostfile", "--master_port", "0", "--log_dir",
                                     "logs-" + name, "train", "--config", name + ".yml"});
  const auto status = waitExit(job, 180s);
  const std::string out = readFile(dir + "/stdout") + readFile(dir + "/stderr");
  INFO(name << "\n" << out);
  REQUIRE(status.has_value());
  CHECK(*status != 0);
  CHECK_THAT(out, !Catch::Contains("resumed from"));
  return out;
}

// ds-generate on `checkpoint` (relative to dir): its exit status and stderr.
std::pair<int, std::string> generateFrom(const std::string& dir, const std::string& checkpoint) {
  const std::string gen = "cd " + dir + " && " + DS_BIN_DIR + "/ds-generate " + checkpoint +
                          " --prompt 'the' --max-new-tokens 2 >gen.out 2>gen.err";
  const int status = std::system(gen.c_str());
  return {WEXITSTATUS(status), readFile(dir + "/gen.err")};
}

}  // namespace

TEST_CASE("grid launch: a checkpoint assembled from parts of different saves is refused, naming "
          "the part", "[gpt][launch][grid][checkpoint]") {
  namespace fs = std::filesystem;
  const std::string dir = makeScratchDir("grid-mixed-parts");
  writeByteCorpus(dir + "/data/corpus", 40, [](int d) { return 3 + d % 4; });
  const Grid grid{2, 2, 1}, dp{1, 1, 4};
  const std::string saves = "save-interval: 2\nexit-interval: 4\n";
  runJob(dir, kOneHost, "a", gridYaml(grid, 1, "save: a\n" + saves));
  runJob(dir, kOneHost, "b", gridYaml(grid, 1, "save: b\nseed: 7\n" + saves));
  runJob(dir, kOneHost, "relu", gridYaml(grid, 1, "save: relu\nactivation: relu\n" + saves));
  REQUIRE(fs::is_directory(dir + "/a/global_step2/pipe_01-model_00"));
  const std::string part = "global_step4/pipe_01-model_00";
  const std::string partManifest = "a/" + part + "/manifest.json";
  // a's own step-4 checkpoint, put back after the swaps.
  fs::copy(dir + "/a/global_step4", dir + "/a4-original", fs::copy_options::recursive);
  auto replacePart = [&](const std::string& from) {
    fs::remove_all(dir + "/a/" + part);
    fs::copy(dir + "/" + from, dir + "/a/" + part, fs::copy_options::recursive);
  };
  const std::string resume = "load: a\n";

  struct Case {
    const char* from;   // the part put in place of a's step-4 part
    const char* differs;  // what the refusal names
  };
  for (const Case& c : {Case{"a/global_step2/pipe_01-model_00", "global_steps 2, the top part's 4"},
                        Case{"b/global_step4/pipe_01-model_00", "run.id"},
                        Case{"relu/global_step4/pipe_01-model_00", "run.id"}}) {
    INFO(c.from);
    replacePart(c.from);
    // At another grid (data 4) and at the same one (pipe 2 x model 2): refused before loading.
    for (const Grid& at : {dp, grid}) {
      const std::string out = runRefusedJob(dir, "resume", gridYaml(at, 1, resume));
      CHECK_THAT(out, Catch::Contains(partManifest + ": this part is not from the save of"));
      CHECK_THAT(out, Catch::Contains(c.differs));
    }
    const auto [status, err] = generateFrom(dir, "a");
    INFO(err);
    CHECK(status != 0);
    CHECK_THAT(err, Catch::Contains(part + "/manifest.json: this part is not from the save of"));
    CHECK_THAT(err, Catch::Contains(c.differs));
  }

  // The restored checkpoint loads; a resume with another activation is refused naming it, and so
  // is ds-generate where the save directory's config names another one.
  fs::remove_all(dir + "/a/global_step4");
  fs::copy(dir + "/a4-original", dir + "/a/global_step4", fs::copy_options::recursive);
  const std::string relu =
      runRefusedJob(dir, "resume-relu", gridYaml(grid, 1, resume + "activation: relu\n"));
  CHECK_THAT(relu, Catch::Contains("saved from another model architecture (activation relu, the "
                                   "checkpoint's gelu)"));
  const std::string resumed =
      runJob(dir, kOneHost, "resume", gridYaml(dp, 1, resume + "save: a\nsave-interval: 2\n"));
  CHECK_THAT(resumed, Catch::Contains("resumed from a/global_step4 at iteration 4"));
  // The resumed run is the same run: its saves keep the id; another run's differs.
  auto runId = [&](const std::string& manifest) {
    return nlohmann::json::parse(readFile(dir + "/" + manifest))["run"]["id"].get<std::string>();
  };
  CHECK(runId("a/global_step6/manifest.json") == runId("a/global_step4/manifest.json"));
  CHECK(runId("b/global_step4/manifest.json") != runId("a/global_step4/manifest.json"));
  nlohmann::json config = nlohmann::json::parse(readFile(dir + "/a/neox_config.json"));
  config["activation"] = "relu";
  writeFile(dir + "/a/neox_config.json", config.dump(2));
  const auto [status, err] = generateFrom(dir, "a");
  INFO(err);
  CHECK(status != 0);
  CHECK_THAT(err, Catch::Contains("saved from another model architecture than the config "
                                  "(activation relu, the checkpoint's gelu)"));
  fs::remove_all(dir);
}
