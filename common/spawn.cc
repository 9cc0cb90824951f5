// spawnProcess: argv/envp/path prepared in the parent, then fork; the child only calls
// async-signal-safe functions (setpgid, prctl, getppid, dup2, open, sigaction, sigprocmask,
// execve, write, _exit).
#include "common/spawn.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

extern char** environ;

namespace ds {
namespace {

// execvp would search PATH after fork (and may allocate there); do it before.
std::string resolveProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + program;
    struct stat info {};
    if (stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return program;  // execve fails with ENOENT and the child says so
}

void writeText(int fd, const char* text) { (void)!write(fd, text, std::strlen(text)); }

}  // namespace

Spawned spawnProcess(const SpawnOptions& options) {
  if (options.argv.empty()) throw Error("spawn: empty command");
  // Everything the child needs, built before fork: the child may not allocate.
  std::vector<std::string> envStrings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [key, value] : options.env) replaced = replaced || key == name;
    if (!replaced) envStrings.push_back(entry);
  }
  for (const auto& [key, value] : options.env) envStrings.push_back(key + "=" + value);
  std::vector<std::string> args = options.argv;
  const std::string path = resolveProgram(args[0]);
  const std::string failure = options.label + ": cannot execute " + args[0] + ": ";
  std::vector<char*> envp, argv;
  for (auto& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  sigset_t noSignals, allSignals, parentMask;
  sigemptyset(&noSignals);
  sigfillset(&allSignals);

  int fds[2] = {-1, -1};
  if (options.captureOutput && pipe2(fds, O_CLOEXEC) != 0)
    throw Error(std::string("spawn: pipe: ") + std::strerror(errno));
  // Output files, opened here: the child only duplicates them.
  int files[2] = {-1, -1};
  const std::string* paths[2] = {&options.stdoutPath, &options.stderrPath};
  for (int i = 0; i < 2; ++i) {
    if (paths[i]->empty()) continue;
    files[i] = open(paths[i]->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (files[i] < 0) {
      const int error = errno;
      for (int fd : files)
        if (fd >= 0) close(fd);
      throw Error("spawn " + args[0] + ": " + *paths[i] + ": " + std::strerror(error));
    }
  }
  const auto closeFiles = [&] {
    for (int fd : files)
      if (fd >= 0) close(fd);
  };
  const pid_t parent = getpid();
  // Signals stay blocked across fork until the child has reset its handlers: otherwise a signal
  // sent to the new pid at once would run one of the parent's handlers inside the child.
  pthread_sigmask(SIG_SETMASK, &allSignals, &parentMask);
  const pid_t pid = fork();
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &parentMask, nullptr);
  if (pid < 0) {
    const int error = errno;
    if (options.captureOutput) close(fds[0]), close(fds[1]);
    closeFiles();
    throw Error("spawn " + args[0] + ": fork: " + std::strerror(error));
  }
  if (pid == 0) {
    if (options.ownProcessGroup) setpgid(0, 0);
    if (options.parentDeathSignal != 0) {
      prctl(PR_SET_PDEATHSIG, options.parentDeathSignal);
      if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    }
    if (options.captureOutput) {
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      // Never the terminal: ssh and pdsh would read it (and stall on it) otherwise.
      if (const int null = open("/dev/null", O_RDONLY | O_CLOEXEC); null >= 0)
        dup2(null, STDIN_FILENO);
    }
    if (files[0] >= 0 || files[1] >= 0) {
      if (files[0] >= 0) dup2(files[0], STDOUT_FILENO);
      if (files[1] >= 0) dup2(files[1], STDERR_FILENO);
      if (const int null = open("/dev/null", O_RDONLY | O_CLOEXEC); null >= 0)
        dup2(null, STDIN_FILENO);
    }
    // Nothing of the parent's but stdio reaches the program: a descriptor opened by another
    // thread without O_CLOEXEC (the node relay's sockets) would otherwise outlive the parent in
    // it, and keep its socket's name taken.
    close_range(3, ~0U, 0);
    // The parent's handlers must not run in the child before exec (exec resets them anyway);
    // ignored signals stay ignored, as exec keeps them (nohup keeps working).
    struct sigaction defaults {
    }, current{};
    defaults.sa_handler = SIG_DFL;
    for (int signal = 1; signal < NSIG; ++signal)
      if (sigaction(signal, nullptr, &current) == 0 && current.sa_handler != SIG_IGN)
        sigaction(signal, &defaults, nullptr);
    sigprocmask(SIG_SETMASK, &noSignals, nullptr);  // pending signals arrive now, as SIG_DFL
    execve(path.c_str(), argv.data(), envp.data());
    const int error = errno;
    writeText(STDERR_FILENO, failure.c_str());
    // strerrordesc_np: a static table entry (strerror may translate and allocate).
    const char* reason = strerrordesc_np(error);
    writeText(STDERR_FILENO, reason != nullptr ? reason : "unknown error");
    writeText(STDERR_FILENO, "\n");
    _exit(127);
  }
  // Also set from the parent: whichever runs first, the group exists before anyone signals it.
  if (options.ownProcessGroup) setpgid(pid, pid);
  closeFiles();
  Spawned spawned{pid, -1};
  if (options.captureOutput) {
    close(fds[1]);
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    spawned.outputFd = fds[0];
  }
  return spawned;
}

int waitForExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace ds
