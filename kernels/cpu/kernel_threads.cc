#include "kernels/cpu/kernel_threads.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>

#include "common/usable_cores.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ds::kernels {
namespace {
// The process these statics were made in: libgomp's threads do not survive fork(), so a forked
// child runs the tasks on the pool (which runs them in turn where its own workers were lost).
const pid_t gStartedAs = getpid();
std::atomic<int> gKernelThreads{0};  // setKernelThreads' count; 0: none set
}  // namespace

int kernelThreads() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) {
    const int asked = std::atoi(omp);
    if (asked > 0) return asked;
  }
  if (const int share = gKernelThreads.load(std::memory_order_relaxed); share > 0) return share;
  return usableCores();
}

void setKernelThreads(int threads) {
  gKernelThreads.store(std::max(0, threads), std::memory_order_relaxed);
}

void runOnKernelThreads(int count, const std::function<void(int)>& task) {
  if (count <= 0) return;
  if (count == 1) return task(0);
#ifdef _OPENMP
  if (matmulNestsInOpenMP() && getpid() == gStartedAs) {
    std::exception_ptr error;
    // One index per thread in order, so index 0 is the caller's (the team's master). Inside
    // another team (nesting is off) this is a team of one that runs every index in turn.
#pragma omp parallel for num_threads(count) schedule(static, 1)
    for (int i = 0; i < count; ++i) {
      try {
        task(i);
      } catch (...) {
#pragma omp critical(ds_kernel_threads_error)
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    return;
  }
#endif
  ThreadPool::global().run(count, task);
}

}  // namespace ds::kernels
