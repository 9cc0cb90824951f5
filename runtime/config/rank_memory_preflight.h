// The launcher's pre-flight for memory: before any rank starts, a GPT job whose predicted peak
// resident memory per rank (rank_peak_memory.h) exceeds this machine's budget shared among the
// ranks it runs here is refused, naming the need, the budget and the first setting that would make
// it fit, tried in this order: offload_optimizer nvme, offload_param nvme, a smaller
// sub_group_size, a smaller buffer_count, more ranks (more nodes). Not here: where the budget
// comes from (common/memory_budget.h).
#pragma once

#include <optional>
#include <string>

#include "common/memory_budget.h"
#include "runtime/config/job_config.h"

namespace ds::runtime {

// Throws ds::Error when the job cannot fit. `world`: the job's ranks; `ranksHere`: how many of
// them share this machine's budget. A DeepSpeed JSON job (no model to size) and a pipeline or
// model-parallel grid (each rank holds a slice the estimate does not model yet) pass unchecked.
void checkRankMemory(const JobConfig& job, int world, int ranksHere, const MemoryBudget& budget,
                     const std::string& configPath);
// The same with the job's tokenizer already loaded (a rank loads it once, for this and to train).
void checkRankMemory(const JobConfig& job, const Tokenizer& tokenizer, int world, int ranksHere,
                     const MemoryBudget& budget, const std::string& configPath);

// The predicted peak resident bytes of one rank (what checkRankMemory holds against the budget);
// nullopt for a job the estimate does not size (see above).
std::optional<double> predictedRankPeak(const JobConfig& job, const Tokenizer& tokenizer,
                                        int world);

}  // namespace ds::runtime
