// CudaAccelerator: device memory, pinned host memory, streams, events and copies through the CUDA
// runtime; the GEMM through cuBLASLt (cublaslt_gemm.cc); the transformer and optimizer kernels
// through cuda_kernels.h. The kernels the GPU path does not use yet throw, naming themselves.
#include "kernels/cuda/cuda_accelerator.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace ds::kernels::cuda {

void throwCudaError(cudaError_t status, const char* call, const char* file, int line) {
  std::string where = file;
  const auto at = where.rfind("kernels/cuda/");
  if (at != std::string::npos) where = where.substr(at);
  throw Error(where + ":" + std::to_string(line) + ": " + call + ": " + cudaGetErrorString(status) +
              " (" + cudaGetErrorName(status) + ")");
}

namespace {

cudaStream_t cudaStream(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }
cudaEvent_t cudaEvent(Event event) { return static_cast<cudaEvent_t>(event.handle); }

thread_local Stream tCurrentStream{};
cudaStream_t current() { return cudaStream(tCurrentStream); }

std::string gib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return text;
}

// The transformer-kernel table: host functions launching on the thread's current stream.
void layerNormForward(float* out, float* mean, float* rstd, const float* x, const float* w,
                      const float* b, size_t rows, size_t dim, float eps) {
  cuda::layerNormForward(out, mean, rstd, x, w, b, rows, dim, eps, current());
}
void layerNormBackward(float* dx, float* dw, float* db, const float* dout, const float* x,
                       const float* mean, const float* rstd, const float* w, size_t rows,
                       size_t dim) {
  cuda::layerNormBackward(dx, dw, db, dout, x, mean, rstd, w, rows, dim, current());
}
void rmsNormForward(float* out, float* norm, const float* x, const float* w, size_t rows,
                    size_t dim, float eps) {
  cuda::rmsNormForward(out, norm, x, w, rows, dim, eps, current());
}
void rmsNormBackward(float* dx, float* dw, const float* dout, const float* x, const float* norm,
                     const float* w, size_t rows, size_t dim, float /*eps: inside norm*/) {
  cuda::rmsNormBackward(dx, dw, dout, x, norm, w, rows, dim, current());
}
void unitForward(Unit f, float* out, const float* in, size_t n) {
  cuda::unitForward(f, out, in, n, current());
}
void unitBackward(Unit f, float* din, const float* dout, const float* in, size_t n) {
  cuda::unitBackward(f, din, dout, in, n, current());
}
void gatedForward(Unit f, float* out, const float* in, size_t rows, size_t ff) {
  cuda::gatedForward(f, out, in, rows, ff, current());
}
void gatedBackward(Unit f, float* din, const float* dout, const float* in, size_t rows, size_t ff) {
  cuda::gatedBackward(f, din, dout, in, rows, ff, current());
}
void rotary(float* x, size_t rows, size_t seq, size_t heads, size_t headDim, size_t stride,
            size_t rotDim, const float* cos, const float* sin, bool inverse) {
  cuda::rotary(x, rows, seq, heads, headDim, stride, rotDim, cos, sin, inverse, current());
}
double crossEntropy(float* logits, const int32_t* targets, size_t rows, size_t vocab,
                    float gradScale) {
  if (rows == 0) return 0.0;
  const cudaStream_t stream = current();
  double* losses = nullptr;
  DS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&losses), rows * sizeof(double), stream));
  std::vector<double> host(rows);
  cuda::crossEntropy(logits, targets, rows, vocab, gradScale, losses, stream);
  DS_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), losses, rows * sizeof(double), cudaMemcpyDeviceToHost, stream));
  DS_CUDA_CHECK(cudaFreeAsync(losses, stream));
  DS_CUDA_CHECK(cudaStreamSynchronize(stream));
  double total = 0.0;
  for (double loss : host) total += loss;  // in row order, as the CPU kernel adds them
  return total;
}
void embeddingForward(float* out, const int32_t* ids, const float* table, const float* pos,
                      size_t rows, size_t seq, size_t dim) {
  cuda::embeddingForward(out, ids, table, pos, rows, seq, dim, current());
}
void embeddingBackward(float* dtable, float* dpos, const int32_t* ids, const float* dout,
                       size_t rows, size_t seq, size_t dim) {
  cuda::embeddingBackward(dtable, dpos, ids, dout, rows, seq, dim, current());
}
void addBias(float* out, const float* bias, size_t rows, size_t dim) {
  cuda::addBias(out, bias, rows, dim, current());
}
void biasGradient(float* dbias, const float* dout, size_t rows, size_t dim) {
  cuda::biasGradient(dbias, dout, rows, dim, current());
}
void add(float* y, const float* x, size_t n) { cuda::add(y, x, n, current()); }
void dropout(const float* in, float* out, size_t n, uint64_t base, uint64_t first,
             uint32_t threshold, float keepScale) {
  cuda::dropout(in, out, n, base, first, threshold, keepScale, current());
}

// Not on the GPU: the [T, T] softmax and flash attention's CPU tiles (attentionForward/Backward
// are whole kernels there); not yet: ScaleNorm and parameter initialisation (the model draws
// initial values on the host).
[[noreturn]] void missing(const char* kernel) {
  throw Error(std::string("cuda accelerator: ") + kernel +
              " is not on the GPU yet (issue 47); the cpu device has it");
}
void scaleNormForward(float*, float*, const float*, float, size_t, size_t, float) {
  missing("scaleNormForward");
}
void scaleNormBackward(float*, float*, const float*, const float*, const float*, float, size_t,
                       size_t, float) {
  missing("scaleNormBackward");
}
void causalSoftmaxForward(float*, size_t, size_t) { missing("causalSoftmaxForward"); }
void softmaxBackward(float*, const float*, size_t) { missing("softmaxBackward"); }
void attentionTileSoftmax(float*, size_t, size_t, size_t, size_t, size_t, size_t, float*, float*,
                          float*, size_t, size_t) {
  missing("attentionTileSoftmax");
}
void attentionRowsFinish(float*, size_t, size_t, size_t, float*) {
  missing("attentionRowsFinish");
}
void attentionTileProbs(float*, size_t, size_t, size_t, size_t, size_t, size_t, const float*,
                        const float*) {
  missing("attentionTileProbs");
}
void attentionTileScoreGrad(float*, const float*, size_t, size_t, size_t, const float*) {
  missing("attentionTileScoreGrad");
}
void rowDots(float*, const float*, size_t, const float*, size_t, size_t, size_t) {
  missing("rowDots");
}
void normalFromDraws(float*, size_t, const uint64_t*, float) { missing("normalFromDraws"); }
void normalFromPhilox(float*, size_t, uint64_t, uint64_t, uint64_t, float) {
  missing("normalFromPhilox");
}

// Each entry named: several are only the throwing placeholders above, so the order cannot hide a
// slip.
constexpr TransformerKernels kTable = {
    .layerNormForward = layerNormForward,
    .layerNormBackward = layerNormBackward,
    .rmsNormForward = rmsNormForward,
    .rmsNormBackward = rmsNormBackward,
    .unitForward = unitForward,
    .unitBackward = unitBackward,
    .gatedForward = gatedForward,
    .gatedBackward = gatedBackward,
    .scaleNormForward = scaleNormForward,
    .scaleNormBackward = scaleNormBackward,
    .causalSoftmaxForward = causalSoftmaxForward,
    .softmaxBackward = softmaxBackward,
    .attentionTileSoftmax = attentionTileSoftmax,
    .attentionRowsFinish = attentionRowsFinish,
    .attentionTileProbs = attentionTileProbs,
    .attentionTileScoreGrad = attentionTileScoreGrad,
    .rowDots = rowDots,
    .rotary = rotary,
    .crossEntropy = crossEntropy,
    .embeddingForward = embeddingForward,
    .embeddingBackward = embeddingBackward,
    .addBias = addBias,
    .biasGradient = biasGradient,
    .add = add,
    .dropout = dropout,
    .normalFromDraws = normalFromDraws,
    .normalFromPhilox = normalFromPhilox,
};

cudaMemcpyKind memcpyKind(CopyKind kind) {
  return kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
         : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                          : cudaMemcpyDeviceToDevice;
}

class CudaAccelerator final : public Accelerator {
 public:
  DeviceKind kind() const override { return DeviceKind::Cuda; }
  std::string deviceName() const override {
    cudaDeviceProp p{};
    DS_CUDA_CHECK(cudaGetDeviceProperties(&p, currentDevice()));
    return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) +
           ", " + gib(p.totalGlobalMem) + ")";
  }
  int deviceCount() const override {
    int count = 0;
    DS_CUDA_CHECK(cudaGetDeviceCount(&count));
    return count;
  }
  void setDevice(int index) override {
    const int count = deviceCount();
    if (index < 0 || index >= count)
      throw Error("cuda accelerator: device " + std::to_string(index) + " does not exist (" +
                  std::to_string(count) + " visible)");
    DS_CUDA_CHECK(cudaSetDevice(index));
  }
  int currentDevice() const override {
    int device = 0;
    DS_CUDA_CHECK(cudaGetDevice(&device));
    return device;
  }
  const char* communicationBackend() const override { return "nccl"; }
  bool supportsBf16() const override {
    int major = 0;
    DS_CUDA_CHECK(
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, currentDevice()));
    return major >= 8;  // bf16 tensor cores from Ampere on
  }
  bool supportsFp16() const override { return true; }
  bool hostAccessible() const override { return false; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes ? bytes : 1);
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear it: an allocation failure leaves the context usable
      const DeviceMemoryInfo info = memoryInfo();
      throw Error("cuda accelerator: cannot allocate " + gib(bytes) + " on device " +
                  std::to_string(currentDevice()) + " (" + gib(info.freeBytes) + " free of " +
                  gib(info.totalBytes) + "): " + cudaGetErrorString(status));
    }
    return p;
  }
  void release(void* device) noexcept override {
    if (device) cudaFree(device);
  }
  void* allocatePinned(size_t bytes) override {
    void* p = nullptr;
    DS_CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
    return p;
  }
  void releasePinned(void* host) noexcept override {
    if (host) cudaFreeHost(host);
  }
  DeviceMemoryInfo memoryInfo() const override {
    DeviceMemoryInfo info;
    DS_CUDA_CHECK(cudaMemGetInfo(&info.freeBytes, &info.totalBytes));
    return info;
  }
  void fillZero(void* device, size_t bytes, Stream stream) override {
    if (bytes) DS_CUDA_CHECK(cudaMemsetAsync(device, 0, bytes, cudaStream(stream)));
  }

  Stream createStream() override {
    cudaStream_t s = nullptr;
    // Non-blocking: the legacy default stream must not serialise it with every other stream.
    DS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return {s};
  }
  void destroyStream(Stream stream) noexcept override {
    if (!stream.handle) return;
    cudaStreamSynchronize(cudaStream(stream));  // its GEMMs may still use their workspace
    forgetGemmStream(cudaStream(stream));
    cudaStreamDestroy(cudaStream(stream));
  }
  void synchronize(Stream stream) override {
    DS_CUDA_CHECK(cudaStreamSynchronize(cudaStream(stream)));
  }
  void synchronizeDevice() override { DS_CUDA_CHECK(cudaDeviceSynchronize()); }
  void setCurrentStream(Stream stream) override { tCurrentStream = stream; }
  Stream currentStream() const override { return tCurrentStream; }
  Event createEvent() override {
    cudaEvent_t e = nullptr;
    DS_CUDA_CHECK(cudaEventCreate(&e));
    return {e};
  }
  void destroyEvent(Event event) noexcept override {
    if (event.handle) cudaEventDestroy(cudaEvent(event));
  }
  void recordEvent(Event event, Stream stream) override {
    DS_CUDA_CHECK(cudaEventRecord(cudaEvent(event), cudaStream(stream)));
  }
  void waitEvent(Stream stream, Event event) override {
    DS_CUDA_CHECK(cudaStreamWaitEvent(cudaStream(stream), cudaEvent(event), 0));
  }
  void synchronizeEvent(Event event) override {
    DS_CUDA_CHECK(cudaEventSynchronize(cudaEvent(event)));
  }
  float elapsedMs(Event start, Event end) override {
    float ms = 0.0f;
    DS_CUDA_CHECK(cudaEventElapsedTime(&ms, cudaEvent(start), cudaEvent(end)));
    return ms;
  }

  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream stream) override {
    if (bytes == 0) return;
    DS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, memcpyKind(kind), cudaStream(stream)));
  }
  void copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t rowBytes,
                size_t rows, CopyKind kind, Stream stream) override {
    if (rowBytes == 0 || rows == 0) return;
    DS_CUDA_CHECK(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, rowBytes, rows, memcpyKind(kind),
                                    cudaStream(stream)));
  }

  void gemm(size_t m, size_t n, size_t k, float alpha, const GemmInput& a, const GemmInput& b,
            float beta, const GemmOutput& c, Stream stream) override {
    cublasLtGemm(m, n, k, alpha, a, b, beta, c, cudaStream(stream));
  }

  const TransformerKernels& transformerKernels() override { return kTable; }

  void attentionForward(const AttentionShape& s, const float* qkv, float* ctx, float* stats,
                        const AttentionDropout* dropout) override {
    cuda::attentionForward(s, qkv, ctx, stats, dropout, current());
  }
  void attentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                         const float* stats, const float* dCtx, float* dqkv,
                         const AttentionDropout* dropout) override {
    cuda::attentionBackward(s, qkv, ctx, stats, dCtx, dqkv, dropout, current());
  }

  void adamStep(float* params, const float* grads, float* m, float* v, size_t count,
                const AdamStepConstants& constants, const HalfCopy& copy, Stream stream) override {
    cuda::adamStep(params, grads, m, v, count, constants, copy, cudaStream(stream));
  }

  void unscaleGradients(const void* in, DType type, float* out, size_t count, float unscale,
                        uint32_t* overflow, Stream stream) override {
    cuda::unscaleGradients(in, type, out, count, unscale, overflow, cudaStream(stream));
  }
};

}  // namespace

std::string unavailableReason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      cudaGetLastError();
      return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status) + " (" +
             cudaGetErrorName(status) + ")";
    }
    if (count == 0) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      return std::string("cudaGetDeviceCount found no device") +
             (visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : std::string());
    }
    return std::string();
  }();
  return reason;
}

Accelerator& cudaAccelerator() {
  const std::string why = unavailableReason();
  if (!why.empty()) throw Error("device cuda: no GPU visible: " + why);
  static CudaAccelerator instance;
  return instance;
}

}  // namespace ds::kernels::cuda
