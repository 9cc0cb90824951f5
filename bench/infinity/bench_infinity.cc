// bench_infinity: ZeRO-Infinity on one machine. Trains, in this process at world 1, a GPT whose
// model states (bf16 parameters and gradients, fp32 master, Adam's moments) are at least
// --ram-factor x the machine's physical RAM, with ZeRO 3 and both offload_param and
// offload_optimizer on NVMe under --dir; sized from /proc/meminfo and the directory's free space
// (infinity_size.h), and says how. Per training step after the first: the step's time against its
// I/O bound (the bytes both swappers moved in that step at fio's read and write bandwidth on the
// same directory, measured in the same run), and at the end the process's peak RSS against
// estimateRankPeakMemory's prediction (what `ds-config memory` prints) for the same config.
// Usage: bench_infinity [--dir DIR] [--params N] [--hidden N] [--layers N] [--seq N] [--steps N]
//                       [--ram-factor X] [--json]
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/bench_training.h"
#include "bench/fio_baseline.h"
#include "bench/infinity/infinity_size.h"
#include "common/guarded_main.h"
#include "common/json_line.h"
#include "common/memory_budget.h"
#include "common/process_memory.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/config/rank_peak_memory.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"

namespace {

using Clock = std::chrono::steady_clock;
using ds::humanBytes;

struct Options {
  std::string dir = std::filesystem::temp_directory_path().string();
  double params = 0;  // 0: sized from the RAM
  int hidden = 0, layers = 0, seq = 128, steps = 3;
  double ramFactor = 1.5;
  double lr = 0;  // 0: kLrTimesHidden / hidden
  bool json = false;
};

constexpr uint64_t kSeed = 1234;
// Adam moves every weight by about lr in its first steps, coherently over a batch that repeats,
// so a layer's output moves by about lr x its width: the default scales lr down with the width,
// falling steadily over a few steps from 21M (hidden 384) to 2B (hidden 3584) parameters where a
// fixed 1e-4 overshoots already at hidden 384 by the fourth step.
constexpr double kLrTimesHidden = 1e-2;

// The model's zero_optimization: ZeRO 3, both offloads to NVMe under `dir`. offload_param's
// buffers must hold the largest layer (DeepSpeed's buffer_size rule, which the engine enforces);
// sub-groups and reduce buckets are as small as the largest tensor and layer allow, so that the
// resident slots and staging stay a small part of the RAM the model states exceed.
std::string configJson(const std::string& dir, double lr, double subGroup, double largestLayer) {
  const auto count = [](double v) { return std::to_string(static_cast<long long>(std::ceil(v))); };
  return R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
    "wall_clock_breakdown": true, "bf16": {"enabled": true},
    "optimizer": {"type": "AdamW", "params": {"lr": )" +
         ds::JsonLine(lr).dump() + R"(, "weight_decay": 0.0}},
    "zero_optimization": {"stage": 3, "overlap_comm": true, "sub_group_size": )" +
         count(subGroup) + R"(, "reduce_bucket_size": )" + count(largestLayer) + R"(,
      "offload_param": {"device": "nvme", "nvme_path": ")" +
         dir + R"(", "max_in_cpu": 0, "buffer_size": )" + count(largestLayer) + R"(},
      "offload_optimizer": {"device": "nvme", "nvme_path": ")" +
         dir + R"("}}})";
}

// A fixed, learnable sequence: a sentence repeated, each position's target its next byte.
ds::runtime::Batch patternBatch(int seq) {
  static const std::string kPattern = "ZeRO-Infinity trains past the memory it runs in. ";
  ds::runtime::Batch batch;
  batch.size = 1;
  for (int i = 0; i < seq; ++i) {
    batch.inputIds.push_back(static_cast<unsigned char>(kPattern[i % kPattern.size()]));
    batch.targetIds.push_back(static_cast<unsigned char>(kPattern[(i + 1) % kPattern.size()]));
  }
  return batch;
}

struct StepRecord {
  double seconds = 0, loss = 0;
  ds::runtime::StepTimes parts;
  double readBytes = 0, writtenBytes = 0;  // both swap files, this step
  // VmHWM after the forward and backward pass and after the update: which phase set the peak.
  double peakAfterBackward = 0, peakAfterUpdate = 0;
};

double peakRss() { return static_cast<double>(ds::processMemory().peakRssBytes); }

struct Fio {
  double readGBps = 0, writeGBps = 0;
  bool measured() const { return readGBps > 0 && writeGBps > 0; }
  double seconds(const StepRecord& s) const {
    return (s.readBytes / readGBps + s.writtenBytes / writeGBps) / 1e9;
  }
};

Fio measureFio(const std::string& dir, double swapBytes) {
  const size_t probe = static_cast<size_t>(
      std::min(std::max(swapBytes, double(size_t{1} << 28)), double(size_t{1} << 30)));
  const std::string file = dir + "/bench-infinity-fio-" + std::to_string(getpid());
  Fio fio;
  fio.writeGBps = ds::fioBandwidthGBps(file, true, 1 << 20, 8, probe);
  fio.readGBps = ds::fioBandwidthGBps(file, false, 1 << 20, 8, probe);
  std::filesystem::remove(file);
  return fio;
}

std::vector<StepRecord> train(ds::runtime::Engine& engine, ds::runtime::Communicator& comm,
                              const ds::runtime::Batch& batch, int steps) {
  std::vector<StepRecord> records;
  ds::runtime::Engine::SwapTraffic optimizerBefore;
  ds::runtime::ZeroStage::OffloadStats paramsBefore;
  StepRecord r;
  ds::bench::StepProbe probe;
  probe.beforeStep = [&](int64_t) {
    optimizerBefore = engine.optimizerSwapTraffic();
    paramsBefore = engine.parameterOffloadStats();
    r = StepRecord{};
  };
  probe.afterBackward = [&](int64_t) { r.peakAfterBackward = peakRss(); };
  probe.afterStep = [&](const ds::bench::StepTiming& step) {
    r.peakAfterUpdate = peakRss();
    r.loss = step.loss;
    r.seconds = step.seconds;
    r.parts = engine.lastStepTimes();
    const auto optimizerAfter = engine.optimizerSwapTraffic();
    const auto paramsAfter = engine.parameterOffloadStats();
    r.readBytes = double(optimizerAfter.read - optimizerBefore.read) +
                  double(paramsAfter.bytesRead - paramsBefore.bytesRead);
    r.writtenBytes = double(optimizerAfter.written - optimizerBefore.written) +
                     double(paramsAfter.bytesWritten - paramsBefore.bytesWritten);
    records.push_back(r);
  };
  ds::bench::trainSteps(engine, comm, batch, steps, probe);
  return records;
}

// What the bench sized and why, before anything is built.
struct Setup {
  ds::bench::MachineRoom room;
  ds::bench::BytesPerParameter perParam;
  ds::runtime::GptConfig gpt;
  ds::runtime::ModelShape shape;
  double lr = 0;
};

Setup sizeModel(const Options& o) {
  using namespace ds::runtime;
  Setup s;
  s.room = ds::bench::machineRoom(o.dir);
  s.perParam = ds::bench::bytesPerParameter(
      parseDeepSpeedConfig(configJson(o.dir, o.lr, 1, 1), 1, "bench_infinity"));
  const bool sized = o.params <= 0;
  const double target =
      sized ? o.ramFactor * s.room.ramBytes / s.perParam.modelStates : o.params;
  s.gpt = ds::bench::chooseGptShape(target, o.hidden, o.layers, o.seq);
  s.shape = gptModelShape(s.gpt, 1);
  ds::bench::checkDiskRoom(s.shape.parameters * s.perParam.swapFiles, s.room, o.dir);
  s.lr = o.lr > 0 ? o.lr : kLrTimesHidden / s.gpt.hiddenSize;

  std::printf("bench_infinity: RAM %s (MemTotal), %s free in %s\n",
              humanBytes(s.room.ramBytes).c_str(), humanBytes(s.room.freeDiskBytes).c_str(),
              o.dir.c_str());
  if (o.hidden > 0 && o.layers > 0)
    std::printf("  shape given by --hidden and --layers\n");
  else if (sized)
    std::printf(
        "  sized: model states %.0f B/parameter x params >= %.2f x RAM: >= %.3gM parameters\n",
        s.perParam.modelStates, o.ramFactor, target / 1e6);
  else
    std::printf("  sized by --params: %.3gM parameters\n", target / 1e6);
  const double params = s.shape.parameters;
  std::printf(
      "  GPT %d layers, hidden %d, %d heads, seq %d, micro-batch 1, vocab %d (ByteTokenizer's, "
      "padded to %d): %.4gM parameters\n  model states %s = %.2f x RAM; swap files %.0f "
      "B/parameter "
      "= %s (up to 90%% of the free disk)\n  ZeRO 3 bf16 AdamW (lr %.3g), offload_param + "
      "offload_optimizer "
      "nvme, sub_group_size %.0f, buffer_size %.0f\n",
      s.gpt.numLayers, s.gpt.hiddenSize, s.gpt.numAttentionHeads, s.gpt.seqLength,
      s.gpt.vocabSize, s.gpt.paddedVocabSize(), params / 1e6,
      humanBytes(params * s.perParam.modelStates).c_str(),
      params * s.perParam.modelStates / s.room.ramBytes, s.perParam.swapFiles,
      humanBytes(params * s.perParam.swapFiles).c_str(), s.lr, s.shape.largestTensor,
      s.shape.largestLayer);
  std::fflush(stdout);
  return s;
}

// The steps' table; returns the mean step time and I/O bound of steps 2.. (the first warms up).
std::pair<double, double> printSteps(const std::vector<StepRecord>& steps, const Fio& fio) {
  double stepSum = 0, boundSum = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& s = steps[i];
    const double bound = fio.measured() ? fio.seconds(s) : 0.0;
    if (i > 0) stepSum += s.seconds, boundSum += bound;
    std::printf("%5zu %8.4f %8.2f %7.2f %7.2f %7.2f %8.2f %8.2f %9.2f %7.2f %7.0f/%-4.0f MiB\n",
                i + 1, s.loss, s.seconds, s.parts.forwardMs / 1e3, s.parts.backwardMs / 1e3,
                s.parts.stepMs / 1e3, s.readBytes / 1e9, s.writtenBytes / 1e9, bound,
                bound > 0 ? s.seconds / bound : 0.0, s.peakAfterBackward / 1048576,
                s.peakAfterUpdate / 1048576);
  }
  const double timed = static_cast<double>(steps.size() - 1);
  const double stepMean = stepSum / timed, boundMean = boundSum / timed;
  if (fio.measured())
    std::printf("  steps 2..%zu, mean: %.2f s per step, I/O bound %.2f s: %.2fx (target <= 1.5x)\n",
                steps.size(), stepMean, boundMean, stepMean / boundMean);
  else
    std::printf("  steps 2..%zu, mean: %.2f s per step\n", steps.size(), stepMean);
  return {stepMean, boundMean};
}

// Peak RSS against ds-config memory's prediction for the same job; returns the two.
std::pair<double, double> printMemoryVerdict(const ds::runtime::DeepSpeedConfig& config,
                                             const ds::runtime::ModelShape& shape) {
  using namespace ds::runtime;
  const double peak = peakRss();
  const RankPeakMemory predicted = estimateRankPeakMemory(config, shape, 1);
  std::printf(
      "  peak RSS %s (VmHWM) vs predicted %s (ds-config memory: %s resident states, %s swap "
      "slots, %s buffers, %s activations; peak in %s): %.3f of the prediction (target within "
      "10%%)\n",
      humanBytes(peak).c_str(), humanBytes(predicted.peak()).c_str(),
      humanBytes(predicted.parameters + predicted.gradients + predicted.masterWeights +
                 predicted.optimizerStates)
          .c_str(),
      humanBytes(predicted.swapSlots).c_str(), humanBytes(predicted.buffers).c_str(),
      humanBytes(predicted.activations).c_str(), predicted.peakPhase().c_str(),
      peak / predicted.peak());
  return {peak, predicted.peak()};
}

int run(const Options& o) {
  using namespace ds::runtime;
  const Setup setup = sizeModel(o);
  const double params = setup.shape.parameters;
  const DeepSpeedConfig config = parseDeepSpeedConfig(
      configJson(o.dir, setup.lr, setup.shape.largestTensor, setup.shape.largestLayer), 1,
      "bench_infinity");
  const Fio fio = measureFio(o.dir, params * setup.perParam.swapFiles);
  if (fio.measured())
    std::printf("  fio on %s: %.2f GB/s read, %.2f GB/s write\n", o.dir.c_str(), fio.readGBps,
                fio.writeGBps);
  else
    std::printf("  fio failed or is missing: no I/O bound\n");

  Gpt model(setup.gpt);
  auto group = ShmCommunicator::inProcessGroup(1);
  const auto built = Clock::now();
  Engine engine(model, config, group[0], kSeed);
  std::printf(
      "  engine built in %.1f s (peak RSS %s): swap files %s (parameters) + %s (optimizer)\n",
      std::chrono::duration<double>(Clock::now() - built).count(), humanBytes(peakRss()).c_str(),
      humanBytes(double(engine.parameterSwapBytes())).c_str(),
      humanBytes(double(engine.optimizerSwapBytes())).c_str());
  std::printf("%5s %8s %8s %7s %7s %7s %8s %8s %9s %7s %16s\n", "step", "loss", "time s", "fwd s",
              "bwd s", "upd s", "read GB", "write GB", "I/O bnd s", "x bound", "peak RSS fb/upd");
  std::fflush(stdout);
  const std::vector<StepRecord> steps = train(engine, group[0], patternBatch(o.seq), o.steps);
  const auto [stepMean, boundMean] = printSteps(steps, fio);
  const auto [peak, predictedPeak] = printMemoryVerdict(config, setup.shape);
  if (o.json) {
    ds::JsonLine line;
    line["params"] = static_cast<int64_t>(params);
    line["model_state_bytes"] = static_cast<int64_t>(params * setup.perParam.modelStates);
    line["ram_bytes"] = static_cast<int64_t>(setup.room.ramBytes);
    line["step_s"] = ds::rounded(stepMean, 3);
    line["io_bound_s"] = fio.measured() ? ds::JsonLine(ds::rounded(boundMean, 3)) : ds::JsonLine();
    line["peak_rss_bytes"] = static_cast<int64_t>(peak);
    line["predicted_rss_bytes"] = std::llround(predictedPeak);
    line["loss_first"] = ds::rounded(steps.front().loss, 4);
    line["loss_last"] = ds::rounded(steps.back().loss, 4);
    ds::printJsonLine(line);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_infinity", [&] {
    Options o;
    CLI::App app{
        "bench_infinity: a GPT whose model states exceed the RAM, trained with ZeRO 3 and "
        "both offloads on NVMe: step time against its I/O bound, peak RSS against the "
        "prediction"};
    ds::bench::showDefaults(app);
    app.add_option("--dir", o.dir, "directory for the swap files (and fio's probe)");
    app.add_option("--params", o.params, "parameters to aim at (0: --ram-factor x RAM in states)")
        ->check(CLI::Range(0.0, 1e13));
    app.add_option("--hidden", o.hidden, "hidden size (0: chosen from the parameter count)")
        ->check(CLI::Range(0, 65536));
    app.add_option("--layers", o.layers, "transformer blocks (0: as the parameter count needs)")
        ->check(CLI::Range(0, 4096));
    app.add_option("--seq", o.seq, "sequence length")->check(CLI::Range(1, 65536));
    app.add_option("--steps", o.steps, "training steps (timed: the 2nd to the last)")
        ->check(CLI::Range(2, 1000));
    app.add_option("--ram-factor", o.ramFactor, "model states at least this x MemTotal")
        ->check(CLI::Range(0.01, 1000.0));
    app.add_option("--lr", o.lr, "AdamW's learning rate (0: 0.01 / hidden)")
        ->check(CLI::Range(0.0, 1.0));
    app.add_flag("--json", o.json, "end with one JSON line of the figures");
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(o);
  });
}
