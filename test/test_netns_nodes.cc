// Test nodes as network namespaces (test/netns_nodes.h): isolated from the host, links bounded by
// their tbf rate, gone after the test and after a SIGKILLed maker, and a 2-node ds-launch job
// through --launcher netns with each rank inside its node. Where this machine refuses namespaces
// (or the shaping a case needs), the case exits 77 saying why.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <future>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "test/launch_harness.h"
#include "test/netns_nodes.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"
#include "test/skip.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

std::set<std::string> hostLinkNames() {
  std::set<std::string> names;
  const std::string out = runCommand("ip -o link show").output;
  static const std::regex line(R"(^\d+: ([^:@]+)[:@])", std::regex::multiline);
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    names.insert((*it)[1]);
  return names;
}

sockaddr_in socketAddress(const std::string& address, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  return a;
}

struct Transfer {
  double megabitsPerSecond = 0;
  std::chrono::microseconds connectTime{0};  // one round trip
  std::string error;
};

// `bytes` over TCP from node `from` to node `to`, each end a thread inside its node. The rate is
// the receiver's, from its first byte to the sender's close.
Transfer measureTransfer(const NetnsNodes& nodes, int from, int to, size_t bytes) {
  Transfer result;
  std::promise<int> portPromise;
  auto port = portPromise.get_future();
  std::thread receiver([&] {
    try {
      nodes.enterNode(to);
      const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in at = socketAddress(nodes.address(to), 0);
      socklen_t length = sizeof at;
      if (bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
          listen(listener, 1) != 0 ||
          getsockname(listener, reinterpret_cast<sockaddr*>(&at), &length) != 0)
        throw std::runtime_error("listen on " + nodes.address(to) + " failed");
      portPromise.set_value(ntohs(at.sin_port));
      pollfd ready{listener, POLLIN, 0};
      if (poll(&ready, 1, 20000) != 1) throw std::runtime_error("no connection within 20 s");
      const int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      close(listener);
      timeval limit{20, 0};
      setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
      std::vector<char> buffer(1 << 16);
      size_t received = 0;
      std::chrono::steady_clock::time_point first;
      for (ssize_t n; (n = recv(connection, buffer.data(), buffer.size(), 0)) != 0;) {
        if (n < 0) throw std::runtime_error("recv failed or timed out");
        if (received == 0) first = std::chrono::steady_clock::now();
        received += static_cast<size_t>(n);
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - first).count();
      close(connection);
      result.megabitsPerSecond = received * 8 / seconds / 1e6;
      if (received != bytes) throw std::runtime_error("received " + std::to_string(received));
    } catch (const std::exception& e) {
      result.error = e.what();
      try {
        portPromise.set_value(-1);
      } catch (...) {
      }
    }
  });
  std::thread sender([&] {
    try {
      const int p = port.get();
      if (p < 0) return;
      nodes.enterNode(from);
      const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const sockaddr_in peer = socketAddress(nodes.address(to), p);
      const auto start = std::chrono::steady_clock::now();
      if (connect(s, reinterpret_cast<const sockaddr*>(&peer), sizeof peer) != 0)
        throw std::runtime_error("connect to " + nodes.address(to) + " failed");
      result.connectTime = std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - start);
      const std::vector<char> block(1 << 16, 'x');
      for (size_t sent = 0; sent < bytes;) {
        const ssize_t n = send(s, block.data(), std::min(block.size(), bytes - sent), 0);
        if (n <= 0) throw std::runtime_error("send failed");
        sent += static_cast<size_t>(n);
      }
      close(s);
    } catch (const std::exception& e) {
      result.error += std::string(" sender: ") + e.what();
    }
  });
  sender.join();
  receiver.join();
  return result;
}

ino_t namespaceInode(const std::string& path) {
  struct stat s {};
  return stat(path.c_str(), &s) == 0 ? s.st_ino : 0;
}

}  // namespace

TEST_CASE("netns nodes: isolated namespaces with their addresses, removed by the destructor") {
  if (skipUnless(netnsSupport().namespaces.empty(), netnsSupport().namespaces)) return;
  const auto hostLinks = hostLinkNames();
  std::vector<std::string> names;
  {
    NetnsNodes nodes(3);
    REQUIRE(nodes.size() == 3);
    for (int i = 0; i < 3; ++i) {
      names.push_back(nodes.name(i));
      const std::string addresses = runCommand("ip -n " + nodes.name(i) + " -o addr show").output;
      INFO(addresses);
      REQUIRE(addresses.find(" " + nodes.address(i) + "/24 ") != std::string::npos);
      REQUIRE(addresses.find("lo    inet 127.0.0.1/8") != std::string::npos);
      // No way out: the only route is the nodes' own subnet.
      const std::string routes = runCommand("ip -n " + nodes.name(i) + " route").output;
      INFO(routes);
      REQUIRE(routes.find("default") == std::string::npos);
    }
    REQUIRE(nodes.address(0) != nodes.address(1));
    REQUIRE(nodes.hostfile(2) == nodes.address(0) + " slots=2\n" + nodes.address(1) + " slots=2\n" +
                                     nodes.address(2) + " slots=2\n");
    REQUIRE(nodes.launcherMap().find(nodes.address(1) + "=" + nodes.name(1)) != std::string::npos);
    REQUIRE(netnsNamesOf(getpid()).size() == 4);  // three nodes and the bridge's namespace
    REQUIRE(hostLinkNames() == hostLinks);        // nothing was added to the host's namespace
    const auto inside = runCommand([&] {
      std::string line;
      for (const auto& arg : nodes.inNode(2, {"ip", "-o", "-4", "addr", "show", "dev", "eth0"}))
        line += arg + " ";
      return line;
    }());
    REQUIRE(inside.output.find(nodes.address(2)) != std::string::npos);
    const Transfer ping = measureTransfer(nodes, 2, 0, 1 << 20);
    INFO(ping.error);
    REQUIRE(ping.error.empty());
  }
  REQUIRE(netnsNamesOf(getpid()).empty());
}

TEST_CASE("netns nodes: a transfer between two nodes is bounded by the shaped rate") {
  if (skipUnless(netnsSupport().rate.empty(), netnsSupport().rate)) return;
  constexpr size_t kBytes = 12'500'000;  // 1 s at 100 Mbit/s
  NetnsNodes shaped(2, {100'000'000});
  const Transfer limited = measureTransfer(shaped, 0, 1, kBytes);
  INFO(limited.error << " shaped: " << limited.megabitsPerSecond << " Mbit/s");
  REQUIRE(limited.error.empty());
  REQUIRE(limited.megabitsPerSecond < 110);
  REQUIRE(limited.megabitsPerSecond > 30);
  // The same link unshaped is far faster: the bound is the tbf's, not this machine's.
  NetnsNodes free(2);
  const Transfer unlimited = measureTransfer(free, 0, 1, 4 * kBytes);
  INFO(unlimited.error << " unshaped: " << unlimited.megabitsPerSecond << " Mbit/s");
  REQUIRE(unlimited.error.empty());
  REQUIRE(unlimited.megabitsPerSecond > 2 * limited.megabitsPerSecond);
}

TEST_CASE("netns nodes: a netem delay adds to every round trip") {
  if (skipUnless(netnsSupport().delay.empty(), netnsSupport().delay)) return;
  NetnsNodes nodes(2, {0, 20ms});
  const Transfer transfer = measureTransfer(nodes, 0, 1, 1000);
  INFO(transfer.error);
  REQUIRE(transfer.error.empty());
  REQUIRE(transfer.connectTime >= 40ms);  // the SYN and the SYN-ACK each leave a node once
}

TEST_CASE("netns nodes: a SIGKILLed maker's namespaces and the processes in them are gone") {
  if (skipUnless(netnsSupport().namespaces.empty(), netnsSupport().namespaces)) return;
  int report[2];
  REQUIRE(pipe(report) == 0);
  const pid_t maker = fork();
  REQUIRE(maker >= 0);
  if (maker == 0) {
    close(report[0]);
    std::string line;
    std::optional<NetnsNodes> made;  // outlives the try: the parent inspects the nodes
    try {
      const NetnsNodes& nodes =
          made.emplace(2, NetnsShape{netnsSupport().rate.empty() ? 1'000'000'000u : 0u});
      const auto argv = nodes.inNode(1, {"sleep", "600"});
      const pid_t sleeper = fork();
      if (sleeper == 0) {
        std::vector<char*> cargv;
        for (const auto& arg : argv) cargv.push_back(const_cast<char*>(arg.c_str()));
        cargv.push_back(nullptr);
        execvp(cargv[0], cargv.data());
        _exit(127);
      }
      // ip netns exec execs sleep in place: wait until the sleeper is inside node 1.
      const ino_t inode = namespaceInode("/run/netns/" + nodes.name(1));
      waitUntil(10s, [&] {
        return namespaceInode("/proc/" + std::to_string(sleeper) + "/ns/net") == inode;
      });
      line = "ready " + std::to_string(sleeper) + "\n";
    } catch (const std::exception& e) {
      line = std::string("error ") + e.what() + "\n";
    }
    (void)!write(report[1], line.data(), line.size());
    for (;;) pause();
  }
  close(report[1]);
  // A failed REQUIRE below must not leave the maker paused for ever.
  struct KillOnExit {
    pid_t pid;
    ~KillOnExit() {
      if (::kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
    }
  } guard{maker};
  pollfd readable{report[0], POLLIN, 0};
  REQUIRE(poll(&readable, 1, 30000) == 1);
  char buffer[4096];
  const ssize_t n = read(report[0], buffer, sizeof buffer);
  close(report[0]);
  const std::string line(buffer, n > 0 ? static_cast<size_t>(n) : 0);
  INFO(line);
  if (line.rfind("ready ", 0) != 0) FAIL("the maker could not make its nodes");
  const pid_t sleeper = std::stoi(line.substr(6));
  REQUIRE(netnsNamesOf(maker).size() == 3);
  REQUIRE(processExists(sleeper));

  REQUIRE(kill(maker, SIGKILL) == 0);
  REQUIRE(waitpid(maker, nullptr, 0) == maker);
  REQUIRE(waitUntil(5s, [&] { return netnsNamesOf(maker).empty() && !processExists(sleeper); }));
}

TEST_CASE("netns launch: a 2-node job through ds-launch --launcher netns, each rank in its node") {
  if (skipUnless(netnsSupport().namespaces.empty(), netnsSupport().namespaces)) return;
  NetnsShape shape;
  if (netnsSupport().rate.empty())
    shape.rateBitsPerSecond = 1'000'000'000;
  else
    INFO("links left unshaped (the launch does not need shaping): " << netnsSupport().rate);
  NetnsNodes nodes(2, shape);
  const std::string dir = makeScratchDir("netns-launch");
  writeFile(dir + "/hostfile", nodes.hostfile(1));
  writeFile(dir + "/config.json", R"({"train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 2, "steps_per_print": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "zero_optimization": {"stage": 1}})");
  REQUIRE(setenv("DS_NETNS_MAP", nodes.launcherMap().c_str(), 1) == 0);
  // ds-launch runs in node 0, where the coordinator is reachable from every node.
  const auto job = startLaunch(
      dir,
      {"--launcher", "netns", "--hostfile", "hostfile", "--master_port", "0", "--log_dir", "logs",
       "train", "--config", "config.json", "--steps", "40", "--print_param_hash"},
      nodes.inNode(0, {}));
  unsetenv("DS_NETNS_MAP");

  // While it runs, every process of the job is inside one of the nodes, and both nodes have one.
  const std::string coordinator = coordinatorAddressOf(job, 30s);
  INFO(readFile(dir + "/stdout") << readFile(dir + "/stderr"));
  REQUIRE(coordinator.rfind(nodes.address(0) + ":", 0) == 0);
  const ino_t node0 = namespaceInode("/run/netns/" + nodes.name(0)),
              node1 = namespaceInode("/run/netns/" + nodes.name(1));
  std::set<ino_t> seen;
  waitUntil(30s, [&] {
    for (const pid_t pid : processesMentioning(coordinator))
      seen.insert(namespaceInode("/proc/" + std::to_string(pid) + "/ns/net"));
    return seen.size() >= 2;
  });
  seen.erase(0);  // a process that ended between the scan and the stat
  REQUIRE(seen == std::set<ino_t>{node0, node1});

  const auto status = waitExit(job, 180s);
  INFO(readFile(dir + "/stdout") << readFile(dir + "/stderr"));
  REQUIRE(status == 0);
  REQUIRE(readFile(dir + "/stdout").find("2 ranks on 2 nodes (netns)") != std::string::npos);
  static const std::regex hashLine(R"(step (\d+) param_hash ([0-9a-f]+))");
  std::vector<std::vector<std::string>> hashes(2);
  for (int r = 0; r < 2; ++r) {
    const std::string log = readFile(dir + "/logs/rank-" + std::to_string(r) + ".log");
    for (std::sregex_iterator it(log.begin(), log.end(), hashLine), end; it != end; ++it)
      hashes[r].push_back((*it)[2]);
  }
  REQUIRE(hashes[0].size() == 40);
  REQUIRE(hashes[1] == hashes[0]);
  REQUIRE(hashes[0].front() != hashes[0].back());
}

TEST_CASE("netns nodes: leftovers of a dead maker are removed when the next nodes are made") {
  if (skipUnless(netnsSupport().namespaces.empty(), netnsSupport().namespaces)) return;
  const pid_t gone = fork();  // a pid that is surely dead once reaped
  if (gone == 0) _exit(0);
  REQUIRE(waitpid(gone, nullptr, 0) == gone);
  const std::string stale = "dsnet-" + std::to_string(gone) + "-0-n0";
  REQUIRE(runCommand("ip netns add " + stale).status == 0);
  REQUIRE(netnsNamesOf(gone) == std::vector<std::string>{stale});
  NetnsNodes nodes(1);
  REQUIRE(netnsNamesOf(gone).empty());
}
