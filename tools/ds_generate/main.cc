// ds-generate: text from a checkpoint of the GPT trainer, in one process.
//   ds-generate CHECKPOINT_DIR [--tag TAG] --prompt TEXT [--max-new-tokens N] [--temperature T]
//               [--top-k K] [--seed S]
// The model and tokenizer are rebuilt from CHECKPOINT_DIR/neox_config.json (written by the trainer
// next to its checkpoints; relative vocab/merge file paths are read from the working directory).
// The parameters are read layer by layer from the shard files as the model uses them, whatever
// the world size, stage and grid that saved them (runtime/engine/checkpoint_layers.h): the process
// holds a few layers, never the whole model.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/command_line.h"
#include "common/error.h"
#include "common/files.h"
#include "common/guarded_main.h"
#include "common/json_text.h"
#include "runtime/checkpoint/checkpoint_files.h"
#include "runtime/config/job_config.h"
#include "runtime/config/neox_config.h"
#include "runtime/engine/checkpoint_layers.h"
#include "runtime/model/gpt.h"
#include "runtime/model/sampler.h"

namespace {

struct Options {
  std::string checkpoint, tag, prompt;
  ds::runtime::SamplingOptions sampling;
  bool stopAtEndOfDocument = true;
  size_t cacheLayers = 2;
};

int run(const Options& o) {
  using namespace ds;
  using namespace ds::runtime;
  const std::string configPath = o.checkpoint + "/neox_config.json";
  if (!std::filesystem::exists(configPath))
    throw ds::Error(configPath + ": missing; ds-generate reads the model from the neox_config.json "
                                 "the GPT trainer writes into its save directory");
  nlohmann::json merged =
      parseJsonText(ds::readWholeFile(configPath, "model config", size_t{16} << 20), configPath,
                    {kMaxShippedConfigDepth});
  if (!merged.is_object())
    throw ds::Error(configPath + ": expected a JSON object of NeoX config keys");
  // One replica of one micro-batch, whatever trained it (only the model keys matter here).
  merged["zero_optimization"] = {{"stage", 0}};
  merged.erase("train_batch_size");
  merged.erase("gradient_accumulation_steps");
  merged["batch-size"] = 1;
  NeoxConfig neox = parseNeoxConfig(merged, kOneReplica);
  const std::unique_ptr<Tokenizer> tokenizer = makeJobTokenizer(neox.train);
  GptConfig modelConfig = modelConfigFor(neox.train, *tokenizer);
  modelConfig.attentionDropout = modelConfig.hiddenDropout = 0.0;
  Gpt model(modelConfig);
  const std::string tag = o.tag.empty() ? readLatestTag(o.checkpoint) : o.tag;
  if (tag.empty() || tag.front() == '.' || tag.find_first_of("/\\") != std::string::npos)
    throw ds::Error("checkpoint tag \"" + tag +
                    "\": expected a plain name (no '/', not empty, "
                    "not starting with '.'), e.g. \"global_step100\"");
  CheckpointLayers layers(model, (std::filesystem::path(o.checkpoint) / tag).string(),
                          neox.deepspeed.precision.modelDtype, o.cacheLayers);

  SamplingOptions sampling = o.sampling;
  if (o.stopAtEndOfDocument) sampling.stopToken = tokenizer->endOfDocument();
  const auto generated = generateTokens(
      model,
      [&](const std::vector<int32_t>& context) { return model.nextTokenLogits(context, layers); },
      tokenizer->encode(o.prompt), sampling);
  std::fprintf(stderr, "ds-generate: %s/%s, %zu parameters, %zu new tokens\n", o.checkpoint.c_str(),
               tag.c_str(), model.parameterCount(), generated.size());
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  constexpr double kMiB = 1024.0 * 1024.0;
  std::fprintf(stderr,
               "ds-generate: peak RSS %.1f MiB; parameters %.1f MiB in fp32, at most %.1f MiB of "
               "them held (layer by layer, %zu cached)\n",
               static_cast<double>(usage.ru_maxrss) / 1024.0,
               static_cast<double>(model.parameterCount() * sizeof(float)) / kMiB,
               static_cast<double>(layers.peakResidentBytes()) / kMiB, o.cacheLayers);
  std::printf("%s%s\n", o.prompt.c_str(), tokenizer->decode(generated).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("ds-generate", [&] {
    CLI::App app{"ds-generate: text from a GPT checkpoint of the GPT trainer"};
    Options o;
    app.add_option("checkpoint", o.checkpoint, "the trainer's save directory")
        ->required()
        ->check(CLI::ExistingDirectory);
    app.add_option("--tag", o.tag, "checkpoint tag (default: the directory's latest)");
    app.add_option("--prompt", o.prompt, "text to continue")->required();
    app.add_option("--max-new-tokens,--max_new_tokens", o.sampling.maxNewTokens, "tokens to add")
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--temperature", o.sampling.temperature, "0: greedy")
        ->check(CLI::Range(0.0, 100.0));
    app.add_option("--top-k,--top_k", o.sampling.topK, "sample among the K likeliest (0: all)")
        ->check(CLI::Range(0, 1 << 30));
    app.add_option("--seed", o.sampling.seed, "sampling seed");
    app.add_option("--cache-layers", o.cacheLayers,
                   "released layers kept in memory (the rest are read again when used)")
        ->check(CLI::Range(0, 1 << 20));
    app.add_flag("!--no-stop", o.stopAtEndOfDocument,
                 "keep going past the end-of-document token");
    if (std::optional<int> status = ds::parseCommandLine(app, argc, argv)) return *status;
    if (o.prompt.empty()) throw ds::Error("--prompt: give at least one character");
    return run(o);
  });
}
