// Where ds-launch writes when the user names no log directory: a per-user state directory,
// printed at start and in the failure report, never the working directory.
#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>
#include <string>

#include "test/launch_harness.h"

using namespace ds::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST_CASE("logs: default location is per user and outside the working directory") {
  const std::string dir = makeScratchDir("logdir");
  const std::string home = dir + "/home", work = dir + "/work";
  fs::create_directories(home);
  fs::create_directories(work);
  writeFile(work + "/hostfile", "127.0.0.1 slots=2\n");
  const std::string oldHome = std::getenv("HOME") ? std::getenv("HOME") : "";
  setenv("HOME", home.c_str(), 1);
  unsetenv("XDG_STATE_HOME");
  // A failing program, so that the failure report (which must name the directory) is printed.
  auto job =
      startLaunch(work, {"-H", "hostfile", "--master_port", "0", "--no_python", "--no_local_rank",
                         "--", "/bin/sh", "-c", "echo hello from $RANK; exit 3"});
  setenv("HOME", oldHome.c_str(), 1);
  REQUIRE(waitExit(job, 60s) == 3);
  // Only what the test itself put there (plus the harness's captured stdout/stderr).
  for (const auto& entry : fs::directory_iterator(work)) {
    const std::string name = entry.path().filename();
    CHECK((name == "hostfile" || name == "stdout" || name == "stderr"));
  }
  const std::string out = readFile(work + "/stdout"), err = readFile(work + "/stderr");
  std::smatch match;
  REQUIRE(std::regex_search(out, match,
                            std::regex("logs in (" + home + "/\\.local/state/ds-launch/[0-9-]+)")));
  const std::string logs = match[1];
  CHECK(readFile(logs + "/rank-1.log").find("hello from 1") != std::string::npos);
  CHECK(err.find("every rank's output is in " + logs) != std::string::npos);
}

TEST_CASE("logs: XDG_STATE_HOME is honoured, --log_dir still wins") {
  const std::string dir = makeScratchDir("logxdg");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=1\n");
  setenv("XDG_STATE_HOME", (dir + "/state").c_str(), 1);
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--", "/bin/true"});
  REQUIRE(waitExit(job, 60s) == 0);
  auto named = startLaunch(
      dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "mine", "--", "/bin/true"});
  REQUIRE(waitExit(named, 60s) == 0);
  unsetenv("XDG_STATE_HOME");
  CHECK(readFile(dir + "/stdout").find("logs in mine") != std::string::npos);
  CHECK(fs::exists(dir + "/mine/rank-0.log"));
  REQUIRE(fs::exists(dir + "/state/ds-launch"));
  CHECK(std::distance(fs::directory_iterator(dir + "/state/ds-launch"), fs::directory_iterator{}) ==
        1);
}
