// The accelerator interface, as DeepSpeed's accelerator abstraction is for its runtime: the device
// a job computes on (memory, pinned host memory, streams and events, copies, the GEMM, the
// transformer and optimizer kernels, the fp16 overflow check), one backend per DeviceKind. The CPU
// backend is today's kernels, bit for bit (kernels/cpu/cpu_accelerator.h); the CUDA backend
// (kernels/cuda/) exists where the build found nvcc. The communicator stays in runtime/comm; the
// accelerator only names the backend that suits it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "common/device_kind.h"
#include "common/dtype.h"
#include "common/error.h"
#include "kernels/attention.h"
#include "kernels/cpu/adam_kernel.h"
#include "kernels/cpu/cpu_adam.h"
#include "kernels/cpu/transformer_kernels.h"

namespace ds::kernels {

// The device kinds and their choice live in common/ (the launcher decides with them too).
using ds::DeviceKind;
using ds::deviceKindName;
using ds::parseDevice;
using ds::selectDevice;

// Streams and events are handles of the backend; a null stream is the device's default stream.
// The CPU backend runs everything at the call, so its streams order nothing.
struct Stream {
  void* handle = nullptr;
};
struct Event {
  void* handle = nullptr;
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
enum class Transpose { No, Yes };

// A row-major GEMM operand: `data` of `type` (F32 or BF16), rows `ld` elements apart as stored;
// `op` Yes reads the stored matrix transposed.
struct GemmInput {
  const void* data = nullptr;
  DType type = DType::F32;
  size_t ld = 0;
  Transpose op = Transpose::No;
};
struct GemmOutput {
  void* data = nullptr;
  DType type = DType::F32;
  size_t ld = 0;
};

struct DeviceMemoryInfo {
  size_t freeBytes = 0, totalBytes = 0;
};

// The operand types every backend's gemm takes; anything else is a ds::Error naming what was given.
inline void checkGemmTypes(const GemmInput& a, const GemmInput& b, const GemmOutput& c) {
  if (a.type != b.type || (a.type != DType::F32 && a.type != DType::BF16))
    throw Error(std::string("gemm: inputs must be both fp32 or both bf16, got ") +
                dtypeName(a.type) + " and " + dtypeName(b.type));
  if (c.type != DType::F32 && !(c.type == DType::BF16 && a.type == DType::BF16))
    throw Error(std::string("gemm: a ") + dtypeName(c.type) + " output needs " +
                (c.type == DType::BF16 ? "bf16 inputs" : "fp32 or bf16"));
}

class Accelerator {
 public:
  virtual ~Accelerator() = default;

  // The device.
  virtual DeviceKind kind() const = 0;
  virtual std::string deviceName() const = 0;  // e.g. "NVIDIA H100 80GB HBM3 (sm_90)"
  virtual int deviceCount() const = 0;
  virtual void setDevice(int index) = 0;  // the calling thread's device (one rank, one device)
  virtual int currentDevice() const = 0;
  virtual const char* communicationBackend() const = 0;  // "gloo" or "nccl", as DeepSpeed's
  virtual bool supportsBf16() const = 0;
  virtual bool supportsFp16() const = 0;
  // Whether host code may read and write device memory directly (the CPU backend's is host
  // memory). Code that does so must run only where this holds; everything else copies.
  virtual bool hostAccessible() const = 0;

  // Memory: device memory, and host memory the device copies from at full speed (page-locked on
  // CUDA). Both 64-byte aligned at least; release(nullptr) does nothing, and releasing never
  // throws (a device already torn down at exit is not an error worth a terminate).
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* device) noexcept = 0;
  virtual void* allocatePinned(size_t bytes) = 0;
  virtual void releasePinned(void* host) noexcept = 0;
  virtual DeviceMemoryInfo memoryInfo() const = 0;
  virtual void fillZero(void* device, size_t bytes, Stream stream) = 0;

  // Streams and events. Work on one stream runs in order; waitEvent makes `stream` wait for
  // the work recorded into `event` before it, without blocking the host.
  virtual Stream createStream() = 0;
  virtual void destroyStream(Stream stream) noexcept = 0;
  virtual void synchronize(Stream stream) = 0;  // the host waits for the stream's work
  virtual void synchronizeDevice() = 0;         // ... for all the device's work
  // The stream transformerKernels() launch on, per thread (default: the null stream).
  virtual void setCurrentStream(Stream stream) = 0;
  virtual Stream currentStream() const = 0;
  virtual Event createEvent() = 0;
  virtual void destroyEvent(Event event) noexcept = 0;
  virtual void recordEvent(Event event, Stream stream) = 0;
  virtual void waitEvent(Stream stream, Event event) = 0;
  virtual void synchronizeEvent(Event event) = 0;
  virtual float elapsedMs(Event start, Event end) = 0;  // both recorded and complete

  // Copies on a stream; host memory should be pinned for the copy to overlap other work.
  virtual void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream stream) = 0;
  // `rows` runs of rowBytes bytes, dstPitch and srcPitch bytes apart (a strided column block of
  // a row-major matrix, as cudaMemcpy2D).
  virtual void copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch,
                        size_t rowBytes, size_t rows, CopyKind kind, Stream stream) = 0;

  // c[m, n] = alpha * op(a)[m, k] * op(b)[k, n] + beta * c, row-major, accumulated in fp32. a and
  // b are both F32 or both BF16; c is F32, or BF16 with BF16 inputs. beta 0 ignores c's values.
  virtual void gemm(size_t m, size_t n, size_t k, float alpha, const GemmInput& a,
                    const GemmInput& b, float beta, const GemmOutput& c, Stream stream) = 0;

  // The transformer kernels over device pointers (transformer_kernels.h's contracts), launched on
  // currentStream(). A kernel the backend lacks throws ds::Error saying so. crossEntropy returns
  // the loss to the host, so on a device it waits for the stream.
  virtual const TransformerKernels& transformerKernels() = 0;

  // Causal attention without [T, T] storage (kernels/attention.h) over device pointers, on
  // currentStream(): ctx and the softmax statistics (statsSize() floats) from qkv, then dqkv (every
  // column) from dCtx with the forward's outputs. Dropout's sampleBases are host memory; null
  // dropout: none.
  virtual void attentionForward(const AttentionShape& s, const float* qkv, float* ctx,
                                float* stats, const AttentionDropout* dropout) = 0;
  virtual void attentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                                 const float* stats, const float* dCtx, float* dqkv,
                                 const AttentionDropout* dropout) = 0;

  // Adam/AdamW over flat fp32 buffers: adamUpdate's maths (adam_kernel.h), optionally writing the
  // updated params as bf16/fp16 in the same pass (copy.out in device memory).
  virtual void adamStep(float* params, const float* grads, float* m, float* v, size_t count,
                        const AdamStepConstants& constants, const HalfCopy& copy,
                        Stream stream) = 0;

  // The fp16 overflow check and unscale: out[i] = float(in[i]) * unscale for `count` gradients of
  // `type` (F32, BF16 or F16; out may be in for F32), and *overflow = 1 when any in[i] is not
  // finite (it is never cleared here, so several buffers may share one flag; device memory).
  virtual void unscaleGradients(const void* in, DType type, float* out, size_t count, float unscale,
                                uint32_t* overflow, Stream stream) = 0;
};

// kernels::matmul's call in the interface's terms: an fp32 row-major product on the calling
// thread's current stream (transA/transB read the stored a/b transposed; lda/ldb/ldc are the row
// strides as stored). The CPU backend makes exactly that matmul call.
inline void gemmF32(Accelerator& acc, bool transA, bool transB, size_t m, size_t n, size_t k,
                    float alpha, const float* a, size_t lda, const float* b, size_t ldb,
                    float beta, float* c, size_t ldc) {
  acc.gemm(m, n, k, alpha, {a, DType::F32, lda, transA ? Transpose::Yes : Transpose::No},
           {b, DType::F32, ldb, transB ? Transpose::Yes : Transpose::No}, beta,
           {c, DType::F32, ldc}, acc.currentStream());
}

// The backend of `kind`, created on first use. Throws ds::Error when CUDA was not built in, or no
// GPU is visible (saying which, and why).
Accelerator& accelerator(DeviceKind kind);

// Whether accelerator(kind) would succeed; when not, `why` says what accelerator(kind) would throw.
bool acceleratorAvailable(DeviceKind kind, std::string* why = nullptr);

// The backend a training rank computes on: accelerator(kind), its device the rank's share of the
// node's (localRank modulo the devices visible, as DeepSpeed's LOCAL_RANK picks one). With
// DS_DEVICE_MEMORY=guarded a cpu job runs on the guarded CPU backend instead
// (kernels/cpu/guarded_accelerator.h: the same results, and any host code touching device memory
// dies naming it), a debugging aid for code meant to run on a GPU; any other value is an error.
Accelerator& jobAccelerator(DeviceKind kind, int localRank);

// Device memory owned by one accelerator, released when it goes.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Accelerator& acc, size_t bytes)
      : acc_(&acc), data_(bytes ? acc.allocate(bytes) : nullptr), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(acc_, other.acc_);
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (acc_ && data_) acc_->release(data_);
  }

  template <class T = void>
  T* data() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  Accelerator* acc_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace ds::kernels
