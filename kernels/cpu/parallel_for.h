// parallelFor: the loop that spreads independent iterations over the OpenMP threads the matrix
// products use, for kernels that call products inside (flash attention) and for the model's
// per-head and per-row loops (runtime/model/parallel_loops.h). Only for iterations that write
// disjoint outputs: anything summed across iterations needs a fixed order of its own.
#pragma once

#include <cstddef>
#include <exception>

#include "kernels/cpu/matmul.h"

namespace ds::kernels {

// Runs fn(i) for i in [0, n) over the OpenMP threads the matrix products use (setMatmulThreads);
// iterations write disjoint outputs, each computed whole by one thread. A matmul inside runs
// single-threaded there (OpenMP does not nest by default); with OpenBLAS, whose own threads would
// fight over the cores, the loop runs serially. Exceptions are carried out.
template <class Fn>
void parallelFor(size_t n, Fn fn) {
  if (!matmulNestsInOpenMP()) {
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

}  // namespace ds::kernels
