// An accelerator that forwards every call to another one: the base of the tests' accelerators
// that watch or reshape a backend (count its calls, or present the CPU's kernels as a device whose
// kernels are not host code) without restating the interface.
#pragma once

#include <string>

#include "kernels/accelerator.h"

namespace ds::test {

class DelegatingAccelerator : public kernels::Accelerator {
 public:
  using Stream = kernels::Stream;
  using Event = kernels::Event;
  explicit DelegatingAccelerator(kernels::Accelerator& target) : t_(target) {}

  DeviceKind kind() const override { return t_.kind(); }
  std::string deviceName() const override { return t_.deviceName(); }
  int deviceCount() const override { return t_.deviceCount(); }
  void setDevice(int index) override { t_.setDevice(index); }
  int currentDevice() const override { return t_.currentDevice(); }
  const char* communicationBackend() const override { return t_.communicationBackend(); }
  bool supportsBf16() const override { return t_.supportsBf16(); }
  bool supportsFp16() const override { return t_.supportsFp16(); }
  bool hostAccessible() const override { return t_.hostAccessible(); }
  void* allocate(size_t bytes) override { return t_.allocate(bytes); }
  void release(void* p) noexcept override { t_.release(p); }
  void* allocatePinned(size_t bytes) override { return t_.allocatePinned(bytes); }
  void releasePinned(void* p) noexcept override { t_.releasePinned(p); }
  kernels::DeviceMemoryInfo memoryInfo() const override { return t_.memoryInfo(); }
  void fillZero(void* p, size_t bytes, Stream s) override { t_.fillZero(p, bytes, s); }
  Stream createStream() override { return t_.createStream(); }
  void destroyStream(Stream s) noexcept override { t_.destroyStream(s); }
  void synchronize(Stream s) override { t_.synchronize(s); }
  void synchronizeDevice() override { t_.synchronizeDevice(); }
  void setCurrentStream(Stream s) override { t_.setCurrentStream(s); }
  Stream currentStream() const override { return t_.currentStream(); }
  Event createEvent() override { return t_.createEvent(); }
  void destroyEvent(Event e) noexcept override { t_.destroyEvent(e); }
  void recordEvent(Event e, Stream s) override { t_.recordEvent(e, s); }
  void waitEvent(Stream s, Event e) override { t_.waitEvent(s, e); }
  void synchronizeEvent(Event e) override { t_.synchronizeEvent(e); }
  float elapsedMs(Event a, Event b) override { return t_.elapsedMs(a, b); }
  void copy(void* dst, const void* src, size_t bytes, kernels::CopyKind k, Stream s) override {
    t_.copy(dst, src, bytes, k, s);
  }
  void copyRows(void* dst, size_t dp, const void* src, size_t sp, size_t rowBytes, size_t rows,
                kernels::CopyKind k, Stream s) override {
    t_.copyRows(dst, dp, src, sp, rowBytes, rows, k, s);
  }
  void gemm(size_t m, size_t n, size_t k, float alpha, const kernels::GemmInput& a,
            const kernels::GemmInput& b, float beta, const kernels::GemmOutput& c,
            Stream s) override {
    t_.gemm(m, n, k, alpha, a, b, beta, c, s);
  }
  const kernels::TransformerKernels& transformerKernels() override {
    return t_.transformerKernels();
  }
  void attentionForward(const kernels::AttentionShape& s, const float* qkv, float* ctx,
                        float* stats, const kernels::AttentionDropout* dropout) override {
    t_.attentionForward(s, qkv, ctx, stats, dropout);
  }
  void attentionBackward(const kernels::AttentionShape& s, const float* qkv, const float* ctx,
                         const float* stats, const float* dCtx, float* dqkv,
                         const kernels::AttentionDropout* dropout) override {
    t_.attentionBackward(s, qkv, ctx, stats, dCtx, dqkv, dropout);
  }
  void adamStep(float* params, const float* grads, float* m, float* v, size_t count,
                const kernels::AdamStepConstants& constants, const kernels::HalfCopy& copy,
                Stream s) override {
    t_.adamStep(params, grads, m, v, count, constants, copy, s);
  }
  void unscaleGradients(const void* in, DType type, float* out, size_t count, float unscale,
                        uint32_t* overflow, Stream s) override {
    t_.unscaleGradients(in, type, out, count, unscale, overflow, s);
  }

 protected:
  kernels::Accelerator& target() const { return t_; }

 private:
  kernels::Accelerator& t_;
};

}  // namespace ds::test
