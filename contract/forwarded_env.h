// Exported variables (PYTHONPATH, NCCL_*, .deepspeed_env, ...) travel to ssh and pdsh nodes in
// the environment, never on a command line (where ps shows them): each KEY=VALUE rides in a
// variable LC_DS_EXPORT_<n>, which ssh forwards (SendEnv=LC_DS_*, accepted by sshd's default
// AcceptEnv LC_*), and the node's ds-worker turns them back into KEY=VALUE before anything starts.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ds {

inline constexpr const char* kForwardedExportPrefix = "LC_DS_EXPORT_";
// The ssh option pattern that forwards the job token and the exports.
inline constexpr const char* kForwardedSendEnv = "LC_DS_*";

using VariableList = std::vector<std::pair<std::string, std::string>>;

// {"LC_DS_EXPORT_0", "KEY=VALUE"}, ... in export order.
VariableList forwardedExportVariables(const VariableList& exports);

// Worker side: sets every forwarded KEY=VALUE in this process's environment (in order, so later
// ones win) and removes the LC_DS_EXPORT_<n> carriers. Returns how many were adopted.
int adoptForwardedExports();

}  // namespace ds
