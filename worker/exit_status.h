// ds-worker's exit statuses (listed in worker/main.cc's opening comment), shared by its main and
// the files that decide them.
#pragma once

#include "common/command_line.h"

namespace ds::worker {

inline constexpr int kJobFailed = 1;  // or the external program's own status
inline constexpr int kUsage = kUsageExit;
inline constexpr int kJoinRefused = 3;
inline constexpr int kAborted = 10;
inline constexpr int kCoordinatorGone = 11;

}  // namespace ds::worker
