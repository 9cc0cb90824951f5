// This process's resident memory now and at its peak (VmRSS and VmHWM of /proc/self/status), for
// the trainer's memory line and for tests that hold a prediction against what a rank really took.
#pragma once

#include <cstdint>

namespace ds {

struct ProcessMemory {
  uint64_t rssBytes = 0;      // VmRSS
  uint64_t peakRssBytes = 0;  // VmHWM: the high-water mark since the process started
};

// Zeros where /proc is not mounted.
ProcessMemory processMemory();

// Sets VmHWM back to the current VmRSS (Linux's /proc/self/clear_refs "5"), so that a bench can
// measure the peak of one phase; false where the kernel refuses it.
bool resetPeakRss();

}  // namespace ds
