// Where ds-launch writes when the user names no log directory: a per-user state directory,
// printed at start and in the failure report, never the working directory; without a home, a
// private directory under $TMPDIR that nobody else controls; and never through a planted link.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <regex>
#include <string>
#include <vector>

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

namespace {

// Runs ds-launch with HOME and XDG_STATE_HOME unset and TMPDIR=`tmp`, so that the logs take the
// $TMPDIR fallback; the environment is restored before returning.
int launchWithoutHome(const std::string& dir, const std::string& tmp) {
  const std::string oldHome = std::getenv("HOME") ? std::getenv("HOME") : "";
  const char* previous = std::getenv("TMPDIR");
  const std::string oldTmp = previous != nullptr ? previous : "";
  unsetenv("HOME");
  unsetenv("XDG_STATE_HOME");
  setenv("TMPDIR", tmp.c_str(), 1);
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--no_python",
                               "--no_local_rank", "--", "/bin/sh", "-c", "echo hello"});
  setenv("HOME", oldHome.c_str(), 1);
  if (oldTmp.empty())
    unsetenv("TMPDIR");
  else
    setenv("TMPDIR", oldTmp.c_str(), 1);
  return waitExit(job, 60s).value_or(-1);
}

}  // namespace

TEST_CASE("logs: the $TMPDIR fallback must be this user's private directory") {
  const std::string dir = makeScratchDir("logtmp");
  const std::string tmp = dir + "/tmp", victim = dir + "/victim";
  fs::create_directories(tmp);
  fs::create_directories(victim);
  writeFile(dir + "/hostfile", "127.0.0.1 slots=1\n");
  const std::string base = tmp + "/ds-launch-" + std::to_string(geteuid());
  struct Case {
    const char* name;
    std::function<void()> plant;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"a link", [&] { fs::create_directory_symlink(victim, base); },
       base + ": is a symbolic link"},
      {"writable by others",
       [&] {
         fs::create_directory(base);
         fs::permissions(base, fs::perms::all);
       },
       base + ": may be written by group or others (mode 777)"},
      {"a file", [&] { writeFile(base, ""); }, base + ": is not a directory"},
      {"another user's",
       [&] {
         fs::create_directory(base);
         fs::permissions(base, fs::perms::owner_all);
         if (geteuid() == 0) REQUIRE(chown(base.c_str(), 65534, 65534) == 0);
       },
       geteuid() == 0 ? base + ": belongs to uid 65534" : ""},
  };
  for (const Case& c : cases) {
    if (c.message.empty()) continue;  // chown needs root
    INFO(c.name);
    fs::remove_all(base);
    c.plant();
    CHECK(launchWithoutHome(dir, tmp) == 2);
    const std::string err = readFile(dir + "/stderr");
    INFO(err);
    CHECK(err.find(c.message) != std::string::npos);
    CHECK(err.find("pass --log_dir DIR") != std::string::npos);
    CHECK(fs::is_empty(victim));
    fs::remove_all(base);
  }
  // Missing, it is made private (0700) and used.
  REQUIRE(launchWithoutHome(dir, tmp) == 0);
  struct stat info {};
  REQUIRE(lstat(base.c_str(), &info) == 0);
  CHECK(S_ISDIR(info.st_mode));
  CHECK((info.st_mode & 0777) == 0700);
  std::smatch match;
  const std::string out = readFile(dir + "/stdout");
  REQUIRE(std::regex_search(out, match, std::regex("logs in (" + base + "/[0-9-]+)")));
  CHECK(readFile(std::string(match[1]) + "/rank-0.log") == "hello\n");
}

TEST_CASE("logs: a planted link for rank-N.log is refused, never truncated or written through") {
  const std::string dir = makeScratchDir("loglink");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  writeFile(dir + "/victim", "precious\n");
  fs::create_directories(dir + "/logs");
  for (const char* kind : {"symbolic", "hard"}) {
    INFO(kind);
    fs::remove_all(dir + "/logs/rank-1.log");
    if (std::string(kind) == "symbolic")
      fs::create_symlink(dir + "/victim", dir + "/logs/rank-1.log");
    else
      fs::create_hard_link(dir + "/victim", dir + "/logs/rank-1.log");
    auto job = startLaunch(
        dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs", "--no_python",
              "--no_local_rank", "--", "/bin/sh", "-c", "echo overwritten by $RANK"});
    REQUIRE(waitExit(job, 60s) == 2);
    const std::string err = readFile(dir + "/stderr");
    INFO(err);
    CHECK(err.find("logs/rank-1.log: " + std::string(std::string(kind) == "symbolic"
                                                         ? "is a symbolic link"
                                                         : "has 2 names (a hard link)")) !=
          std::string::npos);
    CHECK(err.find("choose another --log_dir") != std::string::npos);
    CHECK(readFile(dir + "/victim") == "precious\n");
    CHECK(readFile(dir + "/stdout").find("overwritten") == std::string::npos);  // nothing ran
  }
}
