// Causal attention on the GPU without [T, T] storage, the CPU's flash attention
// (kernels/cpu/flash_attention.cc) tile for tile: 32 query rows against 32 keys in shared memory,
// an online softmax with one warp per row (a lane per key), the softmax statistics kept per row,
// and a backward that recomputes each tile: one kernel for dK and dV per key tile (the group's
// heads and the query tiles that see it, in order) and one for dQ per query tile. fp32 on the CUDA
// cores, the products as shared-memory loops: correct first, checked against the CPU in
// test/cuda; tensor cores and bf16 come with the device-resident model.
#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_math.h"

namespace ds::kernels::cuda {
namespace {

constexpr int kTile = 32;  // query rows and keys of a tile: one warp lane per key
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr float kMinusInfinity = -__builtin_huge_valf();

// One call's sizes and operands, passed by value to every kernel.
struct Params {
  const float* qkv;
  const float* ctx;  // the forward's output (backward)
  const float* dCtx;
  const float* stats;
  const float* rowDot;  // [samples, heads, T]: dCtx . ctx per row (backward)
  float* out;           // ctx (forward) or dqkv (backward)
  float* statsOut;
  const uint64_t* sampleBases;  // device; null without dropout
  uint64_t firstElement;
  uint32_t threshold;
  float keepScale, scale;
  int T, H, KV, group, d, Q, hq, window;
};

__device__ inline bool sees(const Params& p, int i, int j) {
  return j <= i && i - j <= p.window;
}

// The dropout factor of (sample, head, query i, key j): 0 or 1 / (1 - p); 1 without dropout.
__device__ inline float dropFactor(const Params& p, int b, int head, int i, int j) {
  if (!p.sampleBases) return 1.0f;
  const uint64_t element = p.firstElement + (static_cast<uint64_t>(head) * p.T + i) * p.T + j;
  return math::dropoutValue(1.0f, p.sampleBases[b] + element, p.threshold, p.keepScale);
}

// rows x d floats of `from` (rows `ld` apart) into shared memory, zeros past `valid` rows.
__device__ inline void loadRows(float* to, const float* from, int ld, int rows, int valid, int d) {
  for (int idx = threadIdx.x; idx < rows * d; idx += blockDim.x) {
    const int r = idx / d, e = idx % d;
    to[idx] = r < valid ? from[static_cast<size_t>(r) * ld + e] : 0.0f;
  }
}

// Key tile c0..: its `cols` key rows and value rows of the kv head whose keys start at `key`.
__device__ inline void loadKeyTile(const Params& p, const float* key, int c0, int cols, float* k,
                                   float* v) {
  loadRows(k, key + static_cast<size_t>(c0) * p.Q, p.Q, kTile, cols, p.d);
  loadRows(v, key + p.KV * p.d + static_cast<size_t>(c0) * p.Q, p.Q, kTile, cols, p.d);
}

__device__ inline float dot(const float* a, const float* b, int d) {
  float s = 0.0f;
  for (int e = 0; e < d; ++e) s = math::mulAdd(a[e], b[e], s);
  return s;
}

__device__ inline const float* sampleQkv(const Params& p, int b) {
  return p.qkv + static_cast<size_t>(b) * p.T * p.Q;
}

// grid (query tiles, heads, samples).
__global__ void forwardKernel(Params p) {
  extern __shared__ float shared[];
  const int b = blockIdx.z, head = blockIdx.y, r0 = blockIdx.x * kTile;
  const int rows = min(kTile, p.T - r0), d = p.d;
  float* q = shared;
  float* k = q + kTile * d;
  float* v = k + kTile * d;
  float* o = v + kTile * d;
  float* s = o + kTile * d;
  float* rowMax = s + kTile * kTile;
  float* rowSum = rowMax + kTile;
  float* rescale = rowSum + kTile;
  const float* base = sampleQkv(p, b);
  const float* key = base + p.hq + (head / p.group) * d;
  loadRows(q, base + static_cast<size_t>(r0) * p.Q + head * d, p.Q, kTile, rows, d);
  for (int idx = threadIdx.x; idx < kTile * d; idx += blockDim.x) o[idx] = 0.0f;
  for (int i = threadIdx.x; i < kTile; i += blockDim.x) rowMax[i] = kMinusInfinity, rowSum[i] = 0;
  const int firstKey = r0 > p.window ? r0 - p.window : 0;
  for (int c0 = firstKey / kTile * kTile; c0 < r0 + rows; c0 += kTile) {
    const int cols = min(kTile, p.T - c0);
    __syncthreads();
    loadKeyTile(p, key, c0, cols, k, v);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * kTile; idx += blockDim.x) {
      const int i = idx / kTile, j = idx % kTile;
      s[idx] = i < rows && j < cols && sees(p, r0 + i, c0 + j) ? p.scale * dot(q + i * d, k + j * d, d)
                                                               : kMinusInfinity;
    }
    __syncthreads();
    const int lane = threadIdx.x % kWarpSize;
    for (int i = threadIdx.x / kWarpSize; i < rows; i += kWarps) {
      const float score = s[i * kTile + lane];
      const float m = max(rowMax[i], warpReduce<MaxOp>(score));
      const float e = score == kMinusInfinity ? 0.0f : math::expApprox(score - m);
      const float sum = warpReduce<SumOp>(e);
      const float c = rowMax[i] == kMinusInfinity ? 0.0f : math::expApprox(rowMax[i] - m);
      s[i * kTile + lane] = e * dropFactor(p, b, head, r0 + i, c0 + lane);
      __syncwarp();
      if (lane == 0) rowSum[i] = rowSum[i] * c + sum, rowMax[i] = m, rescale[i] = c;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * d; idx += blockDim.x) {
      const int i = idx / d, e = idx % d;
      float acc = o[idx] * rescale[i];
      for (int j = 0; j < cols; ++j) acc = math::mulAdd(s[i * kTile + j], v[j * d + e], acc);
      o[idx] = acc;
    }
  }
  __syncthreads();
  float* out = p.out + (static_cast<size_t>(b) * p.T + r0) * p.hq + head * d;
  for (int idx = threadIdx.x; idx < rows * d; idx += blockDim.x) {
    const int i = idx / d, e = idx % d;
    out[static_cast<size_t>(i) * p.hq + e] = o[idx] / rowSum[i];
  }
  float* stats = p.statsOut + (static_cast<size_t>(b) * p.H + head) * 2 * p.T;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
    stats[r0 + i] = rowMax[i];
    stats[p.T + r0 + i] = 1.0f / rowSum[i];
  }
}

// rowDot[(b * H + head) * T + i] = dCtx . ctx of that row: one warp per row; grid (rows of a
// sample / warps a block, samples).
__global__ void rowDotKernel(Params p, float* rowDot) {
  const size_t perSample = static_cast<size_t>(p.H) * p.T;
  const size_t within = static_cast<size_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (within >= perSample) return;
  const size_t b = blockIdx.y, i = within % p.T, head = within / p.T;
  const size_t at = (b * p.T + i) * p.hq + head * p.d;
  float sum = 0.0f;
  for (int e = threadIdx.x % kWarpSize; e < p.d; e += kWarpSize)
    sum = math::mulAdd(p.dCtx[at + e], p.ctx[at + e], sum);
  sum = warpReduce<SumOp>(sum);
  if (threadIdx.x % kWarpSize == 0) rowDot[b * perSample + within] = sum;
}

// A recomputed tile in shared memory: P (dropped out where `dropped`) and dS, for query rows
// r0.. (q, dOut, their statistics loaded) against keys c0.. (k, v loaded).
struct TileBuffers {
  float *q, *dOut, *k, *v, *probs, *dropped, *dS, *rowMax, *rowInv, *rowDot;
};

__device__ void recomputeTile(const Params& p, const TileBuffers& t, int b, int head, int r0,
                              int rows, int c0, int cols) {
  const int d = p.d;
  for (int idx = threadIdx.x; idx < kTile * kTile; idx += blockDim.x) {
    const int i = idx / kTile, j = idx % kTile;
    float prob = 0.0f, dProb = 0.0f, factor = 1.0f;
    if (i < rows && j < cols && sees(p, r0 + i, c0 + j)) {
      const float score = p.scale * dot(t.q + i * d, t.k + j * d, d);
      prob = math::expApprox(score - t.rowMax[i]) * t.rowInv[i];
      factor = dropFactor(p, b, head, r0 + i, c0 + j);
      dProb = dot(t.dOut + i * d, t.v + j * d, d) * factor;
    }
    t.probs[idx] = prob;
    t.dropped[idx] = prob * factor;
    t.dS[idx] = prob * (dProb - t.rowDot[i]);
  }
}

// Loads query tile r0's rows of (b, head): q, dOut and the three row statistics.
__device__ void loadQueryTile(const Params& p, const TileBuffers& t, int b, int head, int r0,
                              int rows) {
  const int d = p.d;
  loadRows(t.q, sampleQkv(p, b) + static_cast<size_t>(r0) * p.Q + head * d, p.Q, kTile, rows, d);
  loadRows(t.dOut, p.dCtx + (static_cast<size_t>(b) * p.T + r0) * p.hq + head * d, p.hq, kTile,
           rows, d);
  const size_t statsAt = (static_cast<size_t>(b) * p.H + head) * 2 * p.T + r0;
  const size_t dotAt = (static_cast<size_t>(b) * p.H + head) * p.T + r0;
  for (int i = threadIdx.x; i < kTile; i += blockDim.x) {
    t.rowMax[i] = i < rows ? p.stats[statsAt + i] : 0.0f;
    t.rowInv[i] = i < rows ? p.stats[statsAt + p.T + i] : 0.0f;
    t.rowDot[i] = i < rows ? p.rowDot[dotAt + i] : 0.0f;
  }
}

__device__ TileBuffers carve(float* shared, int d, float** extra) {
  TileBuffers t;
  t.q = shared;
  t.dOut = t.q + kTile * d;
  t.k = t.dOut + kTile * d;
  t.v = t.k + kTile * d;
  t.probs = t.v + kTile * d;
  t.dropped = t.probs + kTile * kTile;
  t.dS = t.dropped + kTile * kTile;
  t.rowMax = t.dS + kTile * kTile;
  t.rowInv = t.rowMax + kTile;
  t.rowDot = t.rowInv + kTile;
  *extra = t.rowDot + kTile;
  return t;
}

// grid (key tiles, kv heads, samples): dK and dV of one key tile.
__global__ void keyValueGradKernel(Params p) {
  extern __shared__ float shared[];
  const int b = blockIdx.z, kvHead = blockIdx.y, c0 = blockIdx.x * kTile, d = p.d;
  const int cols = min(kTile, p.T - c0);
  float* extra;
  const TileBuffers t = carve(shared, d, &extra);
  float* dK = extra;
  float* dV = dK + kTile * d;
  const float* key = sampleQkv(p, b) + p.hq + kvHead * d;
  loadKeyTile(p, key, c0, cols, t.k, t.v);
  for (int idx = threadIdx.x; idx < kTile * d; idx += blockDim.x) dK[idx] = dV[idx] = 0.0f;
  const int lastQuery = min(p.T - 1, c0 + cols - 1 + p.window);
  for (int j = 0; j < p.group; ++j) {
    const int head = kvHead * p.group + j;
    for (int r0 = c0 / kTile * kTile; r0 <= lastQuery; r0 += kTile) {
      const int rows = min(kTile, p.T - r0);
      __syncthreads();
      loadQueryTile(p, t, b, head, r0, rows);
      __syncthreads();
      recomputeTile(p, t, b, head, r0, rows, c0, cols);
      __syncthreads();
      for (int idx = threadIdx.x; idx < cols * d; idx += blockDim.x) {
        const int jj = idx / d, e = idx % d;
        float gv = dV[idx], gk = 0.0f;
        for (int i = 0; i < rows; ++i) {
          gv = math::mulAdd(t.dropped[i * kTile + jj], t.dOut[i * d + e], gv);
          gk = math::mulAdd(t.dS[i * kTile + jj], t.q[i * d + e], gk);
        }
        dV[idx] = gv;
        dK[idx] = math::mulAdd(p.scale, gk, dK[idx]);
      }
    }
  }
  __syncthreads();
  float* out = p.out + static_cast<size_t>(b) * p.T * p.Q + p.hq + kvHead * d;
  for (int idx = threadIdx.x; idx < cols * d; idx += blockDim.x) {
    const size_t at = static_cast<size_t>(c0 + idx / d) * p.Q + idx % d;
    out[at] = dK[idx];
    out[at + static_cast<size_t>(p.KV) * d] = dV[idx];
  }
}

// grid (query tiles, heads, samples): dQ of one query tile.
__global__ void queryGradKernel(Params p) {
  extern __shared__ float shared[];
  const int b = blockIdx.z, head = blockIdx.y, r0 = blockIdx.x * kTile, d = p.d;
  const int rows = min(kTile, p.T - r0);
  float* extra;
  const TileBuffers t = carve(shared, d, &extra);
  float* dQ = extra;
  loadQueryTile(p, t, b, head, r0, rows);
  for (int idx = threadIdx.x; idx < kTile * d; idx += blockDim.x) dQ[idx] = 0.0f;
  const float* key = sampleQkv(p, b) + p.hq + (head / p.group) * d;
  const int firstKey = r0 > p.window ? r0 - p.window : 0;
  for (int c0 = firstKey / kTile * kTile; c0 < r0 + rows; c0 += kTile) {
    const int cols = min(kTile, p.T - c0);
    __syncthreads();
    loadKeyTile(p, key, c0, cols, t.k, t.v);
    __syncthreads();
    recomputeTile(p, t, b, head, r0, rows, c0, cols);
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * d; idx += blockDim.x) {
      const int i = idx / d, e = idx % d;
      float g = 0.0f;
      for (int j = 0; j < cols; ++j) g = math::mulAdd(t.dS[i * kTile + j], t.k[j * d + e], g);
      dQ[idx] = math::mulAdd(p.scale, g, dQ[idx]);
    }
  }
  __syncthreads();
  float* out = p.out + (static_cast<size_t>(b) * p.T + r0) * p.Q + head * d;
  for (int idx = threadIdx.x; idx < rows * d; idx += blockDim.x)
    out[static_cast<size_t>(idx / d) * p.Q + idx % d] = dQ[idx];
}

// Sets `kernel`'s dynamic shared memory to `bytes`, or says why the head is too wide for it.
template <class Kernel>
void allowSharedMemory(Kernel kernel, size_t bytes, const AttentionShape& s) {
  int device = 0, limit = 0;
  DS_CUDA_CHECK(cudaGetDevice(&device));
  DS_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(limit))
    throw Error("cuda attention: heads of " + std::to_string(s.headDim) + " need " +
                std::to_string(bytes) + " bytes of shared memory a block; this GPU has " +
                std::to_string(limit));
  DS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// The dropout's per-sample bases on the device for one call (freed on the stream after it).
class DeviceBases {
 public:
  DeviceBases(const AttentionShape& s, const AttentionDropout* dropout, cudaStream_t stream)
      : stream_(stream) {
    if (!dropout) return;
    const size_t bytes = s.samples * sizeof(uint64_t);
    DS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&bases_), bytes, stream));
    DS_CUDA_CHECK(
        cudaMemcpyAsync(bases_, dropout->sampleBases, bytes, cudaMemcpyHostToDevice, stream));
  }
  ~DeviceBases() {
    if (bases_) cudaFreeAsync(bases_, stream_);
  }
  DeviceBases(const DeviceBases&) = delete;
  DeviceBases& operator=(const DeviceBases&) = delete;
  void fill(Params& p, const AttentionDropout* dropout) const {
    if (!dropout) return;
    p.sampleBases = bases_;
    p.firstElement = dropout->firstElement;
    p.threshold = dropout->threshold;
    p.keepScale = dropout->keepScale;
  }

 private:
  cudaStream_t stream_;
  uint64_t* bases_ = nullptr;
};

// One call's sizes, and its dropout with the bases already on the device.
Params paramsOf(const AttentionShape& s, const DeviceBases& bases,
                const AttentionDropout* dropout) {
  if (s.kvHeads == 0 || s.heads % s.kvHeads != 0)
    throw Error("cuda attention: " + std::to_string(s.heads) + " heads do not divide into " +
                std::to_string(s.kvHeads) + " key/value heads");
  Params p{};
  p.T = static_cast<int>(s.seq);
  p.H = static_cast<int>(s.heads);
  p.KV = static_cast<int>(s.kvHeads);
  p.group = p.H / p.KV;
  p.d = static_cast<int>(s.headDim);
  p.Q = static_cast<int>(s.qkvStride());
  p.hq = static_cast<int>(s.ctxStride());
  p.window = static_cast<int>(std::min(s.window, s.seq));
  p.scale = 1.0f / std::sqrt(static_cast<float>(s.headDim));
  bases.fill(p, dropout);
  return p;
}

unsigned tiles(size_t n) { return static_cast<unsigned>((n + kTile - 1) / kTile); }

}  // namespace

void attentionForward(const AttentionShape& s, const float* qkv, float* ctx, float* stats,
                      const AttentionDropout* dropout, cudaStream_t stream) {
  if (s.samples == 0 || s.seq == 0) return;
  const DeviceBases bases(s, dropout, stream);
  Params p = paramsOf(s, bases, dropout);
  p.qkv = qkv;
  p.out = ctx;
  p.statsOut = stats;
  const size_t bytes = (4 * kTile * s.headDim + kTile * kTile + 3 * kTile) * sizeof(float);
  allowSharedMemory(forwardKernel, bytes, s);
  const dim3 grid(tiles(s.seq), static_cast<unsigned>(s.heads), static_cast<unsigned>(s.samples));
  forwardKernel<<<grid, kThreads, bytes, stream>>>(p);
  DS_CUDA_CHECK_LAUNCH();
}

void attentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                       const float* stats, const float* dCtx, float* dqkv,
                       const AttentionDropout* dropout, cudaStream_t stream) {
  if (s.samples == 0 || s.seq == 0) return;
  const DeviceBases bases(s, dropout, stream);
  Params p = paramsOf(s, bases, dropout);
  p.qkv = qkv;
  p.ctx = ctx;
  p.dCtx = dCtx;
  p.stats = stats;
  p.out = dqkv;
  float* rowDot = nullptr;
  const size_t rows = s.samples * s.heads * s.seq;
  DS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&rowDot), rows * sizeof(float), stream));
  p.rowDot = rowDot;
  rowDotKernel<<<dim3(static_cast<unsigned>((s.heads * s.seq + kWarps - 1) / kWarps),
                      static_cast<unsigned>(s.samples)),
                 kThreads, 0, stream>>>(p, rowDot);
  DS_CUDA_CHECK_LAUNCH();
  // Shared memory: q, dOut, k, v and the tile's three [32, 32] buffers and row statistics, plus
  // dK and dV (or dQ).
  const size_t tileBytes = (4 * kTile * s.headDim + 3 * kTile * kTile + 3 * kTile) * sizeof(float);
  const size_t keyValueBytes = tileBytes + 2 * kTile * s.headDim * sizeof(float),
               queryBytes = tileBytes + kTile * s.headDim * sizeof(float);
  allowSharedMemory(keyValueGradKernel, keyValueBytes, s);
  allowSharedMemory(queryGradKernel, queryBytes, s);
  const unsigned samples = static_cast<unsigned>(s.samples);
  keyValueGradKernel<<<dim3(tiles(s.seq), static_cast<unsigned>(s.kvHeads), samples), kThreads,
                       keyValueBytes, stream>>>(p);
  DS_CUDA_CHECK_LAUNCH();
  queryGradKernel<<<dim3(tiles(s.seq), static_cast<unsigned>(s.heads), samples), kThreads,
                    queryBytes, stream>>>(p);
  DS_CUDA_CHECK_LAUNCH();
  DS_CUDA_CHECK(cudaFreeAsync(rowDot, stream));
}

}  // namespace ds::kernels::cuda
