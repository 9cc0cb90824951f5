#include "runtime/model/row_kernels.h"

#include "runtime/model/parallel_loops.h"

namespace ds::runtime::gpt {

void addBiasRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* out,
                 const float* bias, size_t rows, size_t dim) {
  parallelRows(acc, rows,
               [&](size_t r0, size_t r1) { k.addBias(out + r0 * dim, bias, r1 - r0, dim); });
}

void addRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* y,
             const float* x, size_t rows, size_t dim) {
  parallelRows(acc, rows,
               [&](size_t r0, size_t r1) { k.add(y + r0 * dim, x + r0 * dim, (r1 - r0) * dim); });
}

void sumRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* out,
             const float* a, const float* b, size_t rows, size_t dim) {
  parallelRows(acc, rows, [&](size_t r0, size_t r1) {
    const size_t at = r0 * dim, n = (r1 - r0) * dim;
    if (out != a)
      acc.copy(out + at, a + at, n * sizeof(float), kernels::CopyKind::DeviceToDevice,
               acc.currentStream());
    k.add(out + at, b + at, n);
  });
}

void biasGradientRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* dbias,
                      const float* dout, size_t rows, size_t dim,
                      kernels::DeviceArray<float>& partials,
                      const std::function<void(size_t r0, size_t r1)>& produce) {
  overRowBlocks(
      acc, k, rows, dim, partials,
      [&](size_t r0, size_t r1, float* partial) {
        if (produce) produce(r0, r1);
        k.biasGradient(partial, dout + r0 * dim, r1 - r0, dim);
      },
      dbias);
}

double crossEntropyRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k,
                        float* logits, const int32_t* targets, size_t rows, size_t vocab,
                        float gradScale, std::vector<double>& rowLosses) {
  if (!splitOverHostThreads(acc))  // one launch, one wait for the loss
    return k.crossEntropy(logits, targets, rows, vocab, gradScale);
  rowLosses.resize(rows);
  parallelRows(acc, rows, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r)
      rowLosses[r] = k.crossEntropy(logits + r * vocab, targets + r, 1, vocab, gradScale);
  });
  double total = 0.0;
  for (size_t r = 0; r < rows; ++r) total += rowLosses[r];
  return total;
}

}  // namespace ds::runtime::gpt
