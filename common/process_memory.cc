#include "common/process_memory.h"

#include <fstream>
#include <string>

namespace ds {

ProcessMemory processMemory() {
  ProcessMemory m;
  std::ifstream in("/proc/self/status");
  std::string key;
  uint64_t kib = 0;
  std::string rest;
  while (in >> key) {
    if (key == "VmRSS:" && in >> kib)
      m.rssBytes = kib * 1024;
    else if (key == "VmHWM:" && in >> kib)
      m.peakRssBytes = kib * 1024;
    std::getline(in, rest);
  }
  return m;
}

bool resetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace ds
