// bench_comm_efficiency: what the communication-efficient methods buy on a slow network. Two test
// nodes (network namespaces joined by tbf-shaped links, test/netns_nodes.h); each rank a thread
// that entered its node, its collectives built by GroupFactory as a launched job's are (Gloo
// across nodes, shared memory within one), the engine training a GPT on them. Per variant, after
// its warm-up (the optimizers' freeze steps), the timed steps' mean seconds, rank 0's bytes
// through its collectives (the comms logger) and the bytes the nodes' links carried (their eth0
// transmit counters, headers included) per step:
// - 2 nodes x 1 rank, ZeRO 0: adam (AdamW), onebit_adam, zero_one_adam, onebit_lamb;
// - 2 nodes x 2 ranks, ZeRO 3 in bf16: zero3, zeropp (qwZ + qgZ + hpZ over the node).
// The link rate is chosen so that Adam's step is mostly its gradients' all-reduce.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "common/error.h"
#include "common/guarded_main.h"
#include "common/json_line.h"
#include "runtime/comm/comms_logger.h"
#include "runtime/comm/group_factory.h"
#include "runtime/comm/memory_store.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"
#include "test/gpt_parallel_harness.h"
#include "test/netns_nodes.h"
#include "test/rank_threads.h"

namespace {

using namespace ds;
using namespace ds::runtime;
using Clock = std::chrono::steady_clock;

struct Options {
  int rateMbit = 50;
  int warmup = 6;  // steps before the timed ones: the 1-bit optimizers' freeze
  int steps = 8;   // timed steps
  std::vector<std::string> variants{"adam",        "onebit_adam", "zero_one_adam",
                                    "onebit_lamb", "zero3",       "zeropp"};
  bool json = false;
};

struct Variant {
  std::string name;
  int ranksPerNode = 1;
  std::string config;  // the ds_config's optimizer and zero_optimization members
  bool nodeGroups = false;
};

Variant variant(const std::string& name, const Options& o) {
  const std::string freeze = std::to_string(o.warmup);
  const std::string zero0 = R"("zero_optimization": {"stage": 0})";
  if (name == "adam")
    return {name, 1, R"("optimizer": {"type": "AdamW", "params": {"lr": 0.001}}, )" + zero0};
  if (name == "onebit_adam")
    return {name, 1,
            R"("optimizer": {"type": "OneBitAdam", "params": {"lr": 0.001, "freeze_step": )" +
                freeze + "}}, " + zero0};
  if (name == "zero_one_adam")
    // The variance updated up to the freeze; the local steps' interval doubles every step up to
    // 4 (DeepSpeed's defaults take tens of thousands of steps to get there).
    return {name, 1,
            R"("optimizer": {"type": "ZeroOneAdam", "params": {"lr": 0.001, "var_freeze_step": )" +
                freeze +
                R"(, "var_update_scaler": 2, "local_step_scaler": 1, "local_step_clipper": 4}}, )" +
                zero0};
  if (name == "onebit_lamb")
    return {name, 1,
            R"("optimizer": {"type": "OneBitLamb", "params": {"lr": 0.01, "freeze_step": )" +
                freeze + "}}, " + zero0};
  // Stage 3 releasing every layer after use (no reuse, a model too large to keep gathered), so
  // the backward gathers again: hpZ's case.
  const std::string zero3 =
      R"("optimizer": {"type": "AdamW", "params": {"lr": 0.001}}, "bf16": {"enabled": true},
         "zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 0)";
  if (name == "zero3") return {name, 2, zero3 + "}", false};
  if (name == "zeropp")
    return {name, 2, zero3 + R"(, "zero_quantized_weights": true, "zero_quantized_gradients": true,
                        "zero_hpz_partition_size": 2})",
            true};
  throw Error("--variants: unknown variant \"" + name +
              "\" (adam, onebit_adam, zero_one_adam, onebit_lamb, zero3, zeropp)");
}

// The demo's GPT (4 x 256, vocabulary 256) on 64-token samples: 3.2M parameters, a 13 MB fp32
// gradient against little compute.
GptConfig model() {
  GptConfig c = test::tinyGpt();
  c.numLayers = 4;
  c.hiddenSize = 256;
  c.numAttentionHeads = 4;
  c.seqLength = 64;
  c.maxPositionEmbeddings = 64;
  return c;
}

// Bytes node `node`'s eth0 has sent so far (its /proc/net/dev line, read inside the node).
uint64_t transmitted(const test::NetnsNodes& nodes, int node) {
  std::string command;
  for (const std::string& arg : nodes.inNode(node, {"cat", "/proc/net/dev"})) command += arg + " ";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw Error("bench_comm_efficiency: cannot run " + command);
  char line[512];
  uint64_t bytes = 0;
  bool found = false;
  while (std::fgets(line, sizeof line, pipe)) {
    std::string text(line);
    const size_t colon = text.find(':');
    if (colon == std::string::npos || text.substr(0, colon).find("eth0") == std::string::npos)
      continue;
    std::istringstream fields(text.substr(colon + 1));
    uint64_t value = 0;
    for (int i = 0; i < 9 && fields >> value; ++i) bytes = value;  // field 9: transmit bytes
    found = true;
  }
  pclose(pipe);
  if (!found) throw Error("bench_comm_efficiency: no eth0 in node " + std::to_string(node));
  return bytes;
}

struct Result {
  std::string name;
  double bytesPerStep = 0, crossNodeBytesPerStep = 0, stepSeconds = 0;
};

Result run(const test::NetnsNodes& nodes, const Variant& v, const Options& o, int index) {
  const int world = 2 * v.ranksPerNode;
  const GptConfig gpt = model();
  const std::string json = R"({"train_micro_batch_size_per_gpu": 2, "train_batch_size": )" +
                           std::to_string(2 * world) + ", " + v.config + "}";
  MemoryStore store;
  Result result{v.name};
  uint64_t linkBefore = 0;
  Clock::time_point start;
  std::vector<double> seconds(world);
  test::onThreads(world, [&](int r) {
    const int node = r / v.ranksPerNode;
    nodes.enterNode(node);
    GroupOptions options;
    options.bindAddress = nodes.address(node);
    options.storePrefix = "v" + std::to_string(index);
    options.timeout = std::chrono::minutes(5);
    GroupFactory factory(store, {r, std::vector<int>(2, v.ranksPerNode)}, options);
    std::unique_ptr<Communicator> worldComm = factory.world();
    CommsLoggerConfig logging;
    logging.enabled = true;
    CommsLogger logger(logging);
    LoggingCommunicator comm(*worldComm, logger);
    test::NodeGroups made;
    ParallelGroups groups;
    if (v.nodeGroups) {
      made = test::makeNodeGroups(factory, r, world, v.ranksPerNode);
      groups.zeroNode = made.node.get();
      groups.zeroCrossNode = made.crossNode.get();
    }
    Gpt model(gpt);
    Engine engine(model, parseDeepSpeedConfig(json, world, "bench_comm_efficiency"), comm, 1,
                  groups);
    const Batch batch =
        test::tokenBatch(static_cast<uint64_t>(r * 2), 2, gpt.seqLength, gpt.vocabSize);
    uint64_t bytesBefore = 0;
    for (int s = 0; s < o.warmup + o.steps; ++s) {
      if (s == o.warmup) {
        worldComm->barrier();
        if (r == 0) {
          linkBefore = transmitted(nodes, 0) + transmitted(nodes, 1);
          start = Clock::now();
        }
        worldComm->barrier();
        bytesBefore = logger.bytes();
      }
      engine.forwardBackward(batch);
      engine.step();
    }
    worldComm->barrier();
    if (r == 0) {
      result.stepSeconds = std::chrono::duration<double>(Clock::now() - start).count() / o.steps;
      result.bytesPerStep = static_cast<double>(logger.bytes() - bytesBefore) / o.steps;
      result.crossNodeBytesPerStep =
          static_cast<double>(transmitted(nodes, 0) + transmitted(nodes, 1) - linkBefore) / o.steps;
    }
  });
  return result;
}

int runAll(const Options& o) {
  const test::NetnsSupport& support = test::netnsSupport();
  if (!support.namespaces.empty() || !support.rate.empty()) {
    std::printf("bench_comm_efficiency: skipped: %s\n",
                (support.namespaces.empty() ? "tc tbf refused: " + support.rate
                                            : "network namespaces refused: " + support.namespaces)
                    .c_str());
    return 77;
  }
  std::vector<Variant> variants;
  for (const std::string& name : o.variants) variants.push_back(variant(name, o));
  test::NetnsNodes nodes(2, {.rateBitsPerSecond = static_cast<uint64_t>(o.rateMbit) * 1000000});
  if (!o.json)
    std::printf(
        "bench_comm_efficiency: GPT 4 x 256 (seq 64, micro 2) on 2 netns nodes, %d Mbit/s links; "
        "%d warm-up steps, %d timed\n%-14s %14s %18s %9s\n",
        o.rateMbit, o.warmup, o.steps, "variant", "bytes/step", "cross-node B/step", "step s");
  std::vector<Result> results;
  for (size_t i = 0; i < variants.size(); ++i) {
    const Result r = run(nodes, variants[i], o, static_cast<int>(i));
    results.push_back(r);
    if (o.json) {
      JsonLine line;
      line["variant"] = r.name;
      line["bytes_per_step"] = static_cast<uint64_t>(r.bytesPerStep);
      line["cross_node_bytes_per_step"] = static_cast<uint64_t>(r.crossNodeBytesPerStep);
      line["step_s"] = rounded(r.stepSeconds, 4);
      printJsonLine(line);
    } else {
      std::printf("%-14s %14.0f %18.0f %9.4f\n", r.name.c_str(), r.bytesPerStep,
                  r.crossNodeBytesPerStep, r.stepSeconds);
    }
  }
  auto find = [&](const std::string& name) -> const Result* {
    for (const Result& r : results)
      if (r.name == name) return &r;
    return nullptr;
  };
  auto ratio = [&](const char* what, const std::string& base, const std::string& other,
                   double Result::*field) {
    const Result *b = find(base), *x = find(other);
    if (!b || !x || x->*field <= 0) return;
    const double value = b->*field / (x->*field);
    if (o.json) {
      JsonLine line;
      line["ratio"] = std::string(what);
      line["value"] = rounded(value, 3);
      printJsonLine(line);
    } else {
      std::printf("%-44s %8.2fx\n", what, value);
    }
  };
  ratio("adam/onebit_adam bytes (target >= 16)", "adam", "onebit_adam", &Result::bytesPerStep);
  ratio("adam/onebit_adam step time (target >= 3)", "adam", "onebit_adam", &Result::stepSeconds);
  ratio("onebit_adam/zero_one_adam bytes (target > 1)", "onebit_adam", "zero_one_adam",
        &Result::bytesPerStep);
  ratio("adam/onebit_lamb bytes (LAMB sends as Adam)", "adam", "onebit_lamb",
        &Result::bytesPerStep);
  ratio("zero3/zeropp cross-node bytes (target >= 3)", "zero3", "zeropp",
        &Result::crossNodeBytesPerStep);
  ratio("zero3/zeropp step time (target > 1)", "zero3", "zeropp", &Result::stepSeconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_comm_efficiency", [&] {
    Options o;
    CLI::App app{"bench_comm_efficiency: 1-bit optimizers and ZeRO++ on bandwidth-limited nodes"};
    ds::bench::showDefaults(app);
    app.add_option("--rate-mbit", o.rateMbit, "each node's link rate")
        ->check(CLI::Range(1, 100000));
    app.add_option("--warmup", o.warmup, "steps before the timed ones (the freeze steps)")
        ->check(CLI::Range(1, 1000));
    app.add_option("--steps", o.steps, "timed steps")->check(CLI::Range(1, 1000));
    app.add_option("--variants", o.variants, "which variants, in order")->delimiter(',');
    app.add_flag("--json", o.json, "one JSON line per variant, then the ratios");
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return runAll(o);
  });
}
