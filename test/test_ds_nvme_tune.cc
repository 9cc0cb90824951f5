// ds-nvme-tune through the real binary: a small sweep ends with the best read and write figures
// and an `aio` block the config parser takes; bad sweeps and flags exit 2 with the reason; a
// sweep ended by a signal leaves no test file behind.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test/run_command.h"
#include "test/scratch_dir.h"

namespace {

int runTune(const std::string& args, std::string& out) {
  const ds::test::CommandOutcome r =
      ds::test::runCommand(std::string(DS_BIN_DIR) + "/ds-nvme-tune " + args);
  out = r.output;
  return r.status;
}

}  // namespace

TEST_CASE("ds-nvme-tune: a sweep ends with the best settings as an aio block", "[aio]") {
  const std::string dir = ds::test::makeScratchDir("nvme-tune");
  std::ofstream(dir + "/sweep.json")
      << R"({"block_size": ["128K", "1M"], "queue_depth": [2, 8], "io_parallel": [1],
            "single_submit": [false], "sequential_requests": [false, true]})";
  std::string out;
  REQUIRE(runTune("--nvme_dir " + dir + " --io_size 4M --sweep_config " + dir + "/sweep.json",
                  out) == 0);
  INFO(out);
  CHECK(out.find("ds-nvme-tune: 8 settings") != std::string::npos);
  CHECK(out.find("best read: ") != std::string::npos);
  CHECK(out.find("best write: ") != std::string::npos);
  const auto at = out.find("put in the DeepSpeed config:\n");
  REQUIRE(at != std::string::npos);
  const auto aio = nlohmann::json::parse(out.substr(at + 29))["aio"];
  CHECK((aio["block_size"] == 131072 || aio["block_size"] == 1048576));
  CHECK((aio["queue_depth"] == 2 || aio["queue_depth"] == 8));
  CHECK(aio["thread_count"] == 1);

  REQUIRE(runTune("--nvme_dir " + dir + " --io_size 4M --no_read", out) == 0);
  CHECK(out.find("best read") == std::string::npos);
}

TEST_CASE("ds-nvme-tune: bad sweeps and flags exit 2 naming the problem", "[aio]") {
  const std::string dir = ds::test::makeScratchDir("nvme-tune-bad");
  std::ofstream(dir + "/unknown.json") << R"({"block_sizes": ["1M"]})";
  std::ofstream(dir + "/small.json") << R"({"block_size": ["1K"]})";
  std::ofstream(dir + "/empty.json") << R"({"queue_depth": []})";
  struct Case {
    std::string args;
    const char* message;
  };
  const Case cases[] = {
      {"--nvme_dir " + dir + " --sweep_config " + dir + "/unknown.json",
       "unknown key \"block_sizes\""},
      {"--nvme_dir " + dir + " --sweep_config " + dir + "/small.json", "aio.block_size"},
      {"--nvme_dir " + dir + " --sweep_config " + dir + "/empty.json", "expected a non-empty list"},
      {"--nvme_dir " + dir + " --no_read --no_write", "leave nothing to measure"},
      {"--nvme_dir " + dir + "/nowhere", "not a directory"},
      {"--nvme_dir " + dir + " --io_size lots", "--io_size"},
  };
  for (const Case& c : cases) {
    std::string out;
    INFO(c.args);
    CHECK(runTune(c.args, out) == 2);
    CHECK(out.find(c.message) != std::string::npos);
  }
}

TEST_CASE("ds-nvme-tune: SIGINT or SIGTERM during the sweep removes its test file", "[aio]") {
  const std::string dir = ds::test::makeScratchDir("nvme-tune-signal");
  for (const int signal : {SIGINT, SIGTERM}) {
    INFO("signal " << signal);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      const std::string bin = std::string(DS_BIN_DIR) + "/ds-nvme-tune";
      execl(bin.c_str(), bin.c_str(), "--nvme_dir", dir.c_str(), "--io_size", "16M", "--loops",
            "1000", static_cast<char*>(nullptr));
      _exit(127);
    }
    const std::string file = dir + "/ds-nvme-tune-" + std::to_string(child);
    bool created = false;
    for (int i = 0; i < 1000 && !created; ++i) {
      created = std::filesystem::exists(file);
      if (!created) usleep(10000);
    }
    CHECK(created);
    REQUIRE(kill(child, signal) == 0);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(std::filesystem::is_empty(dir));
  }
}

TEST_CASE("ds-nvme-tune: hostile sweeps and sizes are refused in its own name", "[aio]") {
  const std::string dir = ds::test::makeScratchDir("nvme-tune-hostile");
  // 400,000 levels: printing the value in the message used to recurse once per level.
  std::ofstream(dir + "/deep.json")
      << "{\"block_size\": " << std::string(400000, '[') << "1" << std::string(400000, ']') << "}";
  std::ofstream(dir + "/zero.json") << R"({"block_size": ["0K"]})";
  struct Case {
    std::string args;
    const char* message;
  };
  const Case cases[] = {
      {"--sweep_config " + dir + "/deep.json",
       "deep.json: nested more than 64 levels deep at line 1, column 79"},
      {"--io_size 0", "ds-nvme-tune --io_size: 0 bytes measures nothing"},
      {"--io_size 0M", "ds-nvme-tune --io_size: 0 bytes"},
      {"--io_size -4K", "ds-nvme-tune --io_size: \"-4K\" is not a size"},
      {"--io_size 2X", "ds-nvme-tune --io_size: \"2X\" is not a size"},
      {"--io_size 2T", "ds-nvme-tune --io_size: \"2T\" is larger than 1T"},
      {"--sweep_config " + dir + "/zero.json", "block_size"},
  };
  for (const Case& c : cases) {
    std::string out;
    INFO(c.args);
    CHECK(runTune("--nvme_dir " + dir + " " + c.args, out) == 2);
    INFO(out);
    CHECK(out.find(c.message) != std::string::npos);
    CHECK(out.find("ds-comm-bench") == std::string::npos);
  }
}
