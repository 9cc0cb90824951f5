// CpuAccelerator: the accelerator interface over the CPU kernels. Memory is 64-byte aligned host
// memory (pinned memory is the same: nothing to pin for); GEMMs in bf16 widen their inputs to fp32
// first, so bf16 costs a copy here and buys nothing but the interface.
#include "kernels/cpu/cpu_accelerator.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "common/memory_budget.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/matmul.h"

namespace ds::kernels {
namespace {

constexpr size_t kAlignment = 64;

void* alignedAllocate(size_t bytes, const char* what) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
  if (!p)
    throw Error(std::string("cpu accelerator: cannot allocate ") + humanBytes(bytes) + " of " +
                what);
  return p;
}

struct CpuEvent {
  std::chrono::steady_clock::time_point at{};
};

// The stored matrix of a bf16 operand widened to fp32 with the same row stride.
std::vector<float> widened(const GemmInput& x, size_t rows, size_t cols) {
  std::vector<float> out(rows == 0 ? 0 : (rows - 1) * x.ld + cols);
  bf16ToFloat(static_cast<const uint16_t*>(x.data), out.data(), out.size());
  return out;
}

class CpuAccelerator final : public Accelerator {
 public:
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string deviceName() const override {
    return std::string("cpu (") + kernelIsaName(bestKernelIsa()) + " kernels, " + matmulLibrary() +
           ")";
  }
  int deviceCount() const override { return 1; }
  void setDevice(int index) override {
    if (index != 0)
      throw Error("cpu accelerator: device " + std::to_string(index) + " does not exist (only 0)");
  }
  int currentDevice() const override { return 0; }
  const char* communicationBackend() const override { return "gloo"; }
  bool supportsBf16() const override { return true; }
  bool supportsFp16() const override { return true; }
  bool hostAccessible() const override { return true; }

  void* allocate(size_t bytes) override { return alignedAllocate(bytes, "device memory"); }
  void release(void* device) noexcept override { std::free(device); }
  void* allocatePinned(size_t bytes) override { return alignedAllocate(bytes, "pinned memory"); }
  void releasePinned(void* host) noexcept override { std::free(host); }
  DeviceMemoryInfo memoryInfo() const override {
    DeviceMemoryInfo info;
    info.freeBytes = memoryBudget().availableBytes;
    info.totalBytes =
        static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return info;
  }
  void fillZero(void* device, size_t bytes, Stream) override { std::memset(device, 0, bytes); }

  Stream createStream() override { return {}; }
  void destroyStream(Stream) noexcept override {}
  void synchronize(Stream) override {}
  void synchronizeDevice() override {}
  void setCurrentStream(Stream stream) override { current_ = stream; }
  Stream currentStream() const override { return current_; }
  Event createEvent() override { return {new CpuEvent}; }
  void destroyEvent(Event event) noexcept override { delete static_cast<CpuEvent*>(event.handle); }
  void recordEvent(Event event, Stream) override {
    static_cast<CpuEvent*>(event.handle)->at = std::chrono::steady_clock::now();
  }
  void waitEvent(Stream, Event) override {}
  void synchronizeEvent(Event) override {}
  float elapsedMs(Event start, Event end) override {
    const auto d =
        static_cast<CpuEvent*>(end.handle)->at - static_cast<CpuEvent*>(start.handle)->at;
    return std::chrono::duration<float, std::milli>(d).count();
  }

  void copy(void* dst, const void* src, size_t bytes, CopyKind, Stream) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t rowBytes,
                size_t rows, CopyKind, Stream) override {
    if (rowBytes == 0) return;
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dstPitch,
                  static_cast<const char*>(src) + r * srcPitch, rowBytes);
  }

  void gemm(size_t m, size_t n, size_t k, float alpha, const GemmInput& a, const GemmInput& b,
            float beta, const GemmOutput& c, Stream) override;

  const TransformerKernels& transformerKernels() override {
    return ds::kernels::transformerKernels();
  }

  void attentionForward(const AttentionShape& s, const float* qkv, float* ctx, float* stats,
                        const AttentionDropout* dropout) override {
    flashAttentionForward(transformerKernels(), s, qkv, ctx, stats, dropout);
  }
  void attentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                         const float* stats, const float* dCtx, float* dqkv,
                         const AttentionDropout* dropout) override {
    flashAttentionBackward(transformerKernels(), s, qkv, ctx, stats, dCtx, dqkv, dropout);
  }

  void adamStep(float* params, const float* grads, float* m, float* v, size_t count,
                const AdamStepConstants& constants, const HalfCopy& copy, Stream) override {
    cpuAdamStep(params, grads, m, v, count, constants, copy);
  }

  void unscaleGradients(const void* in, DType type, float* out, size_t count, float unscale,
                        uint32_t* overflow, Stream) override;

 private:
  static thread_local Stream current_;
};

thread_local Stream CpuAccelerator::current_{};

void CpuAccelerator::gemm(size_t m, size_t n, size_t k, float alpha, const GemmInput& a,
                          const GemmInput& b, float beta, const GemmOutput& c, Stream) {
  checkGemmTypes(a, b, c);
  const bool ta = a.op == Transpose::Yes, tb = b.op == Transpose::Yes;
  if (a.type == DType::F32 && c.type == DType::F32) {  // today's call, unchanged
    matmul(ta, tb, m, n, k, alpha, static_cast<const float*>(a.data), a.ld,
           static_cast<const float*>(b.data), b.ld, beta, static_cast<float*>(c.data), c.ld);
    return;
  }
  std::vector<float> a32, b32;
  const float* pa = static_cast<const float*>(a.data);
  const float* pb = static_cast<const float*>(b.data);
  if (a.type == DType::BF16) {
    a32 = widened(a, ta ? k : m, ta ? m : k);
    b32 = widened(b, tb ? n : k, tb ? k : n);
    pa = a32.data();
    pb = b32.data();
  }
  if (c.type == DType::F32) {
    matmul(ta, tb, m, n, k, alpha, pa, a.ld, pb, b.ld, beta, static_cast<float*>(c.data), c.ld);
    return;
  }
  // bf16 output: the product in fp32, rounded once.
  std::vector<float> c32(m * n, 0.0f);
  auto* cb = static_cast<uint16_t*>(c.data);
  if (beta != 0.0f)
    for (size_t r = 0; r < m; ++r) bf16ToFloat(cb + r * c.ld, c32.data() + r * n, n);
  matmul(ta, tb, m, n, k, alpha, pa, a.ld, pb, b.ld, beta, c32.data(), n);
  for (size_t r = 0; r < m; ++r) floatToBf16(c32.data() + r * n, cb + r * c.ld, n);
}

void CpuAccelerator::unscaleGradients(const void* in, DType type, float* out, size_t count,
                                      float unscale, uint32_t* overflow, Stream) {
  bool bad = false;
  switch (type) {
    case DType::F32: {
      const auto* x = static_cast<const float*>(in);
      for (size_t i = 0; i < count; ++i) {
        bad = bad || !std::isfinite(x[i]);
        out[i] = x[i] * unscale;
      }
      break;
    }
    case DType::BF16: {
      const auto* x = static_cast<const uint16_t*>(in);
      for (size_t i = 0; i < count; ++i) {
        const float v = bf16ToFloat(x[i]);
        bad = bad || !std::isfinite(v);
        out[i] = v * unscale;
      }
      break;
    }
    case DType::F16: {
      const auto* x = static_cast<const uint16_t*>(in);
      for (size_t i = 0; i < count; ++i) {
        const float v = fp16ToFloat(x[i]);
        bad = bad || !std::isfinite(v);
        out[i] = v * unscale;
      }
      break;
    }
  }
  if (bad) *overflow = 1;
}

}  // namespace

Accelerator& cpuAccelerator() {
  static CpuAccelerator instance;
  return instance;
}

}  // namespace ds::kernels
