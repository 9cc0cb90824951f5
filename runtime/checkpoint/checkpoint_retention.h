// keep-last-n-checkpoints: after a checkpoint is published (its directory in place and `latest`
// naming it), delete the oldest complete ones of the directory beyond N. It never touches the one
// `latest` names nor a directory that is not a trainer checkpoint (global_stepN with a manifest).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime {

// Keeps `keep` (>= 1) complete checkpoints in `dir`: the one `latest` names and the others with
// the highest step numbers, and deletes the rest, oldest first. Each is renamed to
// .deleting-global_stepN before it is removed, so a crash never leaves a half-deleted directory
// under a checkpoint's name (a later call removes such leftovers), and the kept ones are never
// touched, so at any moment at least `keep` complete checkpoints exist. Without `latest` nothing
// is deleted. Returns the deleted tags; throws ds::Error naming the path that could not go.
std::vector<std::string> deleteOldCheckpoints(const std::string& dir, int64_t keep);

}  // namespace ds::runtime
