// External program start-up: fork + execvp with the rank's environment, PDEATHSIG so the program
// never outlives its worker.
#include "worker/external_program.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "runtime/common/error.h"
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

int freePortOn(const std::string& host) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), "0", &hints, &found) != 0 || found == nullptr)
    throw Error("cannot resolve " + host + " to pick the program's MASTER_PORT");
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  if (fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in bound{};
    socklen_t length = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
    port = ntohs(bound.sin_port);
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (port == 0) throw Error("cannot find a free port on " + host + " for MASTER_PORT");
  return port;
}

std::string localBindAddress(const std::string& planHost, const std::string& coordinatorAddress) {
  if (planHost == "localhost") return "127.0.0.1";
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  if (getaddrinfo(planHost.c_str(), nullptr, &hints, &found) == 0) {
    freeaddrinfo(found);
    return planHost;
  }
  // A UDP "connect" sends nothing; it only picks the route and so the local address.
  const std::string host = coordinatorAddress.substr(0, coordinatorAddress.rfind(':'));
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(9);
  if (inet_pton(AF_INET, host.c_str(), &target.sin_addr) != 1)
    throw Error("host " + planHost + " does not resolve here and the coordinator address " + host +
                " is not an IPv4 address: add " + planHost + " to /etc/hosts");
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  const bool ok = fd >= 0 &&
                  connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
  if (fd >= 0) close(fd);
  if (!ok) throw Error("host " + planHost + " does not resolve here and no route to " + host);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return text;
}

}  // namespace ds::worker
