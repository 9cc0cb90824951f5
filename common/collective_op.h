// Which collective a rank is in: the runtime's communicators record it (runtime/comm/
// collective_tracker.h) and the launcher-worker contract carries it, so that ds-launch tells a
// rank waiting for its peers from one that is stuck by itself without reading any text.
#pragma once

#include <optional>
#include <string_view>

namespace ds {

enum class CollectiveOp {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Send,
  Recv,
  Barrier,
  AllToAll
};
inline constexpr int kCollectiveOpCount = 8;

// The comms logger's names: "all_reduce", "all_gather", ...
constexpr const char* collectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::AllReduce:
      return "all_reduce";
    case CollectiveOp::AllGather:
      return "all_gather";
    case CollectiveOp::ReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::Broadcast:
      return "broadcast";
    case CollectiveOp::Send:
      return "send";
    case CollectiveOp::Recv:
      return "recv";
    case CollectiveOp::Barrier:
      return "barrier";
    case CollectiveOp::AllToAll:
      return "all_to_all";
  }
  return "?";
}

// The op a comms logger name stands for (names are the edges: config keys, the wire, output).
constexpr std::optional<CollectiveOp> collectiveOpFromName(std::string_view name) {
  for (int op = 0; op < kCollectiveOpCount; ++op)
    if (name == collectiveOpName(static_cast<CollectiveOp>(op))) return static_cast<CollectiveOp>(op);
  return std::nullopt;
}

}  // namespace ds
