// External program start-up through the one spawn helper: the rank's environment, its own process
// group, PDEATHSIG so the program never outlives its worker.
#include "worker/external_program.h"

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/error.h"
#include "common/spawn.h"
#include "common/files.h"

namespace ds::worker {

std::vector<std::string> programArgv(const JoinResult& join) {
  const std::vector<std::string>& job = join.jobArgs;
  if (job.empty()) throw Error("no program to run");
  const std::string& program = job[0];
  const ProgramOptions& options = join.program;
  const bool python = !options.noPython && (options.module || program.ends_with(".py") ||
                                            !ds::isExecutableOnPath(program));
  std::vector<std::string> argv;
  if (python) {
    argv = {options.python, "-u"};
    if (options.module) argv.push_back("-m");
  }
  argv.push_back(program);
  if (!options.noLocalRank) argv.push_back("--local_rank=" + std::to_string(join.localRank));
  argv.insert(argv.end(), job.begin() + 1, job.end());
  return argv;
}

std::vector<std::pair<std::string, std::string>> programEnvironment(const JoinResult& join,
                                                                    const std::string& masterAddr,
                                                                    int masterPort) {
  std::string devices;
  for (int slot : join.nodeSlots) devices += (devices.empty() ? "" : ",") + std::to_string(slot);
  return {{"RANK", std::to_string(join.rank)},
          {"LOCAL_RANK", std::to_string(join.localRank)},
          {"WORLD_SIZE", std::to_string(join.worldSize)},
          {"LOCAL_SIZE", std::to_string(join.localSize)},
          {"CROSS_RANK", std::to_string(join.nodeRank)},
          {"CROSS_SIZE", std::to_string(join.nodeCount)},
          {"MASTER_ADDR", masterAddr},
          {"MASTER_PORT", std::to_string(masterPort)},
          {"CUDA_VISIBLE_DEVICES", devices}};
}

int runProgram(const std::vector<std::string>& argv,
               const std::vector<std::pair<std::string, std::string>>& environment,
               std::atomic<int>& childPid) {
  SpawnOptions options;
  options.argv = argv;
  options.env = environment;
  options.ownProcessGroup = true;  // an abort stops the program's own children too (kill(-pid))
  options.label = "ds-worker";
  const pid_t pid = spawnProcess(options).pid;
  childPid = pid;
  const int status = waitForExit(pid);
  // Children the program left running would outlive the job: its process group goes with it
  // (SIGTERM, a moment to finish, then SIGKILL). kill() fails at once when the group is empty.
  if (kill(-pid, SIGTERM) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(-pid, SIGKILL);
  }
  childPid = 0;
  return status;
}

}  // namespace ds::worker
