// The kernel families' tally behind bench_gpt's breakdown: nothing is recorded while timing is
// off, a region's time goes to its own family only, stop() ends it once, and turning timing on
// clears the tally.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "kernels/cpu/kernel_timers.h"

using ds::kernels::KernelFamily;
using ds::kernels::kernelSeconds;
using ds::kernels::KernelTimer;
using ds::kernels::setKernelTiming;

TEST_CASE("kernel timers: regions count only while on, in their own family", "[kernels]") {
  const auto pause = std::chrono::milliseconds(20);
  setKernelTiming(false);
  {
    KernelTimer off(KernelFamily::Norms);
    std::this_thread::sleep_for(pause);
  }
  CHECK(kernelSeconds(KernelFamily::Norms) == 0.0);

  setKernelTiming(true);
  {
    KernelTimer on(KernelFamily::Norms);
    std::this_thread::sleep_for(pause);
    on.stop();
    std::this_thread::sleep_for(10 * pause);  // after stop(): not counted, nor at scope end
  }
  const double norms = kernelSeconds(KernelFamily::Norms);
  CHECK(norms >= 0.019);
  CHECK(norms < 0.2);  // without the 200 ms after stop() (a loaded machine may stretch a pause)
  CHECK(kernelSeconds(KernelFamily::Attention) == 0.0);
  CHECK(kernelSeconds(KernelFamily::MatrixProducts) == 0.0);

  setKernelTiming(true);  // turning it on again starts a fresh tally
  CHECK(kernelSeconds(KernelFamily::Norms) == 0.0);
  setKernelTiming(false);
}
