// Running a user's program as one rank, with DeepSpeed launch.py's per-rank contract: RANK,
// LOCAL_RANK, WORLD_SIZE, LOCAL_SIZE, CROSS_RANK, CROSS_SIZE, MASTER_ADDR, MASTER_PORT,
// CUDA_VISIBLE_DEVICES (the node's slots) and `--local_rank=N` unless --no_local_rank.
#pragma once

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "worker/coordinator_client.h"

namespace ds::worker {

// argv for the program: `python -u [-m] PROGRAM [--local_rank=N] ARGS` for Python programs
// (--module, or a PROGRAM ending in .py, or any PROGRAM that is not an executable file or on
// PATH), PROGRAM as is with --no_python or for other executables. jobArgs[0] is PROGRAM.
std::vector<std::string> programArgv(const JoinResult& join);

// The variables added to the worker's environment for the program.
std::vector<std::pair<std::string, std::string>> programEnvironment(const JoinResult& join,
                                                                    const std::string& masterAddr,
                                                                    int masterPort);

// Starts the program (its own process group, SIGKILL if the worker dies), waits for it, stops
// whatever it left running in its process group, and returns
// its exit status: the code, or 128 + signal. The pid is published in `childPid` so an abort can
// stop it. Throws ds::Error when it cannot be started.
int runProgram(const std::vector<std::string>& argv,
               const std::vector<std::pair<std::string, std::string>>& environment,
               std::atomic<int>& childPid);

}  // namespace ds::worker
