// The closing line of a training job: the model flops per second the whole job reached against
// the sgemm peak of the machines it ran on, so that a user on any CPU can tell a healthy run
// (about half the peak or more for the demo's small model) from one losing its cores to something.
#pragma once

#include <string>

#include "runtime/comm/communicator.h"

namespace ds::worker {

struct JobEfficiency {
  double tokensPerSecond = 0;  // the whole job's, as the iteration lines report it
  double flopsPerToken = 0;    // model flops of a training step (Gpt::trainingFlopsPerToken)
  double peakGflops = 0;       // one machine's: rank 0's, at all of its cores
  int cores = 0;               // rank 0's machine
  int machines = 1;            // distinct machines (kernels) among the job's ranks
  double gflops() const { return tokensPerSecond * flopsPerToken / 1e9; }
  double fractionOfPeak() const {
    return peakGflops > 0 ? gflops() / (peakGflops * machines) : 0.0;
  }
};

// Collective over `world`, after training: the ranks count the machines they run on (by the
// kernel's boot id: loopback "nodes" on one machine share it, as do containers on one host), then
// rank 0 measures its machine's sgemm peak while the others wait, so that no rank computes
// beside the measurement. Only rank 0's result has the peak.
JobEfficiency measureJobEfficiency(runtime::Communicator& world, double tokensPerSecond,
                                   double flopsPerToken);

// "efficiency: 8064 tokens/s x 21 MFLOP a token = 169.6 GFLOPS, 55% of this machine's sgemm peak
// (307.6 GFLOPS at 2 cores)" (the demo's)
std::string efficiencyLine(const JobEfficiency& e);

}  // namespace ds::worker
