#include "bench/fio_baseline.h"

#include <nlohmann/json.hpp>

#include "common/command_output.h"
#include "common/files.h"

namespace ds {

double fioBandwidthGBps(const std::string& file, bool write, size_t blockBytes, int64_t queueDepth,
                        size_t bytes) {
  if (!isExecutableOnPath("fio")) return 0.0;
  const std::string direction = write ? "write" : "read";
  const std::string cmd = "fio --name=baseline --filename=" + file + " --rw=" + direction +
                          " --bs=" + std::to_string(blockBytes) +
                          " --iodepth=" + std::to_string(queueDepth) +
                          " --ioengine=libaio --direct=1 --size=" + std::to_string(bytes) +
                          " --output-format=json 2>/dev/null";
  const std::optional<std::string> out = commandOutput(cmd);
  if (!out) return 0.0;
  const auto j = nlohmann::json::parse(*out, nullptr, false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty()) return 0.0;
  return j["jobs"][0][direction]["bw_bytes"].get<double>() / 1e9;
}

}  // namespace ds
