// The launch harness: fork/exec with file redirection, waitpid polling, /proc scanning.
#include "test/launch_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ds::test {

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

LaunchedJob startLaunch(const std::string& dir, const std::vector<std::string>& args,
                        const std::vector<std::string>& wrapper) {
  std::vector<std::string> argv = wrapper;
  argv.push_back(std::string(DS_BIN_DIR) + "/ds-launch");
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  LaunchedJob job;
  job.dir = dir;
  job.started = std::chrono::steady_clock::now();
  job.pid = fork();
  if (job.pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    if (chdir(dir.c_str()) != 0) _exit(126);
    execvp(cargv[0], cargv.data());
    _exit(127);
  }
  return job;
}

LaunchedJob::~LaunchedJob() {
  if (reaped || pid <= 0) return;
  ::kill(pid, SIGTERM);
  if (!waitExit(*this, std::chrono::seconds(5))) {
    ::kill(pid, SIGKILL);
    waitExit(*this, std::chrono::seconds(5));
  }
}

std::optional<int> waitExit(const LaunchedJob& job, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    if (waitpid(job.pid, &status, WNOHANG) == job.pid) {
      job.reaped = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<WorkerInfo> findWorkers(pid_t parent) {
  std::vector<WorkerInfo> workers;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string statText((std::istreambuf_iterator<char>(stat)), {});
    const auto close = statText.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(statText.substr(close + 2));
    char state;
    pid_t ppid;
    rest >> state >> ppid;
    if (ppid != parent || state == 'Z') continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    std::vector<std::string> args;
    for (std::string arg; std::getline(cmdline, arg, '\0');) args.push_back(arg);
    if (args.empty() || !args[0].ends_with("ds-worker")) continue;
    WorkerInfo info{std::stoi(name), "", -1};
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "--host") info.host = args[i + 1];
      if (args[i] == "--slot") info.slot = std::stoi(args[i + 1]);
    }
    workers.push_back(info);
  }
  return workers;
}

// A zombie counts as gone: it runs nothing and holds nothing; whoever inherited it may be slow to
// reap.
bool processExists(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

bool waitUntil(std::chrono::milliseconds timeout, const std::function<bool()>& predicate) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return predicate();
}

std::vector<pid_t> processesMentioning(const std::string& text) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == getpid()) continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string args((std::istreambuf_iterator<char>(cmdline)), {});
    if (args.find(text) != std::string::npos && processExists(pid)) found.push_back(pid);
  }
  return found;
}

std::string coordinatorAddressOf(const LaunchedJob& job, std::chrono::milliseconds timeout) {
  std::string address;
  waitUntil(timeout, [&] {
    const std::string out = readFile(job.dir + "/stdout");
    const auto at = out.find("coordinator ");
    if (at == std::string::npos) return false;
    const auto end = out.find_first_of(" ,\n", at + 12);
    address = out.substr(at + 12, end - at - 12);
    return true;
  });
  return address;
}

}  // namespace ds::test
