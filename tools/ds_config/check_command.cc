// ds-config check: parse the whole config as ds-launch would for a given world size and print the
// resolved batch trio (train_batch_size = micro x accumulation x ranks), then what each key the
// config sets does here: in effect, or not (no effect by nature, or switched off).
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/memory_budget.h"
#include "common/printable.h"
#include "contract/job_args.h"
#include "launcher/autotuning/tuning_space.h"
#include "runtime/config/gpt_job_data.h"
#include "runtime/config/gpt_job_memory.h"
#include "runtime/config/job_config.h"
#include "runtime/config/neox_keys.h"
#include "runtime/config/rank_memory_preflight.h"
#include "runtime/data/label_dataset.h"
#include "runtime/data/vocabulary_fit.h"
#include "runtime/model/gpt.h"
#include "runtime/model/gpt_stage_partition.h"
#include "tools/ds_config/commands.h"

namespace ds::tools {
namespace {

struct CheckOptions {
  std::vector<std::string> config;  // files, or comma lists of them
  int64_t worldSize = 0;  // not given: one rank, or one model replica of a 3D NeoX job
  bool json = false;
  std::string nodeMemory;    // --node-memory: each node's memory, "512G"; empty: this machine's
  int64_t ranksPerNode = 0;  // 0: every rank of the job on one node
  bool autotuning = false;   // "auto" values are the autotuner's (ds-launch --autotuning)
};

// What a rank of the job needs (its sample tables and activations, its training state at its
// peak) against a node's memory. Against the nodes' memory where the user gives it, a shortfall
// is refused; against this machine's, where the job may not run at all (13B checked on a login
// node), it is a warning naming the setting that would make it fit. What no machine could hold is
// refused either way.
void checkMemory(const runtime::JobConfig& job, int64_t world, const CheckOptions& o,
                 const std::string& path) {
  if (!job.gpt) return;  // a DeepSpeed JSON job's model is the script's: nothing to size
  const int ranksHere = static_cast<int>(o.ranksPerNode != 0 ? o.ranksPerNode : world);
  auto shortfall = [&](const MemoryBudget& node) -> std::string {
    try {
      runtime::checkGptJobMemory(*job.gpt, job.deepspeed.batch, node);
      runtime::checkRankMemory(job, static_cast<int>(world), ranksHere, node, path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  // Larger than any one machine sold today: a need beyond it is a config that can run nowhere.
  constexpr uint64_t kLargestMachine = uint64_t{64} << 40;
  // Up to 1 PiB of --node-memory: what a node could have, with room to spare.
  const bool nodesGiven = !o.nodeMemory.empty();
  const MemoryBudget node =
      nodesGiven ? MemoryBudget{parseByteSize("--node-memory", o.nodeMemory, uint64_t{1} << 50),
                                "--node-memory " + o.nodeMemory}
                 : memoryBudget();
  // One estimate where the job fits (the common case); the others only to say why it does not.
  const std::string problem = shortfall(node);
  if (problem.empty() && node.availableBytes <= kLargestMachine) return;
  if (std::string nowhere = shortfall({kLargestMachine, "the largest machine there is (64 TiB)"});
      !nowhere.empty())
    throw Error(nowhere);
  if (problem.empty()) return;
  if (nodesGiven) throw Error(problem);
  std::cerr << "warning: not on this machine: " << printable(problem)
            << " (only a warning: the job's nodes may have more; --node-memory SIZE checks "
               "against theirs, and ds-launch against this machine's for a job it runs here)\n";
}

using runtime::KeyEffect;

bool inEffect(const runtime::KeyVerdict& v) { return v.effect == KeyEffect::Honoured; }

// Why a key the config sets changes nothing: its nature here, or that it is switched off.
std::string whyNot(const runtime::KeyVerdict& v) {
  if (v.effect == KeyEffect::NoEffect) return "no effect here: " + v.note;
  if (v.effect == KeyEffect::Observer) return "not provided: " + v.note;
  return "switched off (not implemented here)";
}

// --autotuning: the config as ds-launch --autotuning's first candidate has it (its "auto" values
// and tuned keys chosen), so that everything else in it is checked; the autotuning block (or
// DeepSpeed's defaults without one) decides the choices.
std::string withTunerChoice(const std::string& text, int64_t worldSize, const std::string& path) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(text);
  const bool neox = runtime::isShippedNeoxText(text);
  nlohmann::ordered_json& config = neox ? doc["neox"] : doc;
  runtime::AutotuningConfig autotuning;
  if (config.is_object() && config.contains("autotuning"))
    autotuning = runtime::readAutotuningBlock(config["autotuning"].dump(), path);
  launcher::TuningJobShape shape;
  shape.world = static_cast<int>(std::max<int64_t>(1, worldSize));
  shape.gpt = neox;
  config = launcher::firstChoiceConfig(config, autotuning, shape);
  return doc.dump();
}

void runCheck(const CheckOptions& o) {
  const std::string path = runtime::configPathsText(o.config);
  // Memory is checked below, against the job's nodes rather than only this machine.
  const std::string text = runtime::readJobConfigText(o.config);
  const runtime::JobConfig job =
      runtime::parseJobConfig(o.autotuning ? withTunerChoice(text, o.worldSize, path) : text,
                              o.worldSize, path, runtime::MemoryCheck::Elsewhere);
  const runtime::DeepSpeedConfig& c = job.deepspeed;
  runtime::checkSchedulerElasticConfig(c.elasticity, runtime::configPathsText(o.config));
  // Warnings quote the config's keys: print their control bytes escaped.
  for (const std::string& warning : c.warnings)
    std::cerr << "warning: " << printable(warning) << '\n';
  for (const std::string& note : job.notes) std::cerr << "note: " << printable(note) << '\n';
  size_t gptParameters = 0;
  if (job.gpt) {  // NeoX YAML: the model it builds with the tokenizer's vocabulary
    const auto tokenizer = runtime::makeJobTokenizer(*job.gpt);
    const runtime::GptConfig model = runtime::modelConfigFor(*job.gpt, *tokenizer);
    // What the ranks refuse as they build the model and read the data, refused here first by the
    // functions they call: the pipeline stages' layers (a cut needs the tokenizer's vocabulary),
    // and every split's samples and blend weights.
    if (job.gpt->parallel.pipe > 1)
      runtime::gptStageBounds(model, job.gpt->parallel.pipe, job.gpt->parallel.partitionMethod);
    runtime::checkGptJobData(*job.gpt, static_cast<uint64_t>(c.batch.trainBatchSize));
    // What a rank finds only when a batch reaches a bad id, found here by reading every token.
    for (const std::string& prefix :
         runtime::checkTokensFitVocabulary(job.gpt->dataPrefixes(), tokenizer->vocabularySize()))
      std::cerr << "warning: " << printable(prefix)
                << ".idx: not found here, so its token ids are not checked against the "
                   "tokenizer's vocabulary, nor its documents against seq-length and the blend "
                   "weights (the run needs it)\n";
    for (const auto& [split, blend] :
         {std::pair<std::string, const runtime::DataBlend*>{"train", &job.gpt->trainData},
          {"valid", &job.gpt->validData},
          {"test", &job.gpt->testData}})
      for (const std::string& prefix :
           runtime::checkLabelDatasets(blend->paths, blend->labelPaths, split + "-label-data-paths",
                                       tokenizer->vocabularySize()))
        if (std::find(blend->paths.begin(), blend->paths.end(), prefix) == blend->paths.end())
          std::cerr << "warning: " << printable(prefix)
                    << ".idx: not found here, so this label dataset is not checked against its "
                       "text dataset and the vocabulary (the run needs it)\n";
    gptParameters = runtime::Gpt(model).parameterCount();
    std::string data = job.gpt->dataPath;
    if (job.gpt->blended()) {
      data.clear();
      for (const std::string& path : job.gpt->trainData.paths)
        data += (data.empty() ? "" : ", ") + path;
    }
    if (!o.json)
      std::cout << "GPT: " << gptParameters << " parameters (" << model.describe() << "), "
                << job.gpt->trainIters << " iterations on " << data << '\n';
  }
  const runtime::BatchConfig& b = c.batch;
  const runtime::ParallelConfig grid = job.gpt ? job.gpt->parallel : runtime::ParallelConfig{};
  const int64_t world = o.worldSize != 0 ? o.worldSize : grid.replicaRanks();
  checkMemory(job, world, o, path);
  if (o.json) {
    nlohmann::ordered_json out = {{"world_size", world},
                                  {"train_batch_size", b.trainBatchSize},
                                  {"train_micro_batch_size_per_gpu", b.microBatchPerGpu},
                                  {"gradient_accumulation_steps", b.gradientAccumulationSteps}};
    if (grid.gridded()) {
      out["pipe_parallel_size"] = grid.pipe;
      out["model_parallel_size"] = grid.model;
      out["data_parallel_size"] = world / grid.replicaRanks();
    }
    if (job.gpt) out["gpt_parameters"] = gptParameters;
    auto& in = out["in_effect"] = nlohmann::ordered_json::array();
    auto& notIn = out["not_in_effect"] = nlohmann::ordered_json::array();
    for (const auto& v : c.keyEffects) (inEffect(v) ? in : notIn).push_back(v.path);
    // A YAML key need not be UTF-8: its invalid bytes become U+FFFD rather than an exception.
    std::cout << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
    return;
  }
  std::cout << runtime::configPathsText(o.config) << ": OK (world size " << world
            << "): train_batch_size " << b.trainBatchSize << " = micro " << b.microBatchPerGpu
            << " x accumulation " << b.gradientAccumulationSteps << " x ";
  if (grid.gridded())
    std::cout << world / grid.replicaRanks() << " data-parallel (world " << world << " / pipe "
              << grid.pipe << " x model " << grid.model << ")\n";
  else
    std::cout << world << (world == 1 ? " rank" : " ranks") << '\n';
  std::cout << "in effect:\n";
  for (const auto& v : c.keyEffects)
    if (inEffect(v)) std::cout << "  " << v.path << ": " << v.note << '\n';
  bool header = false;
  for (const auto& v : c.keyEffects) {
    if (inEffect(v)) continue;
    if (!header) std::cout << "not in effect:\n";
    header = true;
    std::cout << "  " << v.path << ": " << whyNot(v) << '\n';
  }
}

}  // namespace

void addPolicyCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "policy", "Print what every DeepSpeed config key does here (the config policy table)");
  cmd->callback([] {
    for (const auto& rule : runtime::configPolicyTable())
      std::cout << rule.path << " | " << runtime::keyEffectName(rule.effect) << " | " << rule.note
                << '\n';
  });
}

void addNeoxKeysCommand(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("neox-keys",
                         "Print what every GPT-NeoX config key does here, as the Markdown table of "
                         "docs/neox-arguments.md");
  cmd->callback([] {
    auto cell = [](std::string_view text) {  // a '|' would end the cell
      std::string out;
      for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
      return out;
    };
    auto listed = [](std::string_view values) {  // "0|1" -> "0, 1"
      std::string out;
      for (char c : values) out += c == '|' ? std::string(", ") : std::string(1, c);
      return out;
    };
    std::cout << "| key | treatment | what it does here |\n|---|---|---|\n";
    for (const runtime::NeoxKeyRule& rule : runtime::neoxKeyTable()) {
      std::string treatment;
      switch (rule.effect) {
        case KeyEffect::Honoured:
          treatment = "honoured";
          break;
        case KeyEffect::NoEffect:
          treatment = "accepted, no effect here";
          break;
        case KeyEffect::Observer:
          treatment = "not provided (a note when on)";
          break;
        case KeyEffect::NotImplemented:
          treatment = "refused when on (off: null" +
                      (rule.offValues.empty() ? "" : ", " + listed(rule.offValues)) + ")";
          break;
      }
      std::cout << "| `" << rule.name << "` | " << treatment << " | " << cell(rule.note) << " |\n";
    }
    for (const auto& rule : runtime::configPolicyTable()) {
      if (rule.path.find('.') != std::string::npos) continue;
      const auto& taken = runtime::neoxDeepSpeedKeys();
      const auto own = std::find_if(taken.begin(), taken.end(),
                                    [&](const auto& key) { return key.name == rule.path; });
      if (own != taken.end())
        std::cout << "| `" << rule.path << "` | honoured (DeepSpeed key) | " << cell(own->note)
                  << " |\n";
      else
        std::cout << "| `" << rule.path
                  << "` | DeepSpeed key: " << runtime::keyEffectName(rule.effect) << " | "
                  << cell(rule.note) << " |\n";
    }
  });
}

void addCheckCommand(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Validate CONFIG and print the resolved batch sizes; warnings go to stderr");
  cmd->add_option("config", o->config,
                  "DeepSpeed JSON config, or NeoX config files (a.yml b.yml, or \"a.yml, b.yml\")")
      ->required();
  cmd->add_option("--world-size", o->worldSize,
                  "ranks of the job (default: 1, or pipe x model of a NeoX config); the batch "
                  "is split over world / (pipe-parallel-size x model-parallel-size)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_flag("--json", o->json, "print one JSON object instead of a sentence");
  cmd->add_flag("--autotuning", o->autotuning,
                "check a config for ds-launch --autotuning: its \"auto\" values and tuned keys "
                "set as the tuner's first candidate sets them");
  cmd->add_option("--node-memory", o->nodeMemory,
                  "memory of each of the job's nodes (512G, 2T): a rank that cannot fit is "
                  "refused; without it, one that cannot fit on this machine is a warning");
  cmd->add_option("--ranks-per-node", o->ranksPerNode,
                  "ranks sharing a node's memory (default: every rank of the job)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->callback([o] { runCheck(*o); });
}

}  // namespace ds::tools
