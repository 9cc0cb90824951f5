// The training jobs' closing efficiency line (worker/job_efficiency.h): model flops per second
// against the peak of the machines the ranks ran on, in both wordings, and the machine count
// over a real in-process group (all on this machine: one).
#include "worker/job_efficiency.h"

#include <catch2/catch.hpp>
#include <string>

#include "runtime/comm/memory_store.h"
#include "runtime/comm/shm_communicator.h"
#include "test/comm_harness.h"

using ds::worker::JobEfficiency;

TEST_CASE("job efficiency: the line's arithmetic and wording, one machine and several") {
  JobEfficiency e;
  e.tokensPerSecond = 8000;
  e.flopsPerToken = 21e6;  // 168 GFLOPS in all
  e.peakGflops = 300;
  e.cores = 2;
  CHECK(e.gflops() == Approx(168.0));
  CHECK(e.fractionOfPeak() == Approx(0.56));
  CHECK(ds::worker::efficiencyLine(e) ==
        "efficiency: 8000 tokens/s x 21 MFLOP a token = 168.0 GFLOPS, 56% of this machine's "
        "sgemm peak (300.0 GFLOPS at 2 cores)");
  e.machines = 4;  // the peak counts every machine, as rank 0's
  CHECK(e.fractionOfPeak() == Approx(0.14));
  CHECK(ds::worker::efficiencyLine(e) ==
        "efficiency: 8000 tokens/s x 21 MFLOP a token = 168.0 GFLOPS, 14% of the sgemm peak of 4 "
        "machines (4 x 300.0 GFLOPS at 2 cores, as rank 0's)");
  e.peakGflops = 0;  // not measured (a rank other than 0): no division by zero
  CHECK(e.fractionOfPeak() == 0.0);
}

TEST_CASE("job efficiency: ranks on one machine count one machine, and only rank 0 measures") {
  ds::runtime::MemoryStore store;
  std::vector<JobEfficiency> results(3);
  ds::test::onThreads(3, [&](int r) {
    auto comm = ds::runtime::ShmCommunicator::join(store, "efficiency", r, 3);
    results[static_cast<size_t>(r)] = ds::worker::measureJobEfficiency(comm, 1000, 1e6);
  });
  for (const JobEfficiency& e : results) CHECK(e.machines == 1);
  CHECK(results[0].peakGflops > 0.0);
  CHECK(results[0].cores >= 1);
  CHECK(results[1].peakGflops == 0.0);
  CHECK(results[2].peakGflops == 0.0);
}
