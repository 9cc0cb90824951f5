// Starting a child process: the one fork/exec of the project (ds-launch's workers and runners,
// the node agent's workers, a worker's external program). Everything the child needs (argv,
// envp, the resolved executable path) is built before fork; between fork and exec the child makes
// only async-signal-safe calls, since the parent may run other threads (gRPC's, the tagger's)
// that hold locks a forked child would wait on forever.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <string>
#include <utility>
#include <vector>

namespace ds {

struct SpawnOptions {
  std::vector<std::string> argv;                         // argv[0] is looked up on PATH
  std::vector<std::pair<std::string, std::string>> env;  // set on top of this environment
  bool ownProcessGroup = true;      // the child leads a new group: kill(-pid) reaches its children
  int parentDeathSignal = SIGKILL;  // sent to the child when this thread's process dies; 0: none
  bool captureOutput = false;       // stdout+stderr to a pipe (Spawned::outputFd), stdin /dev/null
  // Not with captureOutput: stdout and stderr to these files (created or truncated; "" keeps the
  // parent's), stdin /dev/null.
  std::string stdoutPath, stderrPath;
  std::string label = "ds";         // prefix of the message the child writes if exec fails
};

struct Spawned {
  pid_t pid = -1;     // also the process group id with ownProcessGroup
  int outputFd = -1;  // captureOutput: the pipe's read end, non-blocking, close-on-exec
};

// Throws ds::Error when the pipe or fork fails. An exec failure shows as exit status 127, with
// "LABEL: cannot execute PROGRAM: REASON" on the child's stderr.
Spawned spawnProcess(const SpawnOptions& options);

// Waits for `pid` (retrying on EINTR) and returns its status as a shell would: the exit code, or
// 128 + the signal that killed it.
int waitForExit(pid_t pid);

}  // namespace ds
