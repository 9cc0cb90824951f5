// Dry-run formatting. Commands that span nodes (pdsh, mpirun, srun) are listed with host "*".
#include "launcher/dry_run.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/parallel/topology.h"

namespace ds::launcher {

std::vector<std::array<int, 3>> gridCoordinates(const GridShape& grid, int worldSize) {
  std::vector<std::array<int, 3>> out;
  const int replica = grid.pipe * grid.model;
  if (!grid.gridded() || worldSize < replica || worldSize % replica != 0) return out;
  const auto topology =
      runtime::PipeModelDataTopology::forWorld(worldSize, grid.pipe, grid.model);
  for (int rank = 0; rank < worldSize; ++rank)
    out.push_back({topology.getCoord(rank, "pipe"), topology.getCoord(rank, "data"),
                   topology.getCoord(rank, "model")});
  return out;
}

std::vector<std::array<int, 2>> sequenceCoordinates(const GridShape& grid, int worldSize) {
  std::vector<std::array<int, 2>> out;
  const int u = grid.sequence;
  if (u < 2 || grid.gridded() || worldSize % u != 0) return out;
  for (int rank = 0; rank < worldSize; ++rank) out.push_back({rank / u, rank % u});
  return out;
}

std::string formatDryRunText(const DryRun& dryRun) {
  std::ostringstream out;
  for (const auto& notice : dryRun.notices) out << "notice: " << notice << '\n';
  out << "world size " << dryRun.plan.worldSize() << " on " << dryRun.plan.nodes.size()
      << " node(s); backend " << backendName(dryRun.backend) << "; coordinator "
      << dryRun.coordinatorAddress << "\n";
  const auto coords = gridCoordinates(dryRun.grid, dryRun.plan.worldSize());
  if (!coords.empty())
    out << "grid: pipe " << dryRun.grid.pipe << " x data "
        << dryRun.plan.worldSize() / (dryRun.grid.pipe * dryRun.grid.model) << " x model "
        << dryRun.grid.model << " (rank = (pipe x data_size + data) x model_size + model)\n";
  const auto sequence = sequenceCoordinates(dryRun.grid, dryRun.plan.worldSize());
  if (!sequence.empty())
    out << "grid: data " << dryRun.plan.worldSize() / dryRun.grid.sequence << " x sequence "
        << dryRun.grid.sequence
        << " (DeepSpeed-Ulysses: rank = data x sequence_size + sequence)\n";
  out << '\n';
  char line[256];
  std::snprintf(line, sizeof(line), "%-6s %-24s %-6s %-10s %-6s", "rank", "host", "node",
                "local_rank", "slot");
  std::string header = line;
  if (!coords.empty())
    header += " pipe data model";
  else if (!sequence.empty())
    header += " data sequence";
  else
    header.erase(header.find_last_not_of(' ') + 1);
  out << header << '\n';
  for (const auto& rank : dryRun.plan.ranks) {
    std::snprintf(line, sizeof(line), "%-6d %-24s %-6d %-10d %-6d", rank.rank, rank.host.c_str(),
                  rank.nodeRank, rank.localRank, rank.slot);
    std::string text = line;
    if (static_cast<size_t>(rank.rank) < coords.size()) {
      const auto& c = coords[static_cast<size_t>(rank.rank)];
      std::snprintf(line, sizeof(line), " %-4d %-4d %d", c[0], c[1], c[2]);
      text += line;
    } else if (static_cast<size_t>(rank.rank) < sequence.size()) {
      const auto& c = sequence[static_cast<size_t>(rank.rank)];
      std::snprintf(line, sizeof(line), " %-4d %d", c[0], c[1]);
      text += line;
    } else {
      // No trailing blanks when there is no coordinate column.
      text.erase(text.find_last_not_of(' ') + 1);
    }
    out << text << '\n';
  }
  out << "\ncommands (the job token travels in the environment, never on a command line):\n";
  for (const auto& command : dryRun.commands) {
    out << "  [" << (command.host.empty() ? "*" : command.host) << "] ";
    for (const auto& [key, value] : command.env) out << key << '=' << shellQuote(value) << ' ';
    out << shellLine(command.argv) << '\n';
  }
  if (!dryRun.exports.empty()) {
    out << "\nexported to the nodes:\n";
    for (const auto& [key, value] : dryRun.exports)
      out << "  " << key << '=' << shellQuote(value) << '\n';
  }
  if (dryRun.batch)
    out << "\nbatch: train_batch_size " << dryRun.batch->trainBatchSize << " = micro "
        << dryRun.batch->microBatchPerGpu << " x gradient accumulation "
        << dryRun.batch->gradientAccumulationSteps << " x "
        << (coords.empty() && sequence.empty()
                ? std::to_string(dryRun.plan.worldSize()) + " ranks"
                : std::to_string(dryRun.plan.worldSize() /
                                 (dryRun.grid.pipe * dryRun.grid.model * dryRun.grid.sequence)) +
                      " data-parallel replicas")
        << '\n';
  return out.str();
}

std::string formatDryRunJson(const DryRun& dryRun) {
  nlohmann::ordered_json json;
  json["resources"] = nlohmann::ordered_json::array();
  for (const auto& node : dryRun.plan.nodes)
    json["resources"].push_back({{"host", node.host}, {"slots", node.slots}});
  json["world_size"] = dryRun.plan.worldSize();
  const auto coords = gridCoordinates(dryRun.grid, dryRun.plan.worldSize());
  if (!coords.empty())
    json["grid"] = {{"pipe", dryRun.grid.pipe},
                    {"data", dryRun.plan.worldSize() / (dryRun.grid.pipe * dryRun.grid.model)},
                    {"model", dryRun.grid.model}};
  const auto sequence = sequenceCoordinates(dryRun.grid, dryRun.plan.worldSize());
  if (!sequence.empty())
    json["grid"] = {{"data", dryRun.plan.worldSize() / dryRun.grid.sequence},
                    {"sequence", dryRun.grid.sequence}};
  json["ranks"] = nlohmann::ordered_json::array();
  for (const auto& rank : dryRun.plan.ranks) {
    nlohmann::ordered_json entry = {{"rank", rank.rank},
                                    {"host", rank.host},
                                    {"local_rank", rank.localRank},
                                    {"slot", rank.slot},
                                    {"node_rank", rank.nodeRank}};
    if (static_cast<size_t>(rank.rank) < coords.size()) {
      const auto& c = coords[static_cast<size_t>(rank.rank)];
      entry["pipe"] = c[0];
      entry["data"] = c[1];
      entry["model"] = c[2];
    } else if (static_cast<size_t>(rank.rank) < sequence.size()) {
      entry["data"] = sequence[static_cast<size_t>(rank.rank)][0];
      entry["sequence"] = sequence[static_cast<size_t>(rank.rank)][1];
    }
    json["ranks"].push_back(entry);
  }
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
