// Where ds-launch writes each rank's output, and how: the default directory (the $TMPDIR
// fallback only when it is this user's private directory), one file per rank opened before any
// process starts and never through a symbolic link, and an elastic job's earlier memberships'
// logs kept under epoch-K/. Knows nothing of what the lines say.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::launcher {

// The log directory when the user names none: $XDG_STATE_HOME/ds-launch/<time>-<pid>, by
// default ~/.local/state/ds-launch/..., or with neither set $TMPDIR/ds-launch-<uid>/..., whose
// base is created 0700 and must be a directory (not a link) owned by this user that nobody else
// may write to; throws ds::Error naming it and --log_dir otherwise.
std::string defaultLogDir();

// One log file per rank: DIR/rank-N.log, or with --enable_each_rank_log EACH/<stamp>_rankN.log.
// Each is created 0644 or emptied, but only when it is a regular file with one name: a symbolic
// link, a hard link or a FIFO planted there is refused (ds::Error naming it and the fix), never
// truncated or written through. Lines are buffered until flush().
class RankLogs {
 public:
  RankLogs(const std::string& logDir, const std::string& eachRankLogDir, size_t ranks);
  ~RankLogs();
  RankLogs(const RankLogs&) = delete;
  RankLogs& operator=(const RankLogs&) = delete;

  void write(size_t rank, const std::string& line);  // the line and a newline
  void flush(size_t rank);
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  std::vector<std::string> paths_;
  std::vector<int> fds_;
  std::vector<std::string> pending_;
};

// An elastic job's membership `epoch` ended and another starts: its logs move into epoch-<epoch>/
// beside them, so the next membership's rank-N.log starts empty while the failed rank's output is
// kept. Returns the new paths (the old one where a move failed, with a warning on stderr).
std::vector<std::string> keepMembershipLogs(const std::vector<std::string>& paths, uint64_t epoch);

}  // namespace ds::launcher
