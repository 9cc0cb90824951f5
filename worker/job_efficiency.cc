#include "worker/job_efficiency.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <vector>

#include "common/dtype.h"
#include "common/fnv1a.h"
#include "common/usable_cores.h"
#include "kernels/cpu/matmul_peak.h"

namespace ds::worker {
namespace {

// FNV-1a of the kernel's boot id: the same on every process of one machine (or one host's
// containers), different across machines and reboots. Unreadable: the host name stands in.
uint64_t machineId() {
  std::string id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> id;
  if (id.empty()) {
    std::ifstream("/proc/sys/kernel/hostname") >> id;
  }
  return fnv1a64(id.data(), id.size());
}

}  // namespace

JobEfficiency measureJobEfficiency(runtime::Communicator& world, double tokensPerSecond,
                                   double flopsPerToken) {
  JobEfficiency e;
  e.tokensPerSecond = tokensPerSecond;
  e.flopsPerToken = flopsPerToken;
  // 64-bit ids gathered as four 16-bit elements each: a byte copy, no arithmetic.
  const uint64_t mine = machineId();
  std::vector<uint64_t> all(static_cast<size_t>(world.size()));
  world.allGather(&mine, all.data(), 4, DType::BF16);
  e.machines = static_cast<int>(std::set<uint64_t>(all.begin(), all.end()).size());
  if (world.rank() == 0) {
    e.cores = usableCores();
    e.peakGflops = kernels::sgemmPeakGflops(e.cores);
  }
  world.barrier();  // the others wait here while rank 0 measures
  return e;
}

std::string efficiencyLine(const JobEfficiency& e) {
  char peak[160];
  if (e.machines == 1)
    std::snprintf(peak, sizeof peak, "this machine's sgemm peak (%.1f GFLOPS at %d cores)",
                  e.peakGflops, e.cores);
  else
    std::snprintf(peak, sizeof peak,
                  "the sgemm peak of %d machines (%d x %.1f GFLOPS at %d cores, as rank 0's)",
                  e.machines, e.machines, e.peakGflops, e.cores);
  char line[400];
  std::snprintf(line, sizeof line,
                "efficiency: %.0f tokens/s x %.3g MFLOP a token = %.1f GFLOPS, %.0f%% of %s",
                e.tokensPerSecond, e.flopsPerToken / 1e6, e.gflops(), 100.0 * e.fractionOfPeak(),
                peak);
  return line;
}

}  // namespace ds::worker
