// DeepSpeed's flops profiler for the built-in models: the `flops_profiler` block, the module tree
// a model describes (params, forward MACs, measured forward latency per module) and the report in
// the layout of DeepSpeed's print_model_profile: a summary, the top modules by params, MACs and
// latency at each depth (the aggregated profile), and the detailed module tree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime {

struct FlopsProfilerConfig {
  bool enabled = false;
  int64_t profileStep = 1;  // profiled when the engine has done this many steps
  int64_t moduleDepth = -1;  // -1: every depth
  int64_t topModules = 1;
  bool detailed = true;
  std::string outputFile;  // "" : stdout
};

struct ModuleProfile {
  std::string name;  // "layers.0.attention" (the root: "")
  std::string type;  // "GPT", "TransformerLayer", "Linear", ...
  int depth = 0;
  int parent = -1;
  double params = 0;
  double macs = 0;            // forward, over the profiled micro-batch
  double forwardSeconds = 0;  // measured
};

// The step's figures around the module tree (DeepSpeed's summary lines).
struct ProfileSummary {
  int64_t step = 0;
  int worldSize = 1;
  int64_t batchPerRank = 0;  // samples in the profiled micro-batch
  int64_t trainBatchSize = 0;
  double forwardSeconds = 0, backwardSeconds = 0, stepSeconds = 0;
};

std::string formatFlopsProfile(const std::vector<ModuleProfile>& modules,
                               const ProfileSummary& summary, const FlopsProfilerConfig& config);

// "3.26 M", "1.2 G", as DeepSpeed's number_to_string prints them (2 decimals, K/M/G/T).
std::string withUnit(double value, const std::string& suffix = "");
std::string latencyText(double seconds);  // "76.67 ms", "34.09 us", "1.5 s"

}  // namespace ds::runtime
