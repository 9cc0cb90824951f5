// spawnInOwnGroup: fork + exec with the child set up before exec; only async-signal-safe calls
// happen between fork and exec.
#include "launcher/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace ds::launcher {

SpawnedProcess spawnInOwnGroup(const SpawnRequest& request) {
  if (request.argv.empty()) throw Error("spawn: empty command");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("spawn: pipe: ") + strerror(errno));

  // Everything the child needs is prepared before fork: the child may not allocate.
  std::vector<std::string> envStrings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(request.extraEnv.begin(), request.extraEnv.end(),
                                      [&](const auto& extra) { return extra.first == name; });
    if (!replaced) envStrings.push_back(entry);
  }
  for (const auto& [name, value] : request.extraEnv) envStrings.push_back(name + "=" + value);
  std::vector<char*> envp, argv;
  for (auto& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = request.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw Error(std::string("spawn: fork: ") + strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the launcher died before prctl took effect
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    // Never the terminal: ssh and pdsh would read it (and stall on it) otherwise.
    if (const int null = open("/dev/null", O_RDONLY); null >= 0) dup2(null, STDIN_FILENO);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execvpe(argv[0], argv.data(), envp.data());  // PATH lookup for ssh, pdsh, mpirun, srun
    const char* reason = strerror(errno);
    (void)!write(STDERR_FILENO, "ds-launch: cannot execute ", 26);
    (void)!write(STDERR_FILENO, argv[0], strlen(argv[0]));
    (void)!write(STDERR_FILENO, ": ", 2);
    (void)!write(STDERR_FILENO, reason, strlen(reason));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  // Also set from the parent: whichever runs first, the group exists before anyone signals it.
  setpgid(pid, pid);
  close(fds[1]);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return {pid, fds[0], std::chrono::steady_clock::now()};
}

void killProcessGroup(pid_t pgid) {
  if (pgid > 0) ::kill(-pgid, SIGKILL);
}

std::string siblingExecutable(const std::string& name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot locate my own executable: " + ec.message());
  const auto sibling = self.parent_path() / name;
  if (!std::filesystem::exists(sibling))
    throw Error(sibling.string() + " not found: ds-launch expects " + name +
                " in its own directory (build both targets)");
  return sibling.string();
}

}  // namespace ds::launcher
