// The communicator over all ranks of a job: shared memory when every rank is on one host, Gloo
// over TCP otherwise. One place for the choice, used by every built-in job.
#pragma once

#include <memory>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/comm/store.h"
#include "worker/coordinator_client.h"

namespace ds::worker {

struct WorldCommunicator {
  std::unique_ptr<runtime::Communicator> comm;
  std::string backend;  // "shared memory" or "gloo (tcp)", for messages
};

// `backend` is the config's comm_backend: auto, shm, hierarchical or gloo. A choice the job's
// layout cannot support (shm across hosts, hierarchical with unequal hosts) is a ds::Error.
WorldCommunicator makeWorldCommunicator(const JoinResult& join, runtime::Store& store,
                                        const std::string& bindAddress,
                                        const std::string& backend = "auto");

}  // namespace ds::worker
