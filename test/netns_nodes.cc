// NetnsNodes: the namespaces, links and shaping through `ip` and `tc` (run without a shell), the
// reaper that outlives its maker, and the probe of what this machine permits.
#include "test/netns_nodes.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace ds::test {
namespace {

constexpr const char* kPrefix = "dsnet-";
constexpr const char* kNetnsDir = "/run/netns";

struct ToolOutcome {
  int status;
  std::string output;  // stdout and stderr together
};

// dup2 that also works when `fd` already is `target` (e.g. a pipe that got fd 0 because the
// process runs with stdin closed): dup2 would then keep close-on-exec, and exec would close it.
void placeAt(int fd, int target) {
  if (fd == target)
    fcntl(fd, F_SETFD, 0);
  else
    dup2(fd, target);
}

ToolOutcome runTool(const std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  for (const auto& arg : argv) cargv.push_back(const_cast<char*>(arg.c_str()));
  cargv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error("netns: pipe: " + std::string(strerror(errno)));
  const pid_t pid = fork();
  if (pid == 0) {
    placeAt(out[1], STDOUT_FILENO);
    placeAt(out[1], STDERR_FILENO);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    execvp(cargv[0], cargv.data());
    // Only async-signal-safe calls here: the parent may have threads.
    (void)!write(STDERR_FILENO, "cannot run ", 11);
    (void)!write(STDERR_FILENO, cargv[0], strlen(cargv[0]));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  close(out[1]);
  std::string output;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output.append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

std::string commandText(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& arg : argv) text += (text.empty() ? "" : " ") + arg;
  return text;
}

// Runs `argv`; a failure throws with the command and what it printed.
void mustRun(const std::vector<std::string>& argv) {
  ToolOutcome outcome = runTool(argv);
  while (!outcome.output.empty() && std::isspace(static_cast<unsigned char>(outcome.output.back())))
    outcome.output.pop_back();
  if (outcome.status != 0)
    throw std::runtime_error("netns: `" + commandText(argv) + "` failed (status " +
                             std::to_string(outcome.status) + "): " + outcome.output);
}

std::vector<std::string> existingNamespaces() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(kNetnsDir, error))
    names.push_back(entry.path().filename().string());
  return names;
}

// The maker's pid in a name of ours ("dsnet-<pid>-..."), or -1.
pid_t makerOf(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return -1;
  const size_t start = std::strlen(kPrefix), end = name.find('-', start);
  if (end == std::string::npos || end == start) return -1;
  const std::string digits = name.substr(start, end - start);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return -1;
  return static_cast<pid_t>(std::stol(digits));
}

// Kills what still runs inside (a namespace outlives its name while a process is in it), then
// removes the name. Never kills this process.
void removeNamespace(const std::string& name) {
  const ToolOutcome pids = runTool({"ip", "netns", "pids", name});
  size_t start = 0;
  while (start < pids.output.size()) {
    const size_t end = std::min(pids.output.find('\n', start), pids.output.size());
    const std::string word = pids.output.substr(start, end - start);
    start = end + 1;
    if (word.empty() || word.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(word));
    if (pid != getpid()) ::kill(pid, SIGKILL);
  }
  runTool({"ip", "netns", "del", name});
}

// Leftovers of dead makers whose reaper was killed too (e.g. a whole process group SIGKILLed).
void removeStaleNamespaces() {
  for (const auto& name : existingNamespaces()) {
    const pid_t maker = makerOf(name);
    if (maker > 0 && ::kill(maker, 0) != 0 && errno == ESRCH) removeNamespace(name);
  }
}

std::string tbfRate(std::uint64_t bitsPerSecond) { return std::to_string(bitsPerSecond) + "bit"; }

// The bucket holds 5 ms of traffic (at least 16 KiB, above a GSO segment's worth of MTUs): a
// smaller one caps the rate below what was asked, a larger one lets short transfers burst past it.
std::vector<std::string> tbfArgs(std::uint64_t bitsPerSecond) {
  const std::uint64_t burst = std::max<std::uint64_t>(bitsPerSecond / 8 / 200, 16384);
  return {"tbf", "rate", tbfRate(bitsPerSecond), "burst", std::to_string(burst), "latency", "50ms"};
}

std::vector<std::string> joined(std::vector<std::string> head,
                                const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// What a failed `tc qdisc add` means, for a skip message.
std::string qdiscReason(const char* kind, ToolOutcome outcome) {
  while (!outcome.output.empty() && std::isspace(static_cast<unsigned char>(outcome.output.back())))
    outcome.output.pop_back();
  if (outcome.status == 127) return "tc (iproute2) is not installed: " + outcome.output;
  if (outcome.output.find("kind is unknown") != std::string::npos)
    return "the kernel has no sch_" + std::string(kind) + " (tc: " + outcome.output + ")";
  return "tc qdisc " + std::string(kind) + " refused: " + outcome.output;
}

NetnsSupport probeSupport() {
  NetnsSupport support;
  if (runTool({"ip", "-V"}).status != 0) {
    support.namespaces = "ip (iproute2) is not installed (scripts/setup installs it)";
  } else {
    try {
      NetnsNodes probe(1);
      const std::vector<std::string> root = {"tc",  "-n",  probe.name(0), "qdisc",
                                             "add", "dev", "eth0",        "root"};
      const ToolOutcome tbf = runTool(joined(root, tbfArgs(100'000'000)));
      if (tbf.status != 0) support.rate = qdiscReason("tbf", tbf);
      runTool({"tc", "-n", probe.name(0), "qdisc", "del", "dev", "eth0", "root"});
      const ToolOutcome netem = runTool(joined(root, {"netem", "delay", "1ms"}));
      if (netem.status != 0) support.delay = qdiscReason("netem", netem);
    } catch (const std::exception& e) {
      support.namespaces = std::string("network namespaces are not permitted here (") +
                           (geteuid() == 0 ? "" : "not root; ") + e.what() + ")";
    }
  }
  if (!support.namespaces.empty()) support.rate = support.delay = support.namespaces;
  return support;
}

}  // namespace

const NetnsSupport& netnsSupport() {
  static const NetnsSupport support = probeSupport();
  return support;
}

NetnsNodes::NetnsNodes(int count, const NetnsShape& shape) : shape_(shape) {
  if (count < 1 || count > 250)
    throw std::invalid_argument("NetnsNodes: expected 1..250 nodes, got " + std::to_string(count));
  // Checked before anything exists: the probe makes and removes a node set of its own.
  if (shape.delay.count() > 0 && !netnsSupport().delay.empty())
    throw std::runtime_error("NetnsNodes: a delay needs netem: " + netnsSupport().delay);
  if (shape.rateBitsPerSecond > 0 && !netnsSupport().rate.empty())
    throw std::runtime_error("NetnsNodes: a rate needs tbf: " + netnsSupport().rate);
  static std::atomic<int> sequence{0};
  const int seq = sequence++;
  const std::string stem = kPrefix + std::to_string(getpid()) + "-" + std::to_string(seq) + "-";
  // A per-process /24: each set of nodes has its own bridge, so equal subnets would not meet; the
  // distinct ones keep captures and logs of parallel tests telling apart.
  const unsigned key = static_cast<unsigned>(getpid()) * 8u + static_cast<unsigned>(seq);
  const std::string subnet =
      "10." + std::to_string(128 + (key / 256) % 64) + "." + std::to_string(key % 256) + ".";
  for (int i = 0; i < count; ++i) {
    names_.push_back(stem + "n" + std::to_string(i));
    addresses_.push_back(subnet + std::to_string(i + 1));
  }
  bridge_ = stem + "br";
  removeStaleNamespaces();
  startReaper();  // before anything exists, so nothing can outlive this process
  try {
    build();
  } catch (...) {
    remove();
    throw;
  }
}

NetnsNodes::~NetnsNodes() { remove(); }

void NetnsNodes::startReaper() {
  // The reaper waits for EOF on a pipe whose only write end this process holds (close-on-exec,
  // so the programs it starts do not keep it open). It runs a shell, not code of this process:
  // after fork in a threaded process only exec is safe. It ignores the signals a terminal or a
  // supervisor sends to the whole group, in a session of its own.
  static const char* kScript =
      "trap '' INT TERM HUP; parent=$1; shift; read -r line;"
      " for ns in \"$@\"; do"
      "   for p in $(ip netns pids \"$ns\" 2>/dev/null); do"
      "     [ \"$p\" = \"$parent\" ] || kill -9 \"$p\" 2>/dev/null; done;"
      "   ip netns del \"$ns\" 2>/dev/null;"
      " done; exit 0";
  std::vector<std::string> argv = {"/bin/sh", "-c", kScript, "dsnet-reaper",
                                   std::to_string(getpid())};
  argv.insert(argv.end(), names_.begin(), names_.end());
  argv.push_back(bridge_);
  std::vector<char*> cargv;
  for (auto& arg : argv) cargv.push_back(arg.data());
  cargv.push_back(nullptr);
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0)
    throw std::runtime_error("netns: pipe: " + std::string(strerror(errno)));
  reaper_ = fork();
  if (reaper_ < 0) {
    close(ends[0]);
    close(ends[1]);
    throw std::runtime_error("netns: fork: " + std::string(strerror(errno)));
  }
  if (reaper_ == 0) {
    placeAt(ends[0], STDIN_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    setsid();
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  close(ends[0]);
  reaperPipe_ = ends[1];
}

void NetnsNodes::build() {
  mustRun({"ip", "netns", "add", bridge_});
  mustRun({"ip", "-n", bridge_, "link", "add", "br0", "type", "bridge"});
  mustRun({"ip", "-n", bridge_, "link", "set", "br0", "up"});
  for (int i = 0; i < size(); ++i) {
    const std::string& node = names_[i];
    const std::string port = "n" + std::to_string(i);  // the bridge's end of node i's link
    mustRun({"ip", "netns", "add", node});
    mustRun({"ip", "-n", node, "link", "set", "lo", "up"});
    // Both ends are created straight in their namespaces: no interface ever appears in the host's.
    mustRun({"ip", "-n", bridge_, "link", "add", port, "type", "veth", "peer", "name", "eth0",
             "netns", node});
    mustRun({"ip", "-n", bridge_, "link", "set", port, "master", "br0", "up"});
    mustRun({"ip", "-n", node, "addr", "add", addresses_[i] + "/24", "dev", "eth0"});
    mustRun({"ip", "-n", node, "link", "set", "eth0", "up"});

    const std::vector<std::string> nodeRoot = {"tc", "-n", node, "qdisc", "add", "dev", "eth0"};
    if (shape_.delay.count() > 0) {
      // netem's queue must hold a delay's worth of packets at full rate (its default is 1000).
      mustRun(joined(nodeRoot, {"root", "handle", "1:", "netem", "delay",
                                std::to_string(shape_.delay.count()) + "us", "limit", "100000"}));
    }
    if (shape_.rateBitsPerSecond > 0) {
      const std::vector<std::string> where =
          shape_.delay.count() > 0 ? std::vector<std::string>{"parent", "1:1", "handle", "10:"}
                                   : std::vector<std::string>{"root"};
      mustRun(joined(joined(nodeRoot, where), tbfArgs(shape_.rateBitsPerSecond)));
      mustRun(joined({"tc", "-n", bridge_, "qdisc", "add", "dev", port, "root"},
                     tbfArgs(shape_.rateBitsPerSecond)));
    }
  }
}

void NetnsNodes::remove() {
  if (reaperPipe_ >= 0) {
    close(reaperPipe_);
    reaperPipe_ = -1;
  }
  if (reaper_ > 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (waitpid(reaper_, nullptr, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    reaper_ = -1;
  }
  // The reaper did it; this catches a reaper that could not run (no /bin/sh).
  for (const auto& name : netnsNamesOf(getpid()))
    if (name == bridge_ || std::find(names_.begin(), names_.end(), name) != names_.end())
      removeNamespace(name);
}

std::string NetnsNodes::hostfile(int slotsPerNode) const {
  std::string text;
  for (const auto& address : addresses_)
    text += address + " slots=" + std::to_string(slotsPerNode) + "\n";
  return text;
}

std::string NetnsNodes::launcherMap() const {
  std::string map;
  for (int i = 0; i < size(); ++i) map += (i ? "," : "") + addresses_[i] + "=" + names_[i];
  return map;
}

std::vector<std::string> NetnsNodes::inNode(int node, const std::vector<std::string>& argv) const {
  return joined({"ip", "netns", "exec", name(node)}, argv);
}

void NetnsNodes::enterNode(int node) const {
  const std::string path = std::string(kNetnsDir) + "/" + name(node);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("netns: open " + path + ": " + strerror(errno));
  const int result = setns(fd, CLONE_NEWNET);
  const int error = errno;
  close(fd);
  if (result != 0) throw std::runtime_error("netns: setns " + path + ": " + strerror(error));
}

std::vector<std::string> netnsNamesOf(pid_t pid) {
  std::vector<std::string> names;
  for (const auto& name : existingNamespaces())
    if (makerOf(name) == pid) names.push_back(name);
  return names;
}

}  // namespace ds::test
