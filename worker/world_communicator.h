// The job's communicator factory, from what the coordinator told this rank at join. One place for
// the choice of collectives backend, used by every built-in job.
#pragma once

#include <string>

#include "runtime/comm/group_factory.h"
#include "runtime/comm/store.h"
#include "worker/coordinator_client.h"

namespace ds::worker {

// `backend` is the config's comm_backend (or ds-comm-bench --backend). Store keys are scoped
// by the membership epoch so a re-formed world never meets the old one's keys.
runtime::GroupFactory makeGroupFactory(const JoinResult& join, runtime::Store& store,
                                       const std::string& bindAddress,
                                       ds::CommBackend backend = ds::CommBackend::Auto);

}  // namespace ds::worker
