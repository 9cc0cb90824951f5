// bench_pipeline's third part: the same GPT job through `ds-launch --launcher netns` on two test
// nodes joined by a tbf-shaped link, once data-parallel (one rank per node) and once as a 2-stage
// pipeline (one stage per node); per-step seconds from the trainer's own iteration lines.
#pragma once

#include <string>
#include <vector>

namespace ds::bench {

struct PairOptions {
  int rateMbit = 100;
  int layers = 8, hidden = 256, seq = 64, micro = 2, microBatches = 4, steps = 3;
  std::string binDir;
};

struct PairJob {
  std::string name;
  int pipe = 1, data = 1;
  std::vector<double> stepSeconds;  // every iteration's, the first (warm-up) included
  double meanSeconds = 0;           // over the iterations after the first
};

struct PairResult {
  std::string skipped;  // why the part could not run; empty when it ran
  std::vector<PairJob> jobs;  // data-parallel first, then the pipeline
};

PairResult runBandwidthPair(const PairOptions& options);

}  // namespace ds::bench
