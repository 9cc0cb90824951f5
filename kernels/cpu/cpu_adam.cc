// cpuAdamStep: picks the instruction-set path, splits [0, count) into one chunk per thread on whole
// cache lines, and runs the chunks on the kernels' threads (runOnKernelThreads). The maths lives in
// the paths.
#include "kernels/cpu/cpu_adam.h"

#include <cstdlib>
#include <string>
#include <thread>

#include "common/error.h"
#include "kernels/cpu/adam_paths.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/kernel_threads.h"

namespace ds::kernels {
namespace {

// Chunk edges fall on multiples of 32 elements from a 128-byte aligned params address: whole
// 64-byte lines of every fp32 array (allocated alike) and of the half copy, so threads never write
// the same line.
constexpr size_t kGrainElements = 32;
constexpr uintptr_t kGrainBytes = kGrainElements * sizeof(float);
// Waking a parked worker costs some microseconds; below this many elements per thread it does not
// pay (16K elements move 448 KB, about 40 us at this machine's per-core bandwidth).
constexpr size_t kMinElementsPerThread = size_t{1} << 14;

using AdamPath = void (*)(float*, const float*, float*, float*, size_t, const AdamStepConstants&,
                          uint16_t*, HalfFormat);

AdamPath pathFor(AdamSimd simd) {
  switch (simd) {
    case AdamSimd::Avx512:
      return detail::adamAvx512Path;
    case AdamSimd::Avx2:
      return detail::adamAvx2Path;
    case AdamSimd::Scalar:
      break;
  }
  return detail::adamScalarPath;
}

}  // namespace

bool adamSimdSupported(AdamSimd simd) {
  switch (simd) {
    case AdamSimd::Scalar:
      return true;
    case AdamSimd::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case AdamSimd::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

AdamSimd bestAdamSimd() {
  static const AdamSimd best = adamSimdSupported(AdamSimd::Avx512) ? AdamSimd::Avx512
                               : adamSimdSupported(AdamSimd::Avx2) ? AdamSimd::Avx2
                                                                   : AdamSimd::Scalar;
  return best;
}

const char* adamSimdName(AdamSimd simd) {
  switch (simd) {
    case AdamSimd::Scalar:
      return "scalar";
    case AdamSimd::Avx2:
      return "avx2";
    case AdamSimd::Avx512:
      return "avx512";
  }
  return "unknown";
}

namespace detail {

void adamScalarPath(float* params, const float* grads, float* m, float* v, size_t count,
                    const AdamStepConstants& c, uint16_t* half, HalfFormat format) {
  if (half == nullptr || format == HalfFormat::None)
    return adamUpdate(params, grads, m, v, count, c);
  // Convert each block while it is still in L1, so the copy costs no second pass over memory.
  constexpr size_t kBlock = 1024;
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t n = count - begin < kBlock ? count - begin : kBlock;
    adamUpdate(params + begin, grads + begin, m + begin, v + begin, n, c);
    if (format == HalfFormat::Bf16)
      floatToBf16(params + begin, half + begin, n);
    else
      floatToFp16(params + begin, half + begin, n);
  }
}

}  // namespace detail

void cpuAdamStep(float* params, const float* grads, float* m, float* v, size_t count,
                 const AdamStepConstants& c, const HalfCopy& copy, int threads, AdamSimd simd) {
  if (!adamSimdSupported(simd))
    throw Error(std::string("cpuAdamStep: the ") + adamSimdName(simd) +
                " path needs instructions this CPU lacks; pass bestAdamSimd() (here " +
                adamSimdName(bestAdamSimd()) + ")");
  if (copy.out != nullptr && copy.format == HalfFormat::None)
    throw Error(
        "cpuAdamStep: HalfCopy.out is set but HalfCopy.format is None; set Bf16 or Fp16, or "
        "leave out null for no copy");
  const AdamPath path = pathFor(simd);
  uint16_t* half = copy.out;

  if (threads <= 0) threads = kernelThreads();
  size_t parts = count / kMinElementsPerThread;
  if (parts > static_cast<size_t>(threads)) parts = threads;
  if (parts <= 1) return path(params, grads, m, v, count, c, half, copy.format);

  const uintptr_t address = reinterpret_cast<uintptr_t>(params);
  const size_t lead = address % sizeof(float) == 0
                          ? (kGrainBytes - address % kGrainBytes) % kGrainBytes / sizeof(float)
                          : 0;
  const size_t rest = count - lead;  // count > lead: count >= 2 * kMinElementsPerThread here
  auto edge = [&](size_t k) {
    if (k == 0) return size_t{0};
    if (k == parts) return count;
    return lead + rest * k / parts / kGrainElements * kGrainElements;
  };
  runOnKernelThreads(static_cast<int>(parts), [&](int part) {
    const size_t begin = edge(part), end = edge(part + 1);
    path(params + begin, grads + begin, m + begin, v + begin, end - begin, c,
         half == nullptr ? nullptr : half + begin, copy.format);
  });
}

}  // namespace ds::kernels
