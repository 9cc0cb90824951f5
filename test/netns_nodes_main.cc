// ds-netns-nodes: the test nodes of test/netns_nodes.h for a shell or a bench script. Makes N
// shaped nodes, runs one command inside node 0 with DS_NETNS_MAP and DS_NETNS_HOSTFILE set (so
// `ds-launch --launcher netns -H "$DS_NETNS_HOSTFILE" ...` works there), removes them after.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "test/netns_nodes.h"

int main(int argc, char** argv) {
  CLI::App app{"Runs COMMAND inside node 0 of N network-namespace nodes with shaped links."};
  int count = 2, slots = 1;
  double rateMbit = 0, delayMs = 0;
  std::vector<std::string> command;
  app.add_option("-n,--nodes", count, "how many nodes")->check(CLI::Range(1, 250));
  app.add_option("--rate_mbit", rateMbit, "tbf rate of each node's link, Mbit/s (0: unshaped)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--delay_ms", delayMs, "netem delay on each node's egress, ms (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--slots", slots, "slots per node in DS_NETNS_HOSTFILE")
      ->check(CLI::PositiveNumber);
  app.add_option("command", command, "what to run in node 0 (after --)")->required();
  CLI11_PARSE(app, argc, argv);

  const auto& support = ds::test::netnsSupport();
  for (const auto& [wanted, why] : {std::pair{true, support.namespaces},
                                    {rateMbit > 0, support.rate},
                                    {delayMs > 0, support.delay}})
    if (wanted && !why.empty()) {
      std::cerr << "ds-netns-nodes: " << why << '\n';
      return 77;
    }
  try {
    ds::test::NetnsNodes nodes(count,
                               {static_cast<std::uint64_t>(rateMbit * 1e6),
                                std::chrono::microseconds(static_cast<long>(delayMs * 1000))});
    char hostfile[] = "/tmp/ds-netns-hostfile-XXXXXX";
    const int fd = mkstemp(hostfile);
    if (fd < 0) throw std::runtime_error("cannot make a hostfile in /tmp");
    close(fd);
    std::ofstream(hostfile) << nodes.hostfile(slots);
    setenv("DS_NETNS_MAP", nodes.launcherMap().c_str(), 1);
    setenv("DS_NETNS_HOSTFILE", hostfile, 1);
    for (int i = 0; i < nodes.size(); ++i)
      std::cerr << "ds-netns-nodes: node " << i << " " << nodes.name(i) << " " << nodes.address(i)
                << '\n';

    const auto inside = nodes.inNode(0, command);
    std::vector<char*> cargv;
    for (const auto& arg : inside) cargv.push_back(const_cast<char*>(arg.c_str()));
    cargv.push_back(nullptr);
    // Ctrl-C reaches the command too (same process group): let it wind down, then clean up. Any
    // other death of this process leaves the cleanup to the nodes' reaper.
    signal(SIGINT, SIG_IGN);
    const pid_t child = fork();
    if (child == 0) {
      signal(SIGINT, SIG_DFL);
      execvp(cargv[0], cargv.data());
      _exit(127);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    unlink(hostfile);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } catch (const std::exception& e) {
    std::cerr << "ds-netns-nodes: " << e.what() << '\n';
    return 1;
  }
}
