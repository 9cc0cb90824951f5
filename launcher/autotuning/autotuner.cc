// runAutotuning: read, enumerate, check, order, run, report. See the header.
#include "launcher/autotuning/autotuner.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "common/error.h"
#include "common/files.h"
#include "common/json_text.h"
#include "common/memory_budget.h"
#include "launcher/autotuning/experiment_runner.h"
#include "launcher/autotuning/tuner.h"
#include "launcher/autotuning/tuning_cost_model.h"
#include "launcher/autotuning/tuning_report.h"
#include "launcher/autotuning/tuning_space.h"
#include "launcher/exported_env.h"
#include "launcher/job_planning.h"
#include "launcher/job_run.h"
#include "launcher/worker_process.h"
#include "runtime/checkpoint/checkpoint_files.h"
#include "runtime/config/job_config.h"
#include "runtime/config/rank_memory_preflight.h"
#include "runtime/config/rank_peak_memory.h"

namespace ds::launcher {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::atomic<bool> interrupted{false};
void onSignal(int) { interrupted = true; }

// DeepSpeed's autotuner looks for these, in this order; --config is this project's.
constexpr const char* kProgramConfigFlags[] = {"--deepspeed_config", "--deepspeed", "--config"};

// Where a program's config path is in its arguments (the index of the value).
std::optional<size_t> programConfigArg(const std::vector<std::string>& jobArgs) {
  for (const char* flag : kProgramConfigFlags)
    for (size_t i = 1; i + 1 < jobArgs.size(); ++i)
      if (jobArgs[i] == flag) return i + 1;
  return std::nullopt;
}

// The job as the tuner sees it.
struct TuningInput {
  bool builtIn = true;
  bool neox = false;
  Json config;  // DeepSpeed's keys at the top level (a NeoX config: its merged keys)
  std::string configPath;
  runtime::AutotuningConfig autotuning;
};

TuningInput readTuningInput(const CommandLine& line, const JobSpec& job) {
  TuningInput in;
  if (job.kind == JobKind::Train) {
    in.configPath = runtime::configPathsText(job.configPaths);
    const std::string text = runtime::readJobConfigText(job.configPaths);
    Json doc = Json::parse(text);
    in.neox = runtime::isShippedNeoxText(text);
    in.config = in.neox ? doc["neox"] : doc;
  } else if (job.kind == JobKind::Program) {
    in.builtIn = false;
    const auto arg = programConfigArg(line.jobArgs);
    if (!arg)
      throw Error("--autotuning: " + line.jobArgs[0] +
                  " has no --deepspeed_config FILE (or --deepspeed FILE): the autotuner passes "
                  "each experiment's config to the program there, as DeepSpeed's does");
    in.configPath = line.jobArgs[*arg];
    in.config = parseOrderedJsonText(
        readWholeFile(in.configPath, "DeepSpeed config", size_t{16} << 20), in.configPath);
  } else {
    throw Error("--autotuning: tunes the built-in train job or a program, not " + line.jobArgs[0]);
  }
  const auto block = in.config.find("autotuning");
  if (!in.config.is_object() || block == in.config.end() || !block->is_object())
    throw Error(in.configPath +
                ": --autotuning needs an \"autotuning\" block in the config, e.g. "
                "\"autotuning\": {\"enabled\": true} (DeepSpeed's autotuner needs one too)");
  in.autotuning = runtime::readAutotuningBlock(block->dump(), in.configPath);
  return in;
}

// ds-launch's flags for an experiment: the user's, without those the tuner sets or that would
// recurse (--autotuning, --dry-run, --log_dir, --master_port).
std::vector<std::string> experimentFlags(const std::vector<std::string>& flags) {
  const std::vector<std::string> withValue = {"--autotuning", "--autotuning_timeout", "--log_dir",
                                              "--master_port"};
  std::vector<std::string> out;
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    if (f == "--dry-run" || f == "--dry_run" || f == "--json") continue;
    bool drop = false;
    for (const std::string& name : withValue) {
      if (f == name) {
        ++i;
        drop = true;
      } else if (f.starts_with(name + "=")) {
        drop = true;
      }
    }
    if (!drop) out.push_back(f);
  }
  return out;
}

// The job's arguments with the config replaced by `path` (and, for a program, the arg_mappings'
// flags carrying the tuned values).
std::vector<std::string> jobArgsWith(const std::vector<std::string>& jobArgs, bool builtIn,
                                     const std::string& path, const Json& tuned,
                                     const runtime::AutotuningConfig& a) {
  std::vector<std::string> out;
  if (builtIn) {  // train --config A [B ...] [other flags]
    for (size_t i = 0; i < jobArgs.size(); ++i) {
      if (jobArgs[i] == "--config" || jobArgs[i] == "--deepspeed_config") {
        out.insert(out.end(), {"--config", path});
        while (i + 1 < jobArgs.size() && !jobArgs[i + 1].starts_with("--")) ++i;
      } else if (jobArgs[i].starts_with("--config=") ||
                 jobArgs[i].starts_with("--deepspeed_config=")) {
        out.insert(out.end(), {"--config", path});
      } else {
        out.push_back(jobArgs[i]);
      }
    }
    return out;
  }
  out = jobArgs;
  out[*programConfigArg(out)] = path;
  for (const auto& [key, flag] : a.argMappings) {
    const auto value = tuned.find(key);
    if (value == tuned.end() || !value->is_number_integer()) continue;
    const std::string text = std::to_string(value->get<int64_t>());
    auto at = std::find(out.begin(), out.end(), flag);
    if (at != out.end() && at + 1 != out.end())
      *(at + 1) = text;
    else
      out.insert(out.end(), {flag, text});
  }
  return out;
}

// What the cost model knows of the job's model (nothing of a program's but model_info).
ModelFacts modelFacts(const TuningInput& in, const std::optional<runtime::JobConfig>& parsed,
                      const runtime::Tokenizer* tokenizer, TuningJobShape& shape) {
  ModelFacts f;
  if (parsed && parsed->gpt && tokenizer) {
    const runtime::GptConfig m = runtime::modelConfigFor(*parsed->gpt, *tokenizer);
    const double seq = m.seqLength, hidden = m.hiddenSize, layers = m.numLayers;
    f.parameters = runtime::gptModelShape(m, 1).parameters;
    // 6 flops a weight a token, and attention's scores and context (causal: half of T x T).
    f.flopsPerSample = 6 * f.parameters * seq + 6 * layers * seq * seq * hidden;
    f.tokensPerSample = seq;
    f.layerActivationBytes = seq * hidden * 4;
    f.layers = m.numLayers;
    shape.layers = m.numLayers;
    shape.heads = m.numAttentionHeads;
  } else if (in.builtIn) {
    f.parameters = runtime::builtInMlpParameters();
    f.flopsPerSample = 6 * f.parameters;
  } else if (in.autotuning.modelParameters) {
    f.parameters = *in.autotuning.modelParameters;
    f.flopsPerSample = 6 * f.parameters;
  }
  shape.parameters = f.parameters;
  return f;
}

// What a config file of the experiment holds (a NeoX config's merged keys, read back by their
// names), and what the launcher ships to the ranks for it (runtime/config/job_config.h).
std::string fileText(const Json& config) { return config.dump(2) + "\n"; }
std::string shippedText(const TuningInput& in, const Json& config) {
  return in.neox ? Json{{"neox", config}}.dump() : config.dump();
}

// The experiment's config: the choice, the metric file, and (a NeoX config) as many iterations
// as the profile runs, so that the data and the schedule are checked for what runs.
Json experimentConfigOf(const TuningInput& in, const TuningChoice& c, const std::string& metric) {
  Json out = experimentConfig(in.config, c, metric);
  if (in.neox) out["train-iters"] = in.autotuning.endProfileStep;
  return out;
}

// Everything decided before the first experiment.
struct TuningPlan {
  std::vector<ExperimentRecord> records;
  std::vector<size_t> runnable;  // indices of records the tuner may run
  std::vector<TunerCandidate> candidates;
  int world = 0;
  bool thisMachine = false;  // every rank on this machine (loopback or netns nodes)
};

// The space, each candidate checked as a launch of it would be (the config rules, the memory
// pre-flight), then thinned to the largest num_tuning_micro_batch_sizes micro-batches that fit.
TuningPlan planTuning(const CommandLine& line, const TuningInput& in) {
  TuningPlan p;
  // The candidates' configs while they are checked: files, as a launch reads them.
  const std::string scratch =
      (fs::temp_directory_path() / ("ds-autotuning-" + std::to_string(getpid()))).string();
  fs::create_directories(scratch);
  struct Remove {
    std::string dir;
    ~Remove() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } removeScratch{scratch};
  CommandLine barrier = line;
  barrier.jobArgs = {"barrier"};
  barrier.flags.dryRun = false;
  barrier.flags.logDir = scratch + "/logs";
  const JobPlan resources = planJob(barrier);
  p.world = resources.plan.worldSize();
  p.thisMachine = allLoopback(resources.plan) || resources.backend == Backend::Netns;

  TuningJobShape shape;
  shape.world = p.world;
  shape.gpt = in.neox;
  std::optional<runtime::JobConfig> parsed;
  if (in.builtIn)
    parsed =
        runtime::parseJobConfig(shippedText(in, firstChoiceConfig(in.config, in.autotuning, shape)),
                                p.world, in.configPath, runtime::MemoryCheck::Elsewhere);
  std::unique_ptr<runtime::Tokenizer> tokenizer;
  if (parsed && parsed->gpt) tokenizer = runtime::makeJobTokenizer(*parsed->gpt);
  const ModelFacts facts = modelFacts(in, parsed, tokenizer.get(), shape);

  std::map<std::string, std::vector<size_t>> byMicro;  // the same but for the batch split
  for (const TuningChoice& c : tuningSpace(in.config, in.autotuning, shape)) {
    ExperimentRecord r;
    r.choice = c;
    r.name = c.name();
    const std::string path = scratch + "/" + r.name + ".json";
    const Json config = experimentConfigOf(in, c, fs::absolute(path + ".metrics").string());
    runtime::writeTextAtomically(path, fileText(config));
    CommandLine check = line;
    check.flags.dryRun = false;
    check.flags.logDir = scratch + "/logs";
    check.jobArgs = jobArgsWith(line.jobArgs, in.builtIn, path, config, in.autotuning);
    try {
      planJob(check);
      if (tokenizer) {
        const runtime::JobConfig job = runtime::parseJobConfig(
            shippedText(in, config), p.world, path, runtime::MemoryCheck::Elsewhere);
        r.predictedPeakBytes = runtime::predictedRankPeak(job, *tokenizer, p.world);
      }
    } catch (const TimeoutError&) {
      throw;
    } catch (const Error& e) {
      // Said of the candidate, not of its scratch file.
      r.pruned = e.what();
      for (size_t at; (at = r.pruned.find(path)) != std::string::npos;)
        r.pruned.replace(at, path.size(), "the candidate");
      r.prunedBy = r.pruned.find("pre-flight") != std::string::npos
                       ? "the launcher's memory pre-flight"
                       : "the config rules";
    }
    if (r.pruned.empty()) {
      TuningChoice key = c;
      key.micro = key.accumulation = 0;
      byMicro[key.name()].push_back(p.records.size());
    }
    p.records.push_back(std::move(r));
  }
  // DeepSpeed's micro-batch rule: of those that fit, the largest few.
  const int64_t keep = in.autotuning.numTuningMicroBatchSizes;
  for (auto& [key, group] : byMicro) {
    std::sort(group.begin(), group.end(), [&](size_t a, size_t b) {
      return p.records[a].choice.micro > p.records[b].choice.micro;
    });
    for (size_t i = 0; i < group.size(); ++i) {
      if (static_cast<int64_t>(i) < keep) {
        p.runnable.push_back(group[i]);
        continue;
      }
      p.records[group[i]].pruned = "a smaller micro-batch than the largest " +
                                   std::to_string(keep) + " that pass the checks";
      p.records[group[i]].prunedBy = "num_tuning_micro_batch_sizes";
    }
  }
  std::sort(p.runnable.begin(), p.runnable.end());  // the space's (grid) order
  for (size_t i : p.runnable) {
    const TuningChoice& c = p.records[i].choice;
    const double dataRanks = static_cast<double>(p.world) / (c.pipe * c.model);
    const double samples = static_cast<double>(c.micro * c.accumulation) * dataRanks;
    p.candidates.push_back(
        {costFeatures(c, facts, p.world), samples, facts.flopsPerSample * samples / p.world});
  }
  return p;
}

// The value the tuner ranks by, from the metric file (DeepSpeed's keys).
std::optional<double> metricOf(const nlohmann::json& m, runtime::TuningMetric metric) {
  const char* key = metric == runtime::TuningMetric::Latency ? "latency"
                    : metric == runtime::TuningMetric::Flops ? "FLOPS_per_gpu"
                                                             : "throughput";
  if (m.contains(key) && m[key].is_number()) return m[key].get<double>();
  if (metric == runtime::TuningMetric::Flops && m.contains("flops") && m["flops"].is_number())
    return m["flops"].get<double>();
  return std::nullopt;
}

int printDryRun(const TuningPlan& p, const Tuner& tuner, const TuningInput& in) {
  const runtime::AutotuningConfig& a = in.autotuning;
  std::printf(
      "autotuning (dry run): %zu candidates for %d ranks, %zu to try (tuner %s, metric "
      "%s); in the order the tuner would run them:\n",
      p.records.size(), p.world, p.runnable.size(), runtime::tunerTypeName(a.tunerType),
      runtime::tuningMetricName(a.metric));
  std::printf("  %-3s %-34s %9s %13s  %s\n", "#", "experiment", "mem MiB", metricUnit(a.metric),
              "choice");
  int n = 0;
  for (size_t c : tuner.plannedOrder()) {
    const ExperimentRecord& r = p.records[p.runnable[c]];
    std::printf(
        "  %-3d %-34s %9s %13.4g  %s\n", ++n, r.name.c_str(),
        r.predictedPeakBytes
            ? std::to_string(static_cast<long long>(*r.predictedPeakBytes / 1048576)).c_str()
            : "-",
        tuner.predictedMetric(c), r.choice.describe().c_str());
  }
  std::printf("%s", formatSetAside(p.records).c_str());
  return 0;
}

// results_dir and exps_dir as overwrite says: emptied (DeepSpeed's default), or kept so that a
// rerun reuses the finished experiments.
void prepareDirectories(const runtime::AutotuningConfig& a) {
  for (const std::string& dir : {a.resultsDir, a.expsDir}) {
    const fs::path path = fs::weakly_canonical(fs::absolute(dir));
    const fs::path here = fs::weakly_canonical(fs::current_path());
    if (a.overwrite && (path == here || here.string().starts_with(path.string() + "/") ||
                        path == path.root_path()))
      throw Error("autotuning: overwrite would delete " + path.string() +
                  ", which holds the working directory; choose results_dir and exps_dir of "
                  "their own");
    if (a.overwrite) fs::remove_all(path);
    fs::create_directories(path);
  }
}

// The experiment as DeepSpeed's autotuner describes it in exps_dir.
void writeExperimentFiles(const ExperimentRecord& r, const TuningInput& in, const Json& config,
                          const std::string& dir, const std::vector<std::string>& argv,
                          const CommandLine& line, int world) {
  const runtime::AutotuningConfig& a = in.autotuning;
  runtime::writeTextAtomically(dir + "/ds_config.json", fileText(config));
  runtime::writeTextAtomically(dir + "/cmd.txt", shellLine(argv) + "\n");
  const Json exp = {{"name", r.name},
                    {"ds_config", config},
                    {"num_gpus", world},
                    {"hostfile", line.flags.hostfile},
                    {"choice", r.choice.describe()}};
  runtime::writeTextAtomically(dir + "/exp.json", exp.dump(2) + "\n");
  runtime::writeTextAtomically(a.expsDir + "/" + r.name + ".json", exp.dump(2) + "\n");
}

// Runs (or, without overwrite, reuses) one experiment and fills its record.
void runOne(ExperimentRecord& r, const TuningInput& in, const CommandLine& line,
            std::chrono::seconds timeout, int world) {
  const runtime::AutotuningConfig& a = in.autotuning;
  const std::string dir = fs::absolute(a.resultsDir + "/" + r.name).string();
  const std::string metricPath = dir + "/metrics.json";
  const Json config = experimentConfigOf(in, r.choice, metricPath);
  std::vector<std::string> argv = {siblingExecutable("ds-launch")};
  for (const std::string& f : experimentFlags(line.flagArgs)) argv.push_back(f);
  argv.insert(argv.end(), {"--master_port", "0", "--log_dir", dir + "/logs"});
  for (const std::string& arg :
       jobArgsWith(line.jobArgs, in.builtIn, dir + "/ds_config.json", config, a))
    argv.push_back(arg);
  r.ran = true;
  ExperimentOutcome outcome;
  const std::string previous = dir + "/ds_config.json";
  if (!a.overwrite && fs::exists(metricPath) && fs::exists(previous) &&
      readWholeFile(previous, "config", size_t{16} << 20) == fileText(config)) {
    outcome.status = ExperimentStatus::Ok;
    outcome.metrics = nlohmann::json::parse(readWholeFile(metricPath, "metrics", 1 << 20));
    r.reused = true;
  } else {
    fs::create_directories(dir);
    writeExperimentFiles(r, in, config, dir, argv, line, world);
    outcome = runExperiment({argv, dir, metricPath, timeout}, interrupted);
    r.wallSeconds = outcome.wallSeconds;
  }
  r.status = outcome.status;
  r.why = outcome.why;
  if (outcome.status != ExperimentStatus::Ok) return;
  const nlohmann::json& m = *outcome.metrics;
  r.metric = metricOf(m, a.metric);
  if (!r.metric) {
    r.status = ExperimentStatus::Failed;
    r.why = metricPath + " has no \"" + runtime::tuningMetricName(a.metric) + "\" value";
    return;
  }
  if (m.contains("step_seconds") && m["step_seconds"].is_number())
    r.stepSeconds = m["step_seconds"].get<double>();
  else if (m.contains("latency") && m["latency"].is_number())
    r.stepSeconds = m["latency"].get<double>() / 1e6;
  if (m.contains("peak_rss_bytes") && m["peak_rss_bytes"].is_number())
    r.measuredPeakBytes = m["peak_rss_bytes"].get<double>();
}

// The tuner's own memory check before each start, on top of the launcher's pre-flight (which
// planTuning ran): the prediction times a headroom, against this machine's budget for each of
// its ranks. The headroom starts wide (the prediction is checked within 10% at small sizes, but
// measured up to a third below the peak with four ranks and larger micro-batches) and narrows to
// 10% above the worst ratio of measured to predicted peak once experiments report theirs.
class MemoryGuard {
 public:
  MemoryGuard(bool thisMachine, int ranksHere)
      : perRank_(thisMachine
                     ? static_cast<double>(memoryBudget().availableBytes) / std::max(1, ranksHere)
                     : 0) {}
  // "" when the candidate may start, else why not.
  std::string check(const ExperimentRecord& r) const {
    if (perRank_ <= 0 || !r.predictedPeakBytes) return "";
    const double need = *r.predictedPeakBytes * headroom_;
    if (need <= perRank_) return "";
    char text[200];
    std::snprintf(text, sizeof text,
                  "memory: predicted %.0f MiB a rank x headroom %.2f is more than the %.0f MiB "
                  "each rank has here",
                  *r.predictedPeakBytes / 1048576, headroom_, perRank_ / 1048576);
    return text;
  }
  void observe(const ExperimentRecord& r) {
    if (!r.predictedPeakBytes || !r.measuredPeakBytes || *r.predictedPeakBytes <= 0) return;
    worst_ = std::max(worst_, *r.measuredPeakBytes / *r.predictedPeakBytes);
    headroom_ = std::max(1.1, 1.1 * worst_);
  }

 private:
  double perRank_;
  double headroom_ = 1.5;
  double worst_ = 0;
};

void printProgress(const ExperimentRecord& r, int n, size_t of, runtime::TuningMetric metric) {
  if (r.status != ExperimentStatus::Ok) {
    std::printf("autotuning: [%d/%zu] %s: %s (%s)\n", n, of, r.name.c_str(),
                experimentStatusName(r.status), r.why.c_str());
  } else {
    std::printf("autotuning: [%d/%zu] %s: %.4g %s (predicted %.4g)%s, %.1f s\n", n, of,
                r.name.c_str(), *r.metric, metricUnit(metric), r.predictedMetric.value_or(0),
                r.reused ? ", reused" : "", r.wallSeconds);
  }
  std::fflush(stdout);
}

// The winner's config and command, as the user trains with them.
std::string writeWinner(const ExperimentRecord& best, const TuningInput& in,
                        const CommandLine& line) {
  const runtime::AutotuningConfig& a = in.autotuning;
  const std::string path = a.resultsDir + "/ds_config_optimal.json";
  const Json tuned = tunedConfig(in.config, best.choice);
  runtime::writeTextAtomically(path, fileText(tuned));
  std::vector<std::string> argv = {"ds-launch"};
  for (const std::string& f : experimentFlags(line.flagArgs)) argv.push_back(f);
  for (const std::string& arg : jobArgsWith(line.jobArgs, in.builtIn, path, tuned, a))
    argv.push_back(arg);
  runtime::writeTextAtomically(a.resultsDir + "/cmd_optimal.txt", shellLine(argv) + "\n");
  return path;
}

}  // namespace

int runAutotuning(CommandLine& line) {
  const JobSpec job = parseJobArgs(line.jobArgs);
  const TuningInput in = readTuningInput(line, job);
  const runtime::AutotuningConfig& a = in.autotuning;
  const auto started = std::chrono::steady_clock::now();
  if (!line.flags.dryRun) prepareDirectories(a);
  TuningPlan plan = planTuning(line, in);
  TunerSettings settings;
  settings.type = a.tunerType;
  settings.metric = a.metric;
  settings.earlyStopping = a.tunerEarlyStopping;
  settings.numTrials = a.tunerNumTrials;
  Tuner tuner(plan.candidates, settings);
  if (line.flags.dryRun) return printDryRun(plan, tuner, in);
  if (plan.runnable.empty()) {
    std::string why = "no candidate of the space";
    for (const ExperimentRecord& r : plan.records)
      if (!r.pruned.empty()) {
        why = r.pruned;
        break;
      }
    throw Error(
        "autotuning: nothing to try: every candidate is refused before it runs; the "
        "first: " +
        why);
  }

  std::printf(
      "autotuning: %zu candidates for %d ranks, %zu to try (tuner %s, metric %s); results "
      "in %s\n",
      plan.records.size(), plan.world, plan.runnable.size(), runtime::tunerTypeName(a.tunerType),
      runtime::tuningMetricName(a.metric), a.resultsDir.c_str());
  std::fflush(stdout);
  interrupted = false;
  struct sigaction action {
  }, oldInt{}, oldTerm{};
  action.sa_handler = onSignal;
  sigaction(SIGINT, &action, &oldInt);
  sigaction(SIGTERM, &action, &oldTerm);
  std::vector<size_t> runOrder;
  MemoryGuard guard(plan.thisMachine, plan.world);
  while (!interrupted) {
    const std::optional<size_t> next = tuner.next();
    if (!next) break;
    ExperimentRecord& r = plan.records[plan.runnable[*next]];
    if (std::string why = guard.check(r); !why.empty()) {
      r.pruned = why;
      r.prunedBy = "the tuner's memory guard";
      tuner.skip(*next);
      continue;
    }
    r.predictedMetric = tuner.predictedMetric(*next);
    runOne(r, in, line, std::chrono::seconds(line.flags.autotuningTimeout), plan.world);
    if (r.status == ExperimentStatus::Interrupted) break;
    runOrder.push_back(plan.runnable[*next]);
    guard.observe(r);
    printProgress(r, static_cast<int>(runOrder.size()), plan.runnable.size(), a.metric);
    tuner.record(*next, r.status == ExperimentStatus::Ok ? r.metric : std::nullopt,
                 r.stepSeconds > 0 ? std::optional<double>(r.stepSeconds) : std::nullopt);
  }
  sigaction(SIGINT, &oldInt, nullptr);
  sigaction(SIGTERM, &oldTerm, nullptr);

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::optional<size_t> best =
      tuner.best() ? std::optional<size_t>(plan.runnable[*tuner.best()]) : std::nullopt;
  const auto setAside = std::count_if(plan.records.begin(), plan.records.end(),
                                      [](const ExperimentRecord& r) { return !r.pruned.empty(); });
  char outcome[512];
  std::snprintf(outcome, sizeof outcome,
                "Tuning %s in %.1f s: %zu experiment(s) of %zu candidates (%zu set aside before "
                "running); %s.",
                interrupted ? "interrupted" : "completed", seconds, runOrder.size(),
                plan.records.size(), static_cast<size_t>(setAside),
                interrupted ? "rerun with \"overwrite\": false in the autotuning block to reuse "
                              "the finished experiments"
                            : tuner.stopReason().c_str());
  writeTuningSummary(a.resultsDir, plan.records, runOrder, a.metric, best, outcome);
  std::printf("%s%s\n", formatTuningTable(plan.records, runOrder, a.metric, best).c_str(), outcome);
  if (interrupted) return 130;
  if (!best) {
    std::printf("autotuning: no experiment succeeded; see %s/*/stderr.log\n", a.resultsDir.c_str());
    return 1;
  }
  const ExperimentRecord& winner = plan.records[*best];
  const std::string path = writeWinner(winner, in, line);
  std::printf(
      "autotuning: best %s (%s): %.4g %s; its config: %s; its command: %s/cmd_optimal.txt\n",
      winner.name.c_str(), winner.choice.describe().c_str(), *winner.metric, metricUnit(a.metric),
      path.c_str(), a.resultsDir.c_str());
  std::fflush(stdout);
  if (line.flags.autotuning != "run") return 0;

  CommandLine final = line;
  final.flags.autotuning.clear();
  final.jobArgs =
      jobArgsWith(line.jobArgs, in.builtIn, path, tunedConfig(in.config, winner.choice), a);
  std::printf("autotuning run: training with %s\n", path.c_str());
  std::fflush(stdout);
  JobPlan jobPlan = planJob(final);
  return runJob(jobPlan, final);
}

}  // namespace ds::launcher
