// ds-launch --autotuning with real processes: a GPT tuned over two loopback nodes (every started
// experiment succeeds, DeepSpeed's files in results_dir, the winner's config trains as it is), a
// dry run that starts nothing, a GPT whose ZeRO 0-2 cannot fit a memory cgroup tuned without ever
// starting them, a Python program tuned through DeepSpeed's contract (--deepspeed_config,
// arg_mappings, the metric file), experiments that hang or fail without taking the tuner down,
// Ctrl-C and a resumed tuning, and DeepSpeedExamples' autotuning configs under ds-config check.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "test/byte_corpus.h"
#include "test/launch_harness.h"
#include "test/memory_cgroup.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"
#include "test/skip.h"

using namespace ds::test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

// A small GPT on the byte corpus with the batch split and the ZeRO stage left to the tuner.
std::string tunedGptYaml(const std::string& autotuning) {
  return R"(num-layers: 2
hidden-size: 64
num-attention-heads: 4
seq-length: 32
max-position-embeddings: 32
pos-emb: learned
data-path: data/corpus
tokenizer-type: ByteTokenizer
split: "90,10,0"
train-iters: 6
lr: 0.001
log-interval: 1
eval-interval: 1000
eval-iters: 1
train_batch_size: 8
train_micro_batch_size_per_gpu: auto
zero_optimization:
  stage: auto
autotuning:
  enabled: true
  start_profile_step: 1
  end_profile_step: 3
)" + autotuning;
}

std::string prepare(const std::string& name, const std::string& hostfile) {
  const std::string dir = makeScratchDir(name);
  writeByteCorpus(dir + "/data/corpus", 40, [](int) { return 3; });
  writeFile(dir + "/hostfile", hostfile);
  return dir;
}

CommandOutcome tune(const std::string& dir, const std::string& args, const std::string& env = "") {
  return runCommand("cd " + dir + " && " + env + DS_BIN_DIR +
                    "/ds-launch --hostfile hostfile --master_port 0 " + args + " 2>&1");
}

Json readJson(const std::string& path) { return Json::parse(readFile(path)); }

// The experiments summary.json lists, by status.
std::map<std::string, std::vector<std::string>> byStatus(const std::string& resultsDir) {
  std::map<std::string, std::vector<std::string>> out;
  const Json summary = readJson(resultsDir + "/summary.json");
  for (const Json& e : summary["experiments"])
    out[e["status"].get<std::string>()].push_back(e["name"].get<std::string>());
  return out;
}

// A program that follows DeepSpeed's autotuning contract: its config from --deepspeed_config,
// the micro-batch also through the arg_mappings flag (it checks they agree), and on rank 0 the
// metric file at autotuning.metric_path. Its throughput grows with the micro-batch and falls with
// the ZeRO stage, so the best is known. `extra` runs before the metric is written.
std::string contractProgram(const std::string& extra = "") {
  return R"PY(import argparse, json, os, sys, time
p = argparse.ArgumentParser()
p.add_argument("--local_rank", type=int)
p.add_argument("--deepspeed_config")
p.add_argument("--per_device_train_batch_size", type=int)
p.add_argument("--gradient_accumulation_steps", type=int)
a, _ = p.parse_known_args()
c = json.load(open(a.deepspeed_config))
micro = c["train_micro_batch_size_per_gpu"]
stage = c["zero_optimization"]["stage"]
if micro != a.per_device_train_batch_size or a.gradient_accumulation_steps != c["gradient_accumulation_steps"]:
    sys.exit("arg_mappings: the flags disagree with the config")
with open("argv-%d-%d.txt" % (stage, micro), "w") as f:
    f.write(" ".join(sys.argv))
)PY" + extra +
         R"PY(
throughput = 100.0 * micro / (1 + 0.1 * micro) - 5 * stage
if os.environ["RANK"] == "0":
    with open(c["autotuning"]["metric_path"], "w") as f:
        json.dump({"throughput": throughput, "latency": 1e6 / throughput,
                   "FLOPS_per_gpu": throughput * 1e9}, f)
)PY";
}

std::string programConfig(const std::string& autotuning) {
  return R"({"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": "auto"},
  "autotuning": {"enabled": true, "fast": true, "max_train_micro_batch_size_per_gpu": 8,
    "arg_mappings": {"train_micro_batch_size_per_gpu": "--per_device_train_batch_size",
                     "gradient_accumulation_steps ": "--gradient_accumulation_steps"})" +
         autotuning + "}}";
}

std::string programArgs() {
  return std::string("--python ") + kPython +
         " --autotuning tune prog.py --deepspeed_config ds.json --per_device_train_batch_size 1";
}

}  // namespace

TEST_CASE(
    "autotuning a GPT on 2 loopback nodes x 2 ranks: every started experiment succeeds, "
    "DeepSpeed's files are written, and the winner's config trains as it is",
    "[autotuning][launch]") {
  const std::string dir = prepare("autotune-gpt", "127.0.0.1 slots=2\n127.0.0.2 slots=2\n");
  writeFile(dir + "/tune.yml", tunedGptYaml("  tuner_type: model_based\n"));
  const CommandOutcome out = tune(dir, "--autotuning tune train --config tune.yml");
  INFO(out.output);
  REQUIRE(out.status == 0);
  CHECK(std::regex_search(out.output,
                          std::regex("autotuning: 8 candidates for 4 ranks, [0-9]+ to try")));
  const std::string results = dir + "/autotuning_results";
  const auto status = byStatus(results);
  REQUIRE(status.count("ok") == 1);
  CHECK(status.count("failed") == 0);
  CHECK(status.count("timed out") == 0);
  const size_t ran = status.at("ok").size();
  CHECK(ran < 8);  // model_based stops before the grid is done
  for (const std::string& name : status.at("ok")) {
    INFO(name);
    for (const char* file :
         {"ds_config.json", "cmd.txt", "exp.json", "stdout.log", "stderr.log", "metrics.json"})
      CHECK(fs::exists(results + "/" + name + "/" + file));
    CHECK(fs::exists(dir + "/autotuning_exps/" + name + ".json"));
    const Json m = readJson(results + "/" + name + "/metrics.json");
    for (const char* key : {"latency", "throughput", "FLOPS_per_gpu", "rank", "peak_rss_bytes"})
      CHECK(m.contains(key));
    CHECK(m["throughput"].get<double>() > 0);
    // Throughput is the global batch over the step: latency (microseconds) says the same.
    CHECK(m["throughput"].get<double>() ==
          Approx(8 * 1e6 / m["latency"].get<double>()).epsilon(1e-6));
  }
  CHECK(fs::exists(results + "/summary.txt"));
  const Json optimal = readJson(results + "/ds_config_optimal.json");
  CHECK_FALSE(optimal.contains("autotuning"));
  CHECK(optimal["train_micro_batch_size_per_gpu"].is_number_integer());
  CHECK(optimal["train-iters"] == 6);  // the user's, not the profile's
  CHECK(readFile(results + "/cmd_optimal.txt").find("ds_config_optimal.json") != std::string::npos);
  // The winner as the user trains with it.
  const CommandOutcome train =
      tune(dir, "--log_dir logs-optimal train --config autotuning_results/ds_config_optimal.json");
  INFO(train.output);
  CHECK(train.status == 0);
  CHECK(train.output.find("iteration 6/6") != std::string::npos);
}

TEST_CASE("autotuning --dry-run prints the space in the tuner's order and starts nothing",
          "[autotuning][launch]") {
  const std::string dir = prepare("autotune-dry", "127.0.0.1 slots=2\n");
  writeFile(dir + "/tune.yml", tunedGptYaml("  tuner_type: model_based\n"));
  const CommandOutcome out = tune(dir, "--autotuning tune --dry-run train --config tune.yml");
  INFO(out.output);
  REQUIRE(out.status == 0);
  CHECK(out.output.find("autotuning (dry run): 12 candidates for 2 ranks") != std::string::npos);
  CHECK(std::regex_search(out.output, std::regex("\n  1 +z[0-3]_gas[0-9]+_tmbspg[0-9]+ ")));
  CHECK_FALSE(fs::exists(dir + "/autotuning_results"));
  CHECK(out.output.find("ds-launch: ") == std::string::npos);  // no job started
}

TEST_CASE(
    "autotuning a GPT in a memory cgroup: what cannot fit is never started, and every "
    "experiment that starts finishes",
    "[autotuning][launch][memory]") {
  const std::string dir = prepare("autotune-memory", "127.0.0.1 slots=2\n127.0.0.2 slots=2\n");
  // 8 blocks of 640: 39M parameters, 16 bytes each of bf16 and Adam state, all on every rank at
  // ZeRO 0 (about 700 MiB a rank), a quarter at ZeRO 3; small buckets keep the buffers small.
  std::string yaml = tunedGptYaml("  tuner_type: gridsearch\n");
  yaml = std::regex_replace(yaml, std::regex("num-layers: 2\nhidden-size: 64"),
                            "num-layers: 8\nhidden-size: 640");
  yaml = std::regex_replace(yaml,
                            std::regex("train_batch_size: 8\ntrain_micro_batch_size_per_gpu: "
                                       "auto"),
                            "train_batch_size: 4\ntrain_micro_batch_size_per_gpu: 1\n"
                            "precision: bfloat16");
  yaml = std::regex_replace(yaml, std::regex("  stage: auto\n"),
                            "  stage: auto\n  reduce_bucket_size: 4000000\n"
                            "  allgather_bucket_size: 4000000\n");
  writeFile(dir + "/tune.yml", yaml);
  // The cgroup: room for the four ranks at ZeRO 3 with the tuner's headroom (1.5), far from
  // ZeRO 0's need.
  const CommandOutcome plan = tune(dir, "--autotuning tune --dry-run train --config tune.yml");
  INFO(plan.output);
  REQUIRE(plan.status == 0);
  std::smatch m;
  REQUIRE(std::regex_search(plan.output, m, std::regex("z3_gas1_tmbspg1 +([0-9]+) ")));
  const double z3 = std::stod(m[1]) * 1048576;
  REQUIRE(std::regex_search(plan.output, m, std::regex("z0_gas1_tmbspg1 +([0-9]+) ")));
  const double z0 = std::stod(m[1]) * 1048576;
  const auto limit = static_cast<uint64_t>(4 * 1.6 * z3 + (64 << 20));
  REQUIRE(4 * z0 > static_cast<double>(limit));  // ZeRO 0 cannot run in it
  std::optional<MemoryCgroup> cgroup = MemoryCgroup::make("autotune", limit);
  if (skipUnless(cgroup.has_value(),
                 "no memory cgroup can be created here (needs root and a "
                 "writable cgroup v1 memory or v2 hierarchy)"))
    return;
  const CommandOutcome out = runCommand(
      "cd " + dir + " && sh -c '" + cgroup->enter() + "exec " + DS_BIN_DIR +
      "/ds-launch --hostfile hostfile --master_port 0 --autotuning tune train --config tune.yml' "
      "2>&1");
  INFO(out.output);
  REQUIRE(out.status == 0);
  const auto status = byStatus(dir + "/autotuning_results");
  REQUIRE(status.count("ok") == 1);
  CHECK(status.count("failed") == 0);
  CHECK(std::count(status.at("ok").begin(), status.at("ok").end(), "z3_gas1_tmbspg1") == 1);
  REQUIRE(status.count("pruned") == 1);
  CHECK(std::count(status.at("pruned").begin(), status.at("pruned").end(), "z0_gas1_tmbspg1") == 1);
  CHECK(readFile(dir + "/autotuning_results/summary.txt").find("memory") != std::string::npos);
}

TEST_CASE(
    "autotuning a Python program through DeepSpeed's contract: --deepspeed_config, "
    "arg_mappings and the metric file",
    "[autotuning][launch][program]") {
  if (skipUnless(access(kPython, X_OK) == 0, "no /usr/bin/python3")) return;
  const std::string dir = prepare("autotune-program", "127.0.0.1 slots=2\n");
  writeFile(dir + "/prog.py", contractProgram());
  writeFile(dir + "/ds.json", programConfig(R"(, "tuner_early_stopping": 100)"));
  const CommandOutcome out = tune(dir, programArgs());
  INFO(out.output);
  REQUIRE(out.status == 0);
  // Stages 0-3 x the three largest micro-batches up to 8: the grid, best at micro 8, ZeRO 0.
  const auto status = byStatus(dir + "/autotuning_results");
  REQUIRE(status.count("ok") == 1);
  CHECK(status.at("ok").size() == 12);
  CHECK(readJson(dir + "/autotuning_results/summary.json")["best"] == "z0_gas1_tmbspg8");
  // The program got the tuned micro-batch on its own flag, replacing the one it was given.
  const std::string argv = readFile(dir + "/argv-2-4.txt");
  CHECK(argv.find("--per_device_train_batch_size 4") != std::string::npos);
  CHECK(argv.find("--per_device_train_batch_size 1") == std::string::npos);
  CHECK(argv.find("autotuning_results/z2_gas1_tmbspg4/ds_config.json") != std::string::npos);
  const Json optimal = readJson(dir + "/autotuning_results/ds_config_optimal.json");
  CHECK(optimal["train_micro_batch_size_per_gpu"] == 8);
  CHECK(optimal["zero_optimization"]["stage"] == 0);
  CHECK(readFile(dir + "/autotuning_results/cmd_optimal.txt")
            .find("--per_device_train_batch_size 8") != std::string::npos);
}

TEST_CASE(
    "an experiment that hangs is stopped at --autotuning_timeout and one that fails is "
    "recorded: the tuner goes on, and no process of theirs is left",
    "[autotuning][launch][program]") {
  if (skipUnless(access(kPython, X_OK) == 0, "no /usr/bin/python3")) return;
  const std::string dir = prepare("autotune-faults", "127.0.0.1 slots=1\n");
  writeFile(dir + "/prog.py", contractProgram(R"PY(if micro == 8 and stage == 1:
    time.sleep(3600)
if micro == 4 and stage == 1:
    sys.exit("out of memory (a test's)")
)PY"));
  writeFile(dir + "/ds.json", programConfig(R"(, "tuner_early_stopping": 100)"));
  const CommandOutcome out = tune(dir, "--autotuning_timeout 4 " + programArgs());
  INFO(out.output);
  REQUIRE(out.status == 0);
  const auto status = byStatus(dir + "/autotuning_results");
  CHECK(status.at("timed out") == std::vector<std::string>{"z1_gas1_tmbspg8"});
  CHECK(status.at("failed") == std::vector<std::string>{"z1_gas1_tmbspg4"});
  CHECK(status.at("ok").size() == 10);
  CHECK(out.output.find("out of memory (a test's)") != std::string::npos);
  CHECK(readJson(dir + "/autotuning_results/summary.json")["best"] == "z0_gas1_tmbspg8");
  CHECK(processesMentioning(dir + "/autotuning_results").empty());
}

TEST_CASE(
    "Ctrl-C stops the tuning with its summary written, and a rerun with overwrite false "
    "reuses the finished experiments",
    "[autotuning][launch][program]") {
  if (skipUnless(access(kPython, X_OK) == 0, "no /usr/bin/python3")) return;
  const std::string dir = prepare("autotune-interrupt", "127.0.0.1 slots=1\n");
  // The second experiment (ZeRO 0, micro 4) takes long enough to be interrupted in.
  writeFile(dir + "/prog.py",
            contractProgram(R"PY(if micro == 4 and stage == 0 and not os.path.exists("resume"):
    time.sleep(60)
)PY"));
  writeFile(dir + "/ds.json",
            programConfig(R"(, "overwrite": false, "tuner_early_stopping": 100)"));
  std::vector<std::string> args = {"--hostfile",
                                   "hostfile",
                                   "--master_port",
                                   "0",
                                   "--python",
                                   kPython,
                                   "--autotuning",
                                   "tune",
                                   "prog.py",
                                   "--deepspeed_config",
                                   "ds.json",
                                   "--per_device_train_batch_size",
                                   "1"};
  {
    LaunchedJob job = startLaunch(dir, args);
    REQUIRE(waitUntil(std::chrono::seconds(60), [&] {
      return readFile(dir + "/stdout").find("[1/12]") != std::string::npos &&
             fs::exists(dir + "/argv-0-4.txt");
    }));
    kill(job.pid, SIGINT);
    const auto status = waitExit(job, std::chrono::seconds(60));
    INFO(readFile(dir + "/stdout"));
    REQUIRE(status);
    CHECK(*status == 130);
    CHECK(readFile(dir + "/stdout").find("Tuning interrupted") != std::string::npos);
    CHECK(readFile(dir + "/autotuning_results/summary.txt").find("\"overwrite\": false") !=
          std::string::npos);
  }
  CHECK(processesMentioning(dir + "/autotuning_results").empty());
  writeFile(dir + "/resume", "");
  const CommandOutcome again = tune(dir, programArgs());
  INFO(again.output);
  REQUIRE(again.status == 0);
  CHECK(std::regex_search(again.output, std::regex("z0_gas1_tmbspg2: [0-9.e+]+ samples/s "
                                                   "\\(predicted [0-9.e+]+\\), reused")));
  CHECK(readJson(dir + "/autotuning_results/summary.json")["best"] == "z0_gas1_tmbspg8");
}

TEST_CASE(
    "DeepSpeedExamples' autotuning configs pass ds-config check --autotuning, and without it "
    "their auto values are refused by name",
    "[autotuning][config]") {
  // The shapes of the 14 configs of DeepSpeedExamples/training/autotuning/hf: a tuning block
  // (with or without max_train_batch_size, fast, fp16) or a fixed ZeRO stage, "auto" micro-batch.
  const std::string mappings =
      R"("arg_mappings": {"train_micro_batch_size_per_gpu": "--per_device_train_batch_size",
         "gradient_accumulation_steps ": "--gradient_accumulation_steps"})";
  std::vector<std::string> configs;
  for (const std::string extra : {R"("max_train_batch_size": 4096,)", "", R"("fast": true,)"})
    for (const std::string fp16 : {"", R"("fp16": {"enabled": true, "initial_scale_power": 12},)"})
      configs.push_back(R"({"train_micro_batch_size_per_gpu": "auto", )" + fp16 +
                        R"("autotuning": {"enabled": true, "overwrite": false, )" + extra +
                        mappings + "}}");
  for (int stage = 0; stage <= 3; ++stage)
    for (const std::string fp16 : {"", R"(, "fp16": {"enabled": true})"})
      configs.push_back(R"({"train_micro_batch_size_per_gpu": "auto", "zero_optimization": )"
                        R"({"stage": )" +
                        std::to_string(stage) + "}" + fp16 + "}");
  REQUIRE(configs.size() == 14);
  const std::string dir = makeScratchDir("autotune-examples");
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string path = dir + "/c" + std::to_string(i) + ".json";
    writeFile(path, configs[i]);
    INFO(configs[i]);
    const CommandOutcome checked =
        runCommand(std::string(DS_BIN_DIR) + "/ds-config check --autotuning " + path + " 2>&1");
    INFO(checked.output);
    CHECK(checked.status == 0);
    const CommandOutcome plain =
        runCommand(std::string(DS_BIN_DIR) + "/ds-config check " + path + " 2>&1");
    CHECK(plain.status == 2);
    CHECK(plain.output.find("train_micro_batch_size_per_gpu: \"auto\" is for an autotuner to "
                            "choose") != std::string::npos);
  }
}
