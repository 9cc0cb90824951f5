// External program start-up: fork + execvp with the rank's environment, PDEATHSIG so the program
// never outlives its worker.
#include "worker/external_program.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "runtime/common/files.h"

namespace ds::worker {
std::vector<std::string> programArgv(const JoinResult& join) {
  const std::vector<std::string>& job = join.jobArgs;
  if (job.empty()) throw Error("no program to run");
  const std::string& program = job[0];
  const bool python = !join.programNoPython && (join.programModule || program.ends_with(".py") ||
                                                !ds::isExecutableOnPath(program));
  std::vector<std::string> argv;
  if (python) {
    argv = {join.python, "-u"};
    if (join.programModule) argv.push_back("-m");
  }
  argv.push_back(program);
  if (!join.programNoLocalRank) argv.push_back("--local_rank=" + std::to_string(join.localRank));
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
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("cannot start the program: fork: ") + std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(137);
    for (const auto& [key, value] : environment) setenv(key.c_str(), value.c_str(), 1);
    std::vector<char*> raw;
    for (const auto& arg : argv) raw.push_back(const_cast<char*>(arg.c_str()));
    raw.push_back(nullptr);
    execvp(raw[0], raw.data());
    std::fprintf(stderr, "ds-worker: cannot run %s: %s\n", raw[0], std::strerror(errno));
    _exit(127);
  }
  childPid = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  childPid = 0;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace ds::worker
