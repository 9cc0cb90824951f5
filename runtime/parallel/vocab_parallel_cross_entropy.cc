// Two all-reduces per call, each over `rows` (or 2 x rows) floats, never over the vocabulary:
// 1. the row maxima (Max), so that every rank exponentiates against the same shift;
// 2. the row sums of exp(z - max) and the shifted target logits, in one buffer (Sum: only the
//    owning rank contributes a target logit, the others add zero).
#include "runtime/parallel/vocab_parallel_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"

namespace ds::runtime {

double vocabParallelCrossEntropy(Communicator& model, const VocabSlice& slice, float* logitsSlice,
                                 const int32_t* targets, size_t rows, float gradScale) {
  const size_t width = slice.rows.count;
  for (size_t r = 0; r < rows; ++r)
    if (targets[r] >= 0 && static_cast<size_t>(targets[r]) >= slice.total)
      throw Error("vocab-parallel cross-entropy: target " + std::to_string(targets[r]) +
                  " at row " + std::to_string(r) + " is outside the vocabulary of " +
                  std::to_string(slice.total));
  auto local = [&](size_t r) -> long {  // the target's column here, or -1 when another rank has it
    const auto t = static_cast<size_t>(targets[r]);
    return t >= slice.rows.begin && t < slice.rows.begin + width
               ? static_cast<long>(t - slice.rows.begin)
               : -1;
  };

  std::vector<float> rowMax(rows, -std::numeric_limits<float>::infinity());
  for (size_t r = 0; r < rows; ++r)
    if (targets[r] >= 0 && width > 0)
      rowMax[r] = *std::max_element(logitsSlice + r * width, logitsSlice + (r + 1) * width);
  model.allReduce(rowMax.data(), rows, ReduceOp::Max);

  // [0, rows): sum of exp(z - max); [rows, 2 rows): the target's z - max.
  std::vector<float> sums(2 * rows, 0.0f);
  for (size_t r = 0; r < rows; ++r) {
    float* z = logitsSlice + r * width;
    if (targets[r] < 0) continue;
    if (const long t = local(r); t >= 0) sums[rows + r] = z[t] - rowMax[r];
    float sum = 0.0f;
    for (size_t j = 0; j < width; ++j) {
      z[j] = std::exp(z[j] - rowMax[r]);
      sum += z[j];
    }
    sums[r] = sum;
  }
  model.allReduce(sums.data(), sums.size());

  double total = 0.0;
  for (size_t r = 0; r < rows; ++r) {
    float* z = logitsSlice + r * width;
    if (targets[r] < 0) {
      std::fill_n(z, width, 0.0f);
      continue;
    }
    total += std::log(static_cast<double>(sums[r])) - static_cast<double>(sums[rows + r]);
    const float k = gradScale / sums[r];
    for (size_t j = 0; j < width; ++j) z[j] *= k;
    if (const long t = local(r); t >= 0) z[t] -= gradScale;
  }
  return total;
}

}  // namespace ds::runtime
