// dataParallelSize and the partition method's spelling; the partition itself is
// runtime/parallel/layer_partition.cc's.
#include "runtime/config/parallel_config.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "common/error.h"

namespace ds::runtime {

int64_t dataParallelSize(const ParallelConfig& parallel, int64_t worldSize) {
  const int64_t replica = parallel.sampleRanks();
  if (worldSize < 1 || worldSize % replica != 0) {
    const std::string keys = parallel.sequence > 1
                                 ? "pipe-parallel-size x model-parallel-size x "
                                   "sequence_parallel_size (" +
                                       std::to_string(parallel.pipe) + " x " +
                                       std::to_string(parallel.model) + " x " +
                                       std::to_string(parallel.sequence)
                                 : "pipe-parallel-size x model-parallel-size (" +
                                       std::to_string(parallel.pipe) + " x " +
                                       std::to_string(parallel.model);
    throw Error("world size " + std::to_string(worldSize) + " is not a multiple of " + keys +
                " = " + std::to_string(replica) + " ranks per stream of samples): run " +
                std::to_string(replica) + ", " + std::to_string(2 * replica) + ", " +
                std::to_string(3 * replica) + "... ranks, or change those keys");
  }
  const int64_t data = worldSize / replica;
  if (data % parallel.expert != 0)
    throw Error("moe-expert-parallel-size " + std::to_string(parallel.expert) +
                ": the data-parallel size " + std::to_string(data) + " (world size " +
                std::to_string(worldSize) +
                ") does not divide by it (each group of that many "
                "consecutive data-parallel ranks splits the experts); run a multiple of " +
                std::to_string(parallel.expert * replica) + " ranks, or use a divisor of " +
                std::to_string(data));
  return data;
}

void checkPartitionMethod(const std::string& method) {
  std::string lower = method;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "parameters" || lower == "uniform") return;
  if (lower.rfind("type:", 0) == 0) {
    const std::string pattern = lower.substr(5, lower.find(':', 5) - 5);
    try {
      std::regex compiled(pattern, std::regex::ECMAScript | std::regex::icase);
      return;
    } catch (const std::regex_error& e) {
      throw Error("pipe-partition-method: \"" + method + "\": the regex after \"type:\" does not "
                  "compile (" + e.what() + ")");
    }
  }
  throw Error("pipe-partition-method: expected \"parameters\", \"uniform\" or \"type:REGEX\", got \"" +
              method + "\"");
}

}  // namespace ds::runtime
