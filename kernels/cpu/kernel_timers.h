// Where a training step's time goes by kernel family (bench_gpt's breakdown): a process-wide
// tally of wall time. Off by default, when a timed region costs one relaxed load; regions are
// timed on the calling thread around whole parallel loops, never inside them, and never nest.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::kernels {

enum class KernelFamily {
  MatrixProducts,  // the projections, the MLP and the output layer, forward and backward
  Attention,       // per-head scores, softmax and context products, rotary, attention dropout
  ElementWise,     // activations, biases, residual adds, hidden dropout
  Norms,           // layer / RMS / scale norms, forward and backward
  EmbeddingLoss,   // embedding lookup and its gradient, cross-entropy
};
constexpr size_t kKernelFamilies = 5;
const char* kernelFamilyName(KernelFamily family);

// Turning it on or off clears the tally.
void setKernelTiming(bool on);
double kernelSeconds(KernelFamily family);

class KernelTimer {
 public:
  explicit KernelTimer(KernelFamily family);
  ~KernelTimer() { stop(); }
  void stop();  // ends the region before the scope does; later calls do nothing
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  KernelFamily family_;
  int64_t startNs_ = -1;  // -1: timing was off when the region began
};

}  // namespace ds::kernels
