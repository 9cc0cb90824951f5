// The kernel families' tally (see kernel_timers.h): nanoseconds in relaxed atomics, since the
// model's rank threads may share a process (tests), though only one is timed at a time.
#include "kernels/cpu/kernel_timers.h"

#include <atomic>
#include <chrono>

namespace ds::kernels {
namespace {

std::atomic<bool> timing{false};
std::atomic<int64_t> tally[kKernelFamilies];

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* kernelFamilyName(KernelFamily family) {
  switch (family) {
    case KernelFamily::MatrixProducts:
      return "matrix products";
    case KernelFamily::Attention:
      return "attention";
    case KernelFamily::ElementWise:
      return "element-wise";
    case KernelFamily::Norms:
      return "norms";
    case KernelFamily::EmbeddingLoss:
      return "embedding + loss";
  }
  return "?";
}

void setKernelTiming(bool on) {
  for (auto& t : tally) t.store(0, std::memory_order_relaxed);
  timing.store(on, std::memory_order_relaxed);
}

double kernelSeconds(KernelFamily family) {
  return static_cast<double>(tally[static_cast<size_t>(family)].load(std::memory_order_relaxed)) *
         1e-9;
}

KernelTimer::KernelTimer(KernelFamily family) : family_(family) {
  if (timing.load(std::memory_order_relaxed)) startNs_ = nowNs();
}

void KernelTimer::stop() {
  if (startNs_ < 0) return;
  tally[static_cast<size_t>(family_)].fetch_add(nowNs() - startNs_, std::memory_order_relaxed);
  startNs_ = -1;
}

}  // namespace ds::kernels
