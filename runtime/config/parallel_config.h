// A GPT job's place on DeepSpeed's pipe x data x model grid as its NeoX config sets it
// (pipe-parallel-size, model-parallel-size, pipe-partition-method), and the data-parallel size the
// batch rules divide by. Building the grid's communicators is runtime/parallel's job.
#pragma once

#include <cstdint>
#include <string>

namespace ds::runtime {

struct ParallelConfig {
  int pipe = 1;   // pipeline stages (NeoX's pipe-parallel-size; its 0 means one stage)
  int model = 1;  // tensor slices (model-parallel-size)
  // DeepSpeed-Ulysses (DeepSpeed's sequence_parallel_size): consecutive ranks that share each
  // sample's positions, each holding the whole model.
  int sequence = 1;
  // DeepSpeed-MoE's ep_size (moe-expert-parallel-size): consecutive data-parallel ranks that
  // split each MoE layer's experts between them.
  int expert = 1;
  std::string partitionMethod = "type:transformer|mlp";  // NeoX's default
  // The ranks that hold one copy of the model between them.
  int replicaRanks() const { return pipe * model; }
  bool gridded() const { return pipe > 1 || model > 1; }
  // The ranks that read one stream of samples between them: one replica's, times the sequence
  // ranks that share each sample.
  int sampleRanks() const { return pipe * model * sequence; }
};

// DeepSpeed's mpu data-parallel size: world / (pipe x model x sequence). A world that is not a
// multiple of that is refused naming the keys and the world sizes that work.
int64_t dataParallelSize(const ParallelConfig& parallel, int64_t worldSize);

// pipe-partition-method as DeepSpeed accepts it: "parameters", "uniform" or "type:REGEX"
// (case-insensitive); throws ds::Error naming the key otherwise.
void checkPartitionMethod(const std::string& method);

}  // namespace ds::runtime
