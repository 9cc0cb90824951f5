// fp32 runs straight over the arrays (vectorised by the compiler); bf16 and fp16 go through the
// fused kernels (kernels/cpu/half_reduce.h): one pass, widened and rounded in registers.
#include "runtime/comm/elementwise_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/half_reduce.h"

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

kernels::HalfReduceOp halfOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Avg:
      return kernels::HalfReduceOp::Avg;
    case ReduceOp::Max:
      return kernels::HalfReduceOp::Max;
    case ReduceOp::Sum:
      break;
  }
  return kernels::HalfReduceOp::Sum;
}

void reduceHalves(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, DType dtype,
                  kernels::HalfReduceOp op, float scale) {
  if (dtype == DType::BF16) return kernels::bf16Reduce(out, inputs, n, count, op, scale);
  kernels::fp16Reduce(out, inputs, n, count, op, scale);
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
  // Typed copies of the pointers rather than a cast of the array (no aliasing of void* slots).
  constexpr int kInline = 16;
  const uint16_t* inlineHalves[kInline];
  std::vector<const uint16_t*> heapHalves(n > kInline ? n : 0);
  const uint16_t** halves = n > kInline ? heapHalves.data() : inlineHalves;
  for (int k = 0; k < n; ++k) halves[k] = static_cast<const uint16_t*>(inputs[k]);
  reduceHalves(static_cast<uint16_t*>(out), halves, n, count, dtype, halfOp(op), scale);
}

void scaleElements(void* data, size_t count, DType dtype, float factor) {
  if (dtype == DType::F32) {
    float* values = static_cast<float*>(data);
    for (size_t i = 0; i < count; ++i) values[i] *= factor;
    return;
  }
  auto* values = static_cast<uint16_t*>(data);
  const uint16_t* const inputs[] = {values};
  reduceHalves(values, inputs, 1, count, dtype, kernels::HalfReduceOp::Avg, factor);
}

}  // namespace ds::runtime
