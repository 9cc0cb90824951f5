// Local processes of ds-launch: started through the project's one spawn helper (common/spawn.h).
#include "launcher/worker_process.h"

#include <signal.h>

#include <filesystem>

#include "common/error.h"
#include "common/spawn.h"

namespace ds::launcher {

SpawnedProcess spawnInOwnGroup(const std::vector<std::string>& argv,
                               const std::vector<std::pair<std::string, std::string>>& env) {
  SpawnOptions options;
  options.argv = argv;
  options.env = env;
  options.captureOutput = true;
  options.label = "ds-launch";
  // SIGTERM, not SIGKILL: a worker stops its program's whole process group before it goes.
  options.parentDeathSignal = SIGTERM;
  const Spawned spawned = spawnProcess(options);
  return {spawned.pid, spawned.outputFd, std::chrono::steady_clock::now()};
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
