// LiveView drawing with plain ANSI: cursor up N lines ("\x1b[NF") and clear to the end of the
// screen ("\x1b[J") to replace the table; output lines are written where the table was.
#include "launcher/live_view.h"

#include "launcher/failure_policy.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace ds::launcher {
namespace {

std::string humanBytes(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t{1} << 30))
    std::snprintf(text, sizeof(text), "%.1fG", bytes / double(int64_t{1} << 30));
  else
    std::snprintf(text, sizeof(text), "%.0fM", bytes / double(1 << 20));
  return text;
}

int64_t slowestStep(const std::vector<RankStatus>& status) {
  int64_t step = -1;
  for (const auto& rank : status)
    step = step < 0 ? rank.progress.step : std::min(step, rank.progress.step);
  return std::max<int64_t>(step, 0);
}

}  // namespace

std::string formatRankTable(const std::vector<RankPlacement>& ranks,
                            const std::vector<RankStatus>& status, const GridShape& grid) {
  std::ostringstream out;
  char line[256];
  // An elastic job's world changes: the coordinates follow the ranks there are now.
  const auto coords = gridCoordinates(grid, static_cast<int>(ranks.size()));
  std::snprintf(line, sizeof(line), "%-5s %-16s %-10s %8s %11s %10s %7s %6s  %s\n", "rank", "host",
                "state", "step", "loss", "samples/s", "memory", "hb age", "phase");
  out << (coords.empty() ? "" : "p,d,m  ") << line;
  const auto now = std::chrono::steady_clock::now();
  for (size_t r = 0; r < ranks.size() && r < status.size(); ++r) {
    const auto& s = status[r];
    const std::string state = s.lost     ? "lost"
                              : s.joined ? rankStateName(s.progress.state)
                                         : "waiting";
    char age[16] = "-";
    if (s.joined)
      std::snprintf(age, sizeof(age), "%.1fs",
                    std::chrono::duration<double>(now - s.lastHeartbeat).count());
    const Progress& p = s.progress;
    if (r < coords.size()) {
      char coord[24];
      std::snprintf(coord, sizeof(coord), "%-6s ",
                    (std::to_string(coords[r][0]) + "," + std::to_string(coords[r][1]) + "," +
                     std::to_string(coords[r][2]))
                        .c_str());
      out << coord;
    }
    std::snprintf(line, sizeof(line), "%-5d %-16s %-10s %8lld %11.6f %10.0f %7s %6s  ",
                  ranks[r].rank, ranks[r].host.c_str(), state.c_str(),
                  static_cast<long long>(p.step), p.loss, p.samplesPerSecond,
                  s.joined ? humanBytes(p.residentBytes).c_str() : "-", age);
    out << line << p.phase << collectiveText(s, now) << "\n";
  }
  return out.str();
}

std::string formatProgress(int64_t step, int64_t total, double elapsedSeconds) {
  constexpr int kWidth = 30;
  const double fraction = total > 0 ? std::clamp(double(step) / double(total), 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '-') + "]";
  char text[128];
  if (step > 0 && step < total) {
    const double eta = elapsedSeconds * double(total - step) / double(step);
    std::snprintf(text, sizeof(text), " %lld/%lld %3.0f%% ETA %.0fs", static_cast<long long>(step),
                  static_cast<long long>(total), fraction * 100, eta);
  } else {
    std::snprintf(text, sizeof(text), " %lld/%lld %3.0f%%", static_cast<long long>(step),
                  static_cast<long long>(total), fraction * 100);
  }
  return bar + text;
}

LiveView::LiveView(std::ostream& out, LiveViewOptions options) : out_(out), options_(options) {}

void LiveView::erase() {
  if (tableLines_ > 0) out_ << "\x1b[" << tableLines_ << "F\x1b[J";
  tableLines_ = 0;
}

void LiveView::printLine(const std::string& line) {
  if (!options_.terminal) {
    out_ << line << '\n';
    return;
  }
  erase();
  out_ << line << '\n' << table_;
  tableLines_ = static_cast<int>(std::count(table_.begin(), table_.end(), '\n'));
  out_.flush();
}

void LiveView::update(const std::vector<RankPlacement>& ranks,
                      const std::vector<RankStatus>& status) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - started_).count();
  const int64_t step = slowestStep(status);
  if (!options_.terminal) {
    if (now - lastPlain_ < options_.plainInterval) return;
    lastPlain_ = now;
    int training = 0;
    for (const auto& s : status) training += s.progress.state == RankState::Training;
    // The trainer reports global samples/s and rank 0's loss is the one it prints.
    const double samples = status.empty() ? 0 : status.front().progress.samplesPerSecond;
    const double loss = status.empty() ? 0 : status.front().progress.loss;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "ds-launch: %.0fs, %d/%zu ranks training, step %lld, loss %.6f, %.0f samples/s",
                  elapsed, training, status.size(), static_cast<long long>(step), loss, samples);
    out_ << line;
    if (options_.totalSteps > 0) out_ << ' ' << formatProgress(step, options_.totalSteps, elapsed);
    out_ << '\n';
    out_.flush();
    return;
  }
  std::string table = formatRankTable(ranks, status, options_.grid);
  if (options_.totalSteps > 0) table += formatProgress(step, options_.totalSteps, elapsed) + "\n";
  // A wrapped line would break the line count the redraw relies on.
  table_.clear();
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (options_.columns > 1 && static_cast<int>(line.size()) >= options_.columns)
      line.resize(options_.columns - 1);
    table_ += line + "\n";
  }
  erase();
  out_ << table_;
  tableLines_ = static_cast<int>(std::count(table_.begin(), table_.end(), '\n'));
  out_.flush();
}

void LiveView::finish() {
  if (options_.terminal) erase();
  table_.clear();
  out_.flush();
}

}  // namespace ds::launcher
