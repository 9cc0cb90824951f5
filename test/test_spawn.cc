// The one spawn helper: exact environment, captured output, exec failures reported as 127 with the
// reason, its own process group, and the parent-death signal.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "common/error.h"
#include "common/spawn.h"

using namespace std::chrono_literals;

namespace {

// Everything the child wrote to its captured output, until it closes.
std::string drain(int fd) {
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EAGAIN) {
      break;
    } else {
      std::this_thread::sleep_for(5ms);
    }
  }
  close(fd);
  return out;
}

}  // namespace

TEST_CASE("spawn: argv, extra environment and captured output reach the child") {
  ds::SpawnOptions options;
  options.argv = {"sh", "-c", "echo \"$DS_SPAWN_A|$DS_SPAWN_B|$0\"; echo err >&2", "zero"};
  options.env = {{"DS_SPAWN_A", "it's a $value"}, {"DS_SPAWN_B", ""}};
  options.captureOutput = true;
  const ds::Spawned child = ds::spawnProcess(options);
  const std::string out = drain(child.outputFd);
  CHECK(ds::waitForExit(child.pid) == 0);
  CHECK(out == "it's a $value||zero\nerr\n");
}

TEST_CASE("spawn: an exec failure is exit 127 with the program and the reason") {
  ds::SpawnOptions options;
  options.argv = {"/nonexistent/program", "x"};
  options.captureOutput = true;
  options.label = "tester";
  const ds::Spawned child = ds::spawnProcess(options);
  const std::string out = drain(child.outputFd);
  CHECK(ds::waitForExit(child.pid) == 127);
  CHECK(out == "tester: cannot execute /nonexistent/program: No such file or directory\n");
  options.argv = {"no-such-program-on-path"};
  const ds::Spawned missing = ds::spawnProcess(options);
  CHECK_THAT(drain(missing.outputFd), Catch::Contains("cannot execute no-such-program-on-path"));
  CHECK(ds::waitForExit(missing.pid) == 127);
  CHECK_THROWS_AS(ds::spawnProcess(ds::SpawnOptions{}), ds::Error);
}

TEST_CASE("spawn: the child leads its own process group, a signal death is 128 + signal") {
  ds::SpawnOptions options;
  options.argv = {"sleep", "30"};
  const ds::Spawned child = ds::spawnProcess(options);
  CHECK(getpgid(child.pid) == child.pid);
  kill(-child.pid, SIGTERM);
  CHECK(ds::waitForExit(child.pid) == 128 + SIGTERM);
  options.ownProcessGroup = false;
  const ds::Spawned sibling = ds::spawnProcess(options);
  CHECK(getpgid(sibling.pid) == getpgrp());
  kill(sibling.pid, SIGKILL);
  CHECK(ds::waitForExit(sibling.pid) == 128 + SIGKILL);
}

TEST_CASE("spawn: the child gets the parent-death signal when its parent dies") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t middle = fork();
  REQUIRE(middle >= 0);
  if (middle == 0) {  // spawns a long sleep, reports its pid, and dies
    ds::SpawnOptions options;
    options.argv = {"sleep", "30"};
    const pid_t grandchild = ds::spawnProcess(options).pid;
    (void)!write(fds[1], &grandchild, sizeof(grandchild));
    _exit(0);
  }
  close(fds[1]);
  pid_t grandchild = -1;
  REQUIRE(read(fds[0], &grandchild, sizeof(grandchild)) == sizeof(grandchild));
  close(fds[0]);
  waitpid(middle, nullptr, 0);
  // Reparented (to init or a subreaper); gone within moments of SIGKILL.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = kill(grandchild, 0) != 0;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  if (!gone) kill(grandchild, SIGKILL);
  CHECK(gone);
}
