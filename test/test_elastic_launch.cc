// ds-launch --elastic_training with real processes on 3 loopback nodes x 2 ranks: every rank of one
// node is killed, the job goes on with 4 ranks and the same global batch from the latest
// checkpoint, and ends with the parameters of a job started fresh from that checkpoint at 4 ranks,
// the first membership's logs kept and the steps lost counted from the last step logged; a failure
// that leaves no valid world stops the job with exit 3 and the reason. Ranks get
// DEEPSPEED_ELASTICITY_CONFIG, and a config changed since the scheduler saw it is refused.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>

#include "bench/free_port.h"
#include "test/launch_harness.h"
#include "test/rank_logs.h"
#include "test/scratch_dir.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

const char* kThreeNodes = "127.0.0.1 slots=2\n127.0.0.2 slots=2\n127.0.0.3 slots=2\n";

std::string elasticConfig(int minGpus, int maxGpus) {
  return R"({"elasticity": {"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [2, 4],
    "min_gpus": )" + std::to_string(minGpus) + R"(, "max_gpus": )" + std::to_string(maxGpus) +
         R"(, "version": 0.1}, "steps_per_print": 50, "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
    "zero_optimization": {"stage": 2}})";
}

// SIGKILLs every worker of `host`; returns how many there were. One may have gone by itself
// between the kills (and been reaped): its node's relay host, killed first, takes it along.
int killWorkersOf(const LaunchedJob& job, const std::string& host) {
  int found = 0;
  for (const auto& w : findWorkers(job.pid))
    if (w.host == host) {
      ++found;
      CHECK((::kill(w.pid, SIGKILL) == 0 || errno == ESRCH));
    }
  return found;
}

// ds-launch --elastic_training in `dir` on kThreeNodes with elasticConfig(minGpus, maxGpus):
// `steps` steps, printing the parameter hashes.
LaunchedJob startElastic(const std::string& dir, int minGpus, int maxGpus, int steps) {
  writeFile(dir + "/hostfile", kThreeNodes);
  writeFile(dir + "/config.json", elasticConfig(minGpus, maxGpus));
  return startLaunch(dir, {"--hostfile", "hostfile", "--master_port", "0", "--log_dir", "logs",
                           "--elastic_training", "train", "--config", "config.json", "--steps",
                           std::to_string(steps), "--print_param_hash"});
}

// Waits (up to 60 s) until rank 0 logged step `step`.
void requireStepLogged(const LaunchedJob& job, int step) {
  REQUIRE(waitUntil(60s, [&] {
    const auto hashes = paramHashes(readFile(job.dir + "/logs/rank-0.log"));
    return !hashes.empty() && hashes.rbegin()->first >= step;
  }));
}

// Waits until rank 0 logged step `step`, then SIGKILLs every worker of 127.0.0.3.
void killThirdNodeAfter(const LaunchedJob& job, int step) {
  requireStepLogged(job, step);
  REQUIRE(killWorkersOf(job, "127.0.0.3") == 2);
}

}  // namespace

TEST_CASE("elastic: a node's failure shrinks the job to 4 ranks, same batch, from the checkpoint",
          "[elastic][launch]") {
  const std::string dir = makeScratchDir("elastic-shrink");
  const int steps = 400;
  auto job = startElastic(dir, 2, 6, steps);
  killThirdNodeAfter(job, 15);
  const auto status = waitExit(job, 120s);
  const std::string out = readFile(dir + "/stdout"), err = readFile(dir + "/stderr");
  INFO(out << err);
  REQUIRE(status == 0);
  CHECK(out.find("elastic epoch 1: 6 ranks on 3 nodes; batch 48 = micro 4 x accumulation 2 x 6") !=
        std::string::npos);
  CHECK(out.find("elastic epoch 2: 4 ranks on 2 nodes; batch 48 = micro 4 x accumulation 3 x 4") !=
        std::string::npos);
  CHECK(err.find("dropping node 127.0.0.3") != std::string::npos);
  std::smatch resumed;
  REQUIRE(std::regex_search(out, resumed, std::regex(R"(resumed from (\S+)/global_step(\d+) at step (\d+))")));
  const int from = std::stoi(resumed[2]);
  CHECK(from >= 10);
  CHECK(from % 10 == 0);  // the automatic interval
  CHECK(out.find("rescales:") != std::string::npos);

  // Each membership's logs are kept: epoch 1's (the killed ranks' included) under epoch-1/.
  const std::string epoch1 = dir + "/logs/epoch-1";
  const auto beforeFailure = paramHashes(readFile(epoch1 + "/rank-0.log"));
  REQUIRE(!beforeFailure.empty());
  CHECK(beforeFailure.rbegin()->first >= 15);
  for (const char* killed : {"/rank-4.log", "/rank-5.log"})
    CHECK(!paramHashes(readFile(epoch1 + killed)).empty());
  CHECK(err.find("epoch 1's logs kept, rank ") != std::string::npos);
  CHECK(readFile(dir + "/logs/rank-0.log").find("resumed from") != std::string::npos);
  // Steps lost: from the last step logged before the failure to the step resumed from.
  std::smatch row;
  REQUIRE(std::regex_search(out, row, std::regex(R"(\n +[0-9.]+ +6 -> 4 +(\d+) +(\d+) +(\d+) )")));
  const int failedAt = std::stoi(row[1]), resumedFrom = std::stoi(row[2]);
  CHECK(resumedFrom == from);
  CHECK(failedAt >= beforeFailure.rbegin()->first);
  CHECK(std::stoi(row[3]) == failedAt - resumedFrom);

  // The loss goes on from where the checkpoint was, not from the start.
  std::vector<double> losses;
  static const std::regex lossLine(R"(step \d+/\d+ loss ([0-9.]+))");
  for (std::sregex_iterator it(out.begin(), out.end(), lossLine), end; it != end; ++it)
    losses.push_back(std::stod((*it)[1]));
  REQUIRE(losses.size() >= 3);
  CHECK(losses.back() < losses.front() / 4);

  // A job started fresh from that checkpoint at 4 ranks ends with the same parameters.
  const std::string fresh = makeScratchDir("elastic-fresh");
  const std::string tag = "global_step" + std::to_string(from);
  std::filesystem::create_directories(fresh + "/ckpt");
  std::filesystem::copy(std::string(resumed[1]) + "/" + tag, fresh + "/ckpt/" + tag,
                        std::filesystem::copy_options::recursive);
  writeFile(fresh + "/ckpt/latest", tag + "\n");
  writeFile(fresh + "/hostfile", "127.0.0.1 slots=2\n127.0.0.2 slots=2\n");
  writeFile(fresh + "/config.json", elasticConfig(2, 6));
  auto reference = startLaunch(fresh, {"--hostfile", "hostfile", "--master_port", "0", "--log_dir",
                                       "logs", "train", "--config", "config.json", "--steps",
                                       std::to_string(steps), "--print_param_hash", "--load_dir",
                                       "ckpt"});
  REQUIRE(waitExit(reference, 120s) == 0);
  const auto elasticHashes = paramHashes(readFile(dir + "/logs/rank-0.log"));
  const auto freshHashes = paramHashes(readFile(fresh + "/logs/rank-0.log"));
  REQUIRE(elasticHashes.count(steps) == 1);
  REQUIRE(freshHashes.count(steps) == 1);
  CHECK(elasticHashes.at(steps) == freshHashes.at(steps));
}

TEST_CASE("elastic: a failure that leaves no valid world stops the job with exit 3",
          "[elastic][launch]") {
  const std::string dir = makeScratchDir("elastic-stop");
  auto job = startElastic(dir, 6, 6, 100000);  // only 6 ranks can run it
  killThirdNodeAfter(job, 5);
  const auto status = waitExit(job, 60s);
  const std::string err = readFile(dir + "/stderr");
  INFO(readFile(dir + "/stdout") << err);
  REQUIRE(status == 3);
  CHECK(err.find("elastic: no valid world on the 2 remaining node(s)") != std::string::npos);
  CHECK(err.find("is not valid with the current list of valid GPU counts: [6]") !=
        std::string::npos);
  CHECK(processesMentioning(dir).empty());
}

TEST_CASE("elastic: flags are checked", "[elastic][launch]") {
  const std::string dir = makeScratchDir("elastic-flags");
  writeFile(dir + "/hostfile", kThreeNodes);
  writeFile(dir + "/plain.json", R"({"train_batch_size": 12})");
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const Case cases[] = {
      {{"--elastic_training", "train", "--config", "plain.json"}, "needs \"elasticity\""},
      {{"--elastic_training", "barrier"}, "only the built-in train job"},
      {{"--min_elastic_nodes", "2", "barrier"}, "only go with --elastic_training"},
      {{"--elastic_training", "--min_elastic_nodes", "3", "--max_elastic_nodes", "2", "barrier"},
       "is more than --max_elastic_nodes"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--hostfile", "hostfile", "--master_port", "0"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto job = startLaunch(dir, args);
    INFO(c.message);
    CHECK(waitExit(job, 30s) == 2);
    CHECK(readFile(dir + "/stderr").find(c.message) != std::string::npos);
  }
}

TEST_CASE("elastic: SIGUSR2 shrinks the job by one node, checkpointing first: no step lost",
          "[elastic][launch]") {
  const std::string dir = makeScratchDir("elastic-sigusr2");
  auto job = startElastic(dir, 2, 6, 2000);
  requireStepLogged(job, 15);
  REQUIRE(::kill(job.pid, SIGUSR2) == 0);
  const auto status = waitExit(job, 120s);
  const std::string out = readFile(dir + "/stdout"), err = readFile(dir + "/stderr");
  INFO(out << err);
  REQUIRE(status == 0);
  CHECK(err.find("asked to shrink (SIGUSR2)") != std::string::npos);
  std::smatch stopped, resumed;
  REQUIRE(std::regex_search(out, stopped, std::regex(R"(stopped: checkpoint \S+/global_step(\d+))")));
  REQUIRE(std::regex_search(out, resumed, std::regex(R"(resumed from \S+/global_step(\d+) at step)")));
  CHECK(stopped[1] == resumed[1]);  // the stop's own checkpoint: nothing lost
  CHECK(out.find("elastic epoch 2: 4 ranks on 2 nodes") != std::string::npos);
  CHECK(std::regex_search(out, std::regex(R"(\n3 +127\.0\.0\.2 +0 +2000 )")));
}

TEST_CASE("elastic: a node that joins is taken at the next checkpoint, one that makes the world "
          "invalid is refused",
          "[elastic][launch]") {
  const std::string dir = makeScratchDir("elastic-join");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n127.0.0.2 slots=2\n");
  writeFile(dir + "/config.json", elasticConfig(2, 6));
  const int port = ds::bench::freeLoopbackPort();
  const std::string token = "join-token-0123456789abcdef0123";
  setenv("DS_JOB_TOKEN", token.c_str(), 1);
  auto job = startLaunch(dir, {"--hostfile", "hostfile", "--master_port", std::to_string(port),
                               "--log_dir", "logs", "--elastic_training", "train", "--config",
                               "config.json", "--steps", "3000", "--print_param_hash"});
  unsetenv("DS_JOB_TOKEN");
  REQUIRE(waitUntil(60s, [&] { return !paramHashes(readFile(dir + "/logs/rank-0.log")).empty(); }));
  auto offer = [&](const std::string& host, int slots, const std::string& tokenValue) {
    const std::string cmd = "DS_JOB_TOKEN=" + tokenValue + " " + DS_BIN_DIR +
                            "/ds-worker --join 127.0.0.1:" + std::to_string(port) + " --host " +
                            host + " --slots " + std::to_string(slots) + " >" + dir +
                            "/offer.out 2>&1";
    const int raw = std::system(cmd.c_str());
    return std::pair{WEXITSTATUS(raw), readFile(dir + "/offer.out")};
  };
  const auto [badStatus, badText] = offer("127.0.0.4", 1, token);  // 4 + 1 = 5 ranks: not valid
  CHECK(badStatus == 2);
  CHECK(badText.find("a world of 5 ranks is not valid") != std::string::npos);
  const auto [wrongStatus, wrongText] = offer("127.0.0.3", 2, "wrong-token-0123456789abcdef");
  CHECK(wrongStatus == 2);
  CHECK(wrongText.find("wrong job token") != std::string::npos);
  const auto [status, text] = offer("127.0.0.3", 2, token);
  INFO(text);
  REQUIRE(status == 0);
  CHECK(text.find("accepted") != std::string::npos);

  REQUIRE(waitExit(job, 120s) == 0);
  const std::string out = readFile(dir + "/stdout"), err = readFile(dir + "/stderr");
  INFO(out << err);
  CHECK(err.find("a node joins at the checkpoint of step") != std::string::npos);
  CHECK(out.find("elastic epoch 2: 6 ranks on 3 nodes; batch 48 = micro 4 x accumulation 2 x 6") !=
        std::string::npos);
  std::smatch stopped, resumed;
  REQUIRE(std::regex_search(out, stopped, std::regex(R"(stopped: checkpoint \S+/global_step(\d+))")));
  REQUIRE(std::regex_search(out, resumed, std::regex(R"(resumed from \S+/global_step(\d+) at step)")));
  CHECK(stopped[1] == resumed[1]);
  CHECK(std::regex_search(out, std::regex(R"(\n5 +127\.0\.0\.3 +0 +3000 )")));
  CHECK(out.find("joined: 127.0.0.3") != std::string::npos);
}

TEST_CASE("elastic: nodes beyond the largest valid world are spares that replace a failed one",
          "[elastic][launch]") {
  const std::string dir = makeScratchDir("elastic-spare");
  auto job = startElastic(dir, 4, 4, 2000);  // only 4 ranks: the third node waits
  requireStepLogged(job, 15);
  REQUIRE(killWorkersOf(job, "127.0.0.2") == 2);
  const auto status = waitExit(job, 120s);
  const std::string out = readFile(dir + "/stdout");
  INFO(out << readFile(dir + "/stderr"));
  REQUIRE(status == 0);
  CHECK(out.find("elastic job on 3 node(s) with 6 slots") != std::string::npos);
  CHECK(out.find("elastic epoch 1: 4 ranks on 2 nodes") != std::string::npos);
  CHECK(out.find("elastic epoch 2: 4 ranks on 2 nodes") != std::string::npos);
  CHECK(std::regex_search(out, std::regex(R"(\n2 +127\.0\.0\.3 +0 +2000 )")));
}

// DeepSpeed's runtime compares the elasticity block it runs with DEEPSPEED_ELASTICITY_CONFIG, the
// one the resource scheduler saw: ds-launch sets it for every rank of a job whose config enables
// elasticity, and refuses to start when a scheduler above it saw a different block.
TEST_CASE("elastic: ranks get DEEPSPEED_ELASTICITY_CONFIG, and a changed config is refused",
          "[elastic][launch]") {
  const std::string dir = makeScratchDir("elastic-env");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  const std::string block =
      R"({"enabled":true,"max_train_batch_size":8,"micro_batch_sizes":[2,4],"version":0.1})";
  writeFile(dir + "/elastic.json", R"({"elasticity": )" + block + "}");
  // The program's --deepspeed_config is the config ds-launch plans with (sh ignores it).
  auto launch = [&] {
    return startLaunch(
        dir, {"--hostfile", "hostfile", "--master_port", "0", "--log_dir", "logs",
              "--print_all_ranks", "--no_local_rank", "--", "/bin/sh", "-c",
              "echo ELASTIC=$DEEPSPEED_ELASTICITY_CONFIG", "--deepspeed_config", "elastic.json"});
  };
  {
    auto job = launch();
    const auto status = waitExit(job, 60s);
    INFO(readFile(dir + "/stderr"));
    REQUIRE(status == 0);
    const std::string out = readFile(dir + "/stdout");
    INFO(out);
    CHECK(out.find("[rank 0] ELASTIC=" + block) != std::string::npos);
    CHECK(out.find("[rank 1] ELASTIC=" + block) != std::string::npos);
  }
  // A scheduler above ds-launch saw max_train_batch_size 16: nothing starts.
  ::setenv("DEEPSPEED_ELASTICITY_CONFIG",
           R"({"enabled":true,"max_train_batch_size":16,"micro_batch_sizes":[2,4],"version":0.1})",
           1);
  auto refused = launch();
  ::unsetenv("DEEPSPEED_ELASTICITY_CONFIG");
  CHECK(waitExit(refused, 30s) == 2);
  CHECK_THAT(readFile(dir + "/stderr"),
             Catch::Contains("elastic.json: elasticity.max_train_batch_size: elastic config "
                             "'max_acceptable_batch_size=16' seen by the resource scheduler"));
  CHECK(readFile(dir + "/stdout").find("ELASTIC=") == std::string::npos);
}
