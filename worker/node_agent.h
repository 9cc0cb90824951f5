// Node agent: what ds-worker does when a remote backend (ssh, pdsh, ds-launch --no_ssh) starts it
// once per node with `--world_info B64 --node_rank N`, like DeepSpeed's launch.py: start one
// ds-worker per slot of node N, wait for them, and on the first failure stop the others.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "worker/node_relay.h"

namespace ds::worker {

// `workerArgs` are the flags every per-slot worker gets (coordinator, TLS, --relay ...); `nodeRank`
// may be pdsh's expanded %n. With `relay` (the --relay id and the relay's settings but its
// socket) the agent hosts its node's relay before it starts the workers. Returns the agent's exit status: 0, or the first failing worker's status
// (128 + signal for a signal death). Throws ds::Error for a bad world_info or node rank.
int runNodeAgent(const std::string& workerPath, const std::vector<std::string>& workerArgs,
                 const std::string& worldInfo, int nodeRank, const std::string& relayNonce = "",
                 std::optional<NodeRelayOptions> relay = std::nullopt);

}  // namespace ds::worker
