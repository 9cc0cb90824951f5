// fp32 runs straight over the arrays (vectorised by the compiler); bf16 goes through the fused
// kernel (kernels/cpu/bf16_reduce.h); fp16 through an fp32 accumulator of one block that stays in
// L1.
#include "runtime/comm/elementwise_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16_reduce.h"
#include "kernels/cpu/half_convert.h"

namespace ds::runtime {
namespace {

void combine(float* acc, const float* in, size_t count, ReduceOp op) {
  if (op == ReduceOp::Max)
    for (size_t i = 0; i < count; ++i) acc[i] = std::max(acc[i], in[i]);
  else
    for (size_t i = 0; i < count; ++i) acc[i] += in[i];
}

void reduceFloat(float* out, const void* const* inputs, int n, size_t count, ReduceOp op,
                 int ranks) {
  const float* first = static_cast<const float*>(inputs[0]);
  if (n == 1) {
    if (out != first) std::memmove(out, first, count * sizeof(float));
  } else {
    const float* second = static_cast<const float*>(inputs[1]);
    if (op == ReduceOp::Max)
      for (size_t i = 0; i < count; ++i) out[i] = std::max(first[i], second[i]);
    else
      for (size_t i = 0; i < count; ++i) out[i] = first[i] + second[i];
    for (int k = 2; k < n; ++k) combine(out, static_cast<const float*>(inputs[k]), count, op);
  }
  if (op == ReduceOp::Avg) scaleElements(out, count, DType::F32, 1.0f / static_cast<float>(ranks));
}

kernels::Bf16ReduceOp bf16Op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Avg:
      return kernels::Bf16ReduceOp::Avg;
    case ReduceOp::Max:
      return kernels::Bf16ReduceOp::Max;
    case ReduceOp::Sum:
      break;
  }
  return kernels::Bf16ReduceOp::Sum;
}

}  // namespace

void toFloat(const void* in, float* out, size_t count, DType dtype) {
  const auto* half = static_cast<const uint16_t*>(in);
  switch (dtype) {
    case DType::F32:
      if (in != out) std::memmove(out, in, count * sizeof(float));
      return;
    case DType::BF16:
      return kernels::bf16ToFloat(half, out, count);
    case DType::F16:
      return kernels::fp16ToFloat(half, out, count);
  }
}

void fromFloat(const float* in, void* out, size_t count, DType dtype) {
  auto* half = static_cast<uint16_t*>(out);
  switch (dtype) {
    case DType::F32:
      if (in != out) std::memmove(out, in, count * sizeof(float));
      return;
    case DType::BF16:
      return kernels::floatToBf16(in, half, count);
    case DType::F16:
      return kernels::floatToFp16(in, half, count);
  }
}

void reduceElements(void* out, const void* const* inputs, int n, size_t count, DType dtype,
                    ReduceOp op, int ranks) {
  if (count == 0 || n < 1) return;
  if (dtype == DType::F32)
    return reduceFloat(static_cast<float*>(out), inputs, n, count, op, ranks);
  const float scale = op == ReduceOp::Avg ? 1.0f / static_cast<float>(ranks) : 1.0f;
  if (dtype == DType::BF16) {
    // Typed copies of the pointers rather than a cast of the array (no aliasing of void* slots).
    constexpr int kInline = 16;
    const uint16_t* inlineHalves[kInline];
    std::vector<const uint16_t*> heapHalves(n > kInline ? n : 0);
    const uint16_t** halves = n > kInline ? heapHalves.data() : inlineHalves;
    for (int k = 0; k < n; ++k) halves[k] = static_cast<const uint16_t*>(inputs[k]);
    return kernels::bf16Reduce(static_cast<uint16_t*>(out), halves, n, count, bf16Op(op), scale);
  }
  constexpr size_t kBlock = 1024;
  float acc[kBlock], next[kBlock];
  const size_t bytes = dtypeBytes(dtype);
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t m = std::min(kBlock, count - begin);
    const size_t offset = begin * bytes;
    toFloat(static_cast<const char*>(inputs[0]) + offset, acc, m, dtype);
    for (int k = 1; k < n; ++k) {
      toFloat(static_cast<const char*>(inputs[k]) + offset, next, m, dtype);
      combine(acc, next, m, op);
    }
    if (op == ReduceOp::Avg)
      for (size_t i = 0; i < m; ++i) acc[i] *= scale;
    fromFloat(acc, static_cast<char*>(out) + offset, m, dtype);
  }
}

void scaleElements(void* data, size_t count, DType dtype, float factor) {
  if (dtype == DType::F32) {
    float* values = static_cast<float*>(data);
    for (size_t i = 0; i < count; ++i) values[i] *= factor;
    return;
  }
  if (dtype == DType::BF16) {
    auto* values = static_cast<uint16_t*>(data);
    const uint16_t* const inputs[] = {values};
    return kernels::bf16Reduce(values, inputs, 1, count, kernels::Bf16ReduceOp::Avg, factor);
  }
  constexpr size_t kBlock = 1024;
  float block[kBlock];
  const size_t bytes = dtypeBytes(dtype);
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t m = std::min(kBlock, count - begin);
    char* at = static_cast<char*>(data) + begin * bytes;
    toFloat(at, block, m, dtype);
    for (size_t i = 0; i < m; ++i) block[i] *= factor;
    fromFloat(block, at, m, dtype);
  }
}

}  // namespace ds::runtime
