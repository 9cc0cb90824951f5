// Local network addresses a rank needs: where its collectives bind, and a free port for an external
// program's MASTER_PORT.
#pragma once

#include <string>

namespace ds::worker {

// The address this rank's collectives bind to: its plan host when that name resolves here, else
// the local address of the route to the coordinator (a node whose name does not resolve to
// itself, e.g. a Slurm node name missing from /etc/hosts).
std::string localBindAddress(const std::string& planHost, const std::string& coordinatorAddress);

// A free TCP port on `host` (bound and released), for the program's MASTER_PORT.
int freePortOn(const std::string& host);

// This machine's own name (gethostname).
std::string machineName();

}  // namespace ds::worker
