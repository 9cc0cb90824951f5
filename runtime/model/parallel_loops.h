// Internal to the GPT model: the loops that spread a block's per-head and per-row work over the
// OpenMP threads the matrix products use. Only for work whose iterations write disjoint outputs;
// anything summed across iterations must go through fixed partials (norm_backward.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>

#include "kernels/cpu/matmul.h"

namespace ds::runtime::gpt {

// Runs fn(i) for i in [0, n) over the OpenMP threads the matrix products use (setMatmulThreads);
// iterations write disjoint outputs, each computed whole by one thread. A matmul inside runs
// single-threaded there (OpenMP does not nest by default); with OpenBLAS, whose own threads would
// fight over the cores, the loop runs serially. Exceptions are carried out.
template <class Fn>
void parallelFor(size_t n, Fn fn) {
  if (!kernels::matmulNestsInOpenMP()) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < static_cast<long>(n); ++i) {
    try {
      fn(static_cast<size_t>(i));
    } catch (...) {
#pragma omp critical
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Element-wise work over `rows` rows, in one contiguous run of rows per thread.
template <class Fn>
void parallelRows(size_t rows, Fn fn) {
  constexpr size_t kChunks = 8;  // a few per thread: even when rows do not divide evenly
  const size_t chunks = std::min(rows, kChunks);
  parallelFor(chunks, [&](size_t c) { fn(rows * c / chunks, rows * (c + 1) / chunks); });
}

}  // namespace ds::runtime::gpt
