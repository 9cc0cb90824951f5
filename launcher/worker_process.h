// Starting one worker process locally: its own process group (so the whole group, including any
// program it supervises, can be stopped without matching names), stdout and stderr on one pipe,
// and a parent-death signal so ds-launch being killed cannot orphan it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace ds::launcher {

struct SpawnedProcess {
  pid_t pid = -1;     // also the process group id
  int outputFd = -1;  // read end of the stdout+stderr pipe, non-blocking
  std::chrono::steady_clock::time_point started;
};

// Starts argv (env added to ds-launch's environment) through ds::spawnProcess: own process group,
// SIGKILL when ds-launch dies, stdout+stderr on one pipe. Throws ds::Error when fork or the pipe
// fails; an exec failure shows up as exit status 127 with the reason on the output pipe.
SpawnedProcess spawnInOwnGroup(const std::vector<std::string>& argv,
                               const std::vector<std::pair<std::string, std::string>>& env);

// SIGKILL to the process group; ignores groups that are already gone.
void killProcessGroup(pid_t pgid);

// Absolute path of a sibling executable of the running binary (ds-worker next to ds-launch).
std::string siblingExecutable(const std::string& name);

}  // namespace ds::launcher
