// formatCommsSummary: rows keyed by (op, group, bytes) across ranks.
#include "launcher/comms_summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "common/comm_stat.h"

namespace ds::launcher {
namespace {

std::string humanSize(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t{1} << 20))
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / double(1 << 20));
  else if (bytes >= 1024)
    std::snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  return text;
}

}  // namespace

std::string formatCommsSummary(const std::vector<std::vector<ds::CommStat>>& perRank) {
  struct Row {
    std::vector<std::pair<double, int>> averages;  // (avg seconds, rank)
    uint64_t minCount = UINT64_MAX, maxCount = 0;
    int groupSize = 0;
    CollectiveOp op = CollectiveOp::AllReduce;
  };
  // Each group's row gathers only its members' reports: "data (ranks 0,2)" and "data (ranks
  // 1,3)" stay apart, so a straggler is named within the group it slowed.
  std::map<std::tuple<std::string, std::string, uint64_t>, Row> rows;
  size_t groupWidth = 5;  // strlen("group")
  for (size_t r = 0; r < perRank.size(); ++r)
    for (const auto& stat : perRank[r]) {
      if (stat.count == 0) continue;
      // Keyed by the op's name: the table lists ops alphabetically.
      Row& row = rows[{collectiveOpName(stat.op), stat.group, stat.bytes}];
      row.op = stat.op;
      row.groupSize = std::max(row.groupSize, stat.groupSize);
      groupWidth = std::max(groupWidth, stat.group.size());
      row.averages.emplace_back(stat.totalSeconds / stat.count, static_cast<int>(r));
      row.minCount = std::min(row.minCount, stat.count);
      row.maxCount = std::max(row.maxCount, stat.count);
    }
  if (rows.empty()) return "";
  const int width = static_cast<int>(groupWidth);
  std::string out =
      "communication (comms_logger), per op, group and size; latency = each rank's mean, "
      "across the group's ranks:\n";
  char line[512];  // group names are capped in length by GroupFactory
  std::snprintf(line, sizeof(line), "%-12s %-*s %10s %8s %10s %10s %10s %8s %12s\n", "op", width,
                "group", "size", "count", "min ms", "median ms", "max ms", "slowest", "busbw GB/s");
  out += line;
  for (auto& [key, row] : rows) {
    const auto& [op, group, bytes] = key;
    std::sort(row.averages.begin(), row.averages.end());
    const double median = row.averages[row.averages.size() / 2].first;
    const std::string count = row.minCount == row.maxCount ? std::to_string(row.minCount)
                                                           : std::to_string(row.minCount) + "-" +
                                                                 std::to_string(row.maxCount);
    std::snprintf(line, sizeof(line), "%-12s %-*s %10s %8s %10.3f %10.3f %10.3f %8s %12.3f\n",
                  op.c_str(), width, group.empty() ? "-" : group.c_str(), humanSize(bytes).c_str(),
                  count.c_str(), row.averages.front().first * 1e3, median * 1e3,
                  row.averages.back().first * 1e3,
                  ("rank " + std::to_string(row.averages.back().second)).c_str(),
                  busBandwidthGBps(row.op, bytes, median, row.groupSize));
    out += line;
  }
  return out;
}

}  // namespace ds::launcher
