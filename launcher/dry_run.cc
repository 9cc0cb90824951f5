// Dry-run formatting. Commands that span nodes (pdsh, mpirun, srun) are listed with host "*".
#include "launcher/dry_run.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace ds::launcher {
namespace {

std::string displayCommand(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv) line += (line.empty() ? "" : " ") + shellQuote(arg);
  return line;
}

}  // namespace

std::string formatDryRunText(const DryRun& dryRun) {
  std::ostringstream out;
  for (const auto& notice : dryRun.notices) out << "notice: " << notice << '\n';
  out << "world size " << dryRun.plan.worldSize() << " on " << dryRun.plan.nodes.size()
      << " node(s); backend " << backendName(dryRun.backend) << "; coordinator "
      << dryRun.coordinatorAddress << "\n\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%-6s %-24s %-6s %-10s %s\n", "rank", "host", "node",
                "local_rank", "slot");
  out << line;
  for (const auto& rank : dryRun.plan.ranks) {
    std::snprintf(line, sizeof(line), "%-6d %-24s %-6d %-10d %d\n", rank.rank, rank.host.c_str(),
                  rank.nodeRank, rank.localRank, rank.slot);
    out << line;
  }
  out << "\ncommands (the job token travels in the environment, never on a command line):\n";
  for (const auto& command : dryRun.commands) {
    out << "  [" << (command.host.empty() ? "*" : command.host) << "] ";
    for (const auto& [key, value] : command.env) out << key << '=' << shellQuote(value) << ' ';
    out << displayCommand(command.argv) << '\n';
  }
  if (!dryRun.exports.empty()) {
    out << "\nexported to the nodes:\n";
    for (const auto& [key, value] : dryRun.exports)
      out << "  " << key << '=' << shellQuote(value) << '\n';
  }
  if (dryRun.batch)
    out << "\nbatch: train_batch_size " << dryRun.batch->trainBatchSize << " = micro "
        << dryRun.batch->microBatchPerGpu << " x gradient accumulation "
        << dryRun.batch->gradientAccumulationSteps << " x " << dryRun.plan.worldSize()
        << " ranks\n";
  return out.str();
}

std::string formatDryRunJson(const DryRun& dryRun) {
  nlohmann::ordered_json json;
  json["resources"] = nlohmann::ordered_json::array();
  for (const auto& node : dryRun.plan.nodes)
    json["resources"].push_back({{"host", node.host}, {"slots", node.slots}});
  json["world_size"] = dryRun.plan.worldSize();
  json["ranks"] = nlohmann::ordered_json::array();
  for (const auto& rank : dryRun.plan.ranks)
    json["ranks"].push_back({{"rank", rank.rank},
                             {"host", rank.host},
                             {"local_rank", rank.localRank},
                             {"slot", rank.slot},
                             {"node_rank", rank.nodeRank}});
  json["backend"] = backendName(dryRun.backend);
  json["coordinator"] = dryRun.coordinatorAddress;
  json["commands"] = nlohmann::ordered_json::array();
  for (const auto& command : dryRun.commands) {
    nlohmann::ordered_json env = nlohmann::ordered_json::object();
    for (const auto& [key, value] : command.env) env[key] = value;
    json["commands"].push_back({{"host", command.host.empty() ? "*" : command.host},
                                {"ranks", command.ranks},
                                {"argv", command.argv},
                                {"env", env}});
  }
  nlohmann::ordered_json exports = nlohmann::ordered_json::object();
  for (const auto& [key, value] : dryRun.exports) exports[key] = value;
  json["exports"] = exports;
  if (dryRun.batch)
    json["batch"] = {{"train_batch_size", dryRun.batch->trainBatchSize},
                     {"train_micro_batch_size_per_gpu", dryRun.batch->microBatchPerGpu},
                     {"gradient_accumulation_steps", dryRun.batch->gradientAccumulationSteps}};
  json["notices"] = dryRun.notices;
  // Program arguments and exported values may hold any bytes: invalid UTF-8 becomes U+FFFD
  // instead of an exception from dump().
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace ds::launcher
