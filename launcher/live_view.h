// LiveView: what ds-launch shows while a job runs. On a terminal, the job's output scrolls above a
// compact table (rank, host, state, step, loss, samples/s, memory, heartbeat age) with a progress
// bar and ETA when the total steps are known, redrawn in place each second; when stdout is not a
// terminal, a plain progress line every `plainInterval` instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "launcher/coordinator.h"
#include "launcher/dry_run.h"

namespace ds::launcher {

struct LiveViewOptions {
  bool terminal = false;
  int64_t totalSteps = 0;  // 0: unknown (no bar, no ETA)
  std::chrono::milliseconds plainInterval{10000};
  int columns = 0;  // terminal width: table lines are cut to it so none wraps (0: no limit)
  GridShape grid = {};  // pipe or model above 1: each rank's (pipe, data, model) beside its rank
};

// The state table (one row per rank); also what SIGUSR1 prints. With a grid, each row opens with
// the rank's "pipe,data,model" coordinate.
std::string formatRankTable(const std::vector<RankPlacement>& ranks,
                            const std::vector<RankStatus>& status, const GridShape& grid = {});

class LiveView {
 public:
  LiveView(std::ostream& out, LiveViewOptions options);
  // A line of job output, printed above the table.
  void printLine(const std::string& line);
  // New state; redraws (terminal) or prints a progress line when one is due (plain).
  void update(const std::vector<RankPlacement>& ranks, const std::vector<RankStatus>& status);
  // Removes the table before the final summary.
  void finish();

 private:
  void erase();
  std::ostream& out_;
  LiveViewOptions options_;
  std::string table_;
  int tableLines_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point lastPlain_ = started_;
};

// "[#####-----] 120/400 30% ETA 3s" from the slowest rank's step.
std::string formatProgress(int64_t step, int64_t total, double elapsedSeconds);

}  // namespace ds::launcher
