// What ds-launch shows while a job runs: the progress bar, the rank table, the in-place redraw on
// a terminal and the plain progress lines otherwise.
#include <catch2/catch.hpp>
#include <sstream>

#include "launcher/job_supervisor.h"
#include "launcher/live_view.h"

using namespace ds::launcher;
using ds::RankPlacement;
using ds::RankState;
using namespace std::chrono_literals;

namespace {

std::vector<RankPlacement> twoRanks() {
  return {{0, "127.0.0.1", 0, 0, 1}, {1, "127.0.0.2", 0, 0, 1}};
}

std::vector<RankStatus> statusAt(int64_t step0, int64_t step1) {
  std::vector<RankStatus> status(2);
  for (auto& s : status) {
    s.joined = true;
    s.progress.state = RankState::Training;
    s.lastHeartbeat = std::chrono::steady_clock::now();
    s.progress.residentBytes = 300 << 20;
    s.progress.samplesPerSecond = 1000;
    s.progress.loss = 0.5;
  }
  status[0].progress.step = step0;
  status[1].progress.step = step1;
  status[1].progress.phase = "step 8: forward";
  return status;
}

}  // namespace

TEST_CASE("progress bar: fraction, counts and an ETA from the elapsed time") {
  REQUIRE(formatProgress(100, 400, 10.0) ==
          "[#######-----------------------] 100/400  25% ETA 30s");
  REQUIRE(formatProgress(400, 400, 10.0) == "[##############################] 400/400 100%");
  REQUIRE(formatProgress(0, 400, 0.0) == "[------------------------------] 0/400   0%");
}

TEST_CASE("rank table: one row per rank with state, step, loss, memory and phase") {
  auto status = statusAt(9, 7);
  status[0].lost = true;
  const std::string table = formatRankTable(twoRanks(), status);
  REQUIRE_THAT(table, Catch::StartsWith("rank  host"));
  REQUIRE_THAT(table, Catch::Contains("0     127.0.0.1        lost"));
  REQUIRE_THAT(table, Catch::Contains("1     127.0.0.2        training"));
  REQUIRE_THAT(table, Catch::Contains("300M") && Catch::Contains("step 8: forward"));
  REQUIRE_THAT(table, !Catch::Contains(", in "));  // neither rank is in a collective
}

TEST_CASE("rank table: a rank waiting in a collective shows which, on which group, since when") {
  auto status = statusAt(9, 7);
  status[1].progress.collective =
      ds::CollectiveWait{ds::CollectiveOp::AllGather, "world",
                     std::chrono::steady_clock::now() - std::chrono::milliseconds(2500)};
  const std::string table = formatRankTable(twoRanks(), status);
  REQUIRE_THAT(table, Catch::Contains("step 8: forward, in all_gather on world for 2."));
  REQUIRE_THAT(table, Catch::Contains(" s\n"));
}

TEST_CASE("live view on a terminal: output scrolls above a table redrawn in place") {
  std::ostringstream out;
  LiveView view(out, {true, 20, 10s, 60});
  view.update(twoRanks(), statusAt(10, 8));
  view.printLine("[rank 0] hello");
  view.finish();
  const std::string text = out.str();
  // The table (header + 2 rows + progress bar = 4 lines) is erased before the line is printed.
  REQUIRE(text.find("\x1b[4F\x1b[J[rank 0] hello\n") != std::string::npos);
  REQUIRE(text.find("8/20") != std::string::npos);             // the slowest rank sets the progress
  REQUIRE(text.find("step 8: forward") == std::string::npos);  // cut at 59 columns
  REQUIRE(text.substr(text.size() - 7) == "\x1b[4F\x1b[J");    // finish() leaves no table
}

TEST_CASE("live view without a terminal: plain lines, progress at most every interval") {
  std::ostringstream out;
  LiveView view(out, {false, 20, 0ms});
  view.printLine("[rank 0] hello");
  view.update(twoRanks(), statusAt(10, 8));
  const std::string text = out.str();
  REQUIRE(text.find('\x1b') == std::string::npos);
  REQUIRE_THAT(text, Catch::Contains("[rank 0] hello\n") &&
                         Catch::Contains("2/2 ranks training, step 8") && Catch::Contains("8/20"));
  std::ostringstream quiet;
  LiveView rare(quiet, {false, 20, 1h});
  rare.update(twoRanks(), statusAt(10, 8));
  REQUIRE(quiet.str().empty());
}

TEST_CASE("summary: a rank that reported no steps shows '-', not a made-up step 0 and loss") {
  JobOutcome outcome;
  RankOutcome trained;
  trained.rank = 0;
  trained.host = "127.0.0.1";
  trained.exitCode = 0;
  trained.steps = 20;
  trained.lastLoss = 0.25;
  trained.wallSeconds = 1.5;
  RankOutcome script = trained;
  script.rank = 1;
  script.steps = 0;
  script.lastLoss = 0;
  script.exitCode = 3;
  outcome.ranks = {trained, script};
  std::istringstream lines(formatSummary(outcome));
  std::string header, first, second;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  CHECK_THAT(first, Catch::Matches(R"(0 +127\.0\.0\.1 +0 +20 +0\.250000 +1\.50)"));
  CHECK_THAT(second, Catch::Matches(R"(1 +127\.0\.0\.1 +3 +- +- +1\.50)"));
}

TEST_CASE("rank table: a job with a grid shows each rank's pipe,data,model coordinate") {
  std::vector<RankPlacement> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back({r, "127.0.0.1", r, r, 4});
  std::vector<RankStatus> status(4);
  const std::string table = formatRankTable(ranks, status, GridShape{2, 2});
  REQUIRE_THAT(table, Catch::StartsWith("p,d,m  rank  host"));
  // pipe 2 x model 2 of 4 ranks: one replica, model varying fastest.
  REQUIRE_THAT(table, Catch::Contains("\n0,0,1  1     127.0.0.1"));
  REQUIRE_THAT(table, Catch::Contains("\n1,0,0  2     127.0.0.1"));
  // Without a grid the table is as it was.
  REQUIRE_THAT(formatRankTable(ranks, status), Catch::StartsWith("rank  host"));
}
