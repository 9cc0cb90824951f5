// ThreadPool (kernels/cpu/thread_pool.h): every index runs exactly once, workers are reused rather
// than created per call, concurrent callers are served correctly, and task exceptions reach the
// caller; kernels/cpu/kernel_threads.h: kernelThreads' rule (OMP_NUM_THREADS, the share ds-worker
// sets, the usable CPUs) and runOnKernelThreads on the products' OpenMP team, across callers
// and in a fork()ed child.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/usable_cores.h"
#include "kernels/cpu/kernel_threads.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "test/scoped_env.h"

using ds::kernels::runOnKernelThreads;
using ds::kernels::ThreadPool;
using ds::test::ScopedEnv;

namespace {

using Task = std::function<void(int)>;

// `callers` threads each make `calls` calls of run(k + 2, ...) at once, caller k with k + 2 parts;
// every part of every call must have run by the time its call returns.
void checkConcurrentCallers(int callers, int calls,
                            const std::function<void(int count, const Task& task)>& run) {
  std::vector<long> sums(callers, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < callers; ++k) {
    threads.emplace_back([&, k] {
      for (int call = 0; call < calls; ++call) {
        std::vector<long> parts(k + 2, 0);
        run(k + 2, [&](int i) { parts[i] = i + 1; });
        for (long part : parts) sums[k] += part;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int k = 0; k < callers; ++k) CHECK(sums[k] == long{calls} * (k + 2) * (k + 3) / 2);
}

}  // namespace

TEST_CASE("thread_pool: each index runs exactly once, index 0 on the caller", "[thread_pool]") {
  ThreadPool pool;
  for (int count : {0, 1, 2, 3, 8}) {
    std::vector<std::atomic<int>> hits(count);
    std::atomic<int> onCaller{0};
    const auto caller = std::this_thread::get_id();
    pool.run(count, [&](int i) {
      hits[i]++;
      if (std::this_thread::get_id() == caller) onCaller++;
    });
    for (int i = 0; i < count; ++i) CHECK(hits[i] == 1);
    CHECK(onCaller == (count > 0 ? 1 : 0));
  }
  CHECK(pool.workers() == 7);
}

TEST_CASE("thread_pool: many small calls reuse the same workers", "[thread_pool]") {
  ThreadPool pool;
  std::atomic<long> sum{0};
  for (int call = 0; call < 5000; ++call) pool.run(3, [&](int i) { sum += i + 1; });
  CHECK(sum == 5000L * 6);
  CHECK(pool.workers() == 2);
  pool.run(2, [&](int i) { sum += 1; });  // fewer participants than workers
  CHECK(sum == 5000L * 6 + 2);
  CHECK(pool.workers() == 2);
}

TEST_CASE("thread_pool: concurrent callers are each served completely", "[thread_pool]") {
  ThreadPool pool;
  checkConcurrentCallers(4, 500, [&](int count, const Task& task) { pool.run(count, task); });
}

TEST_CASE("thread_pool: an exception in a task reaches the caller and the pool stays usable",
          "[thread_pool]") {
  ThreadPool pool;
  CHECK_THROWS_WITH(pool.run(3,
                             [](int i) {
                               if (i == 2) throw std::runtime_error("task 2 failed");
                             }),
                    "task 2 failed");
  CHECK_THROWS_WITH(pool.run(3,
                             [](int i) {
                               if (i == 0) throw std::runtime_error("task 0 failed");
                             }),
                    "task 0 failed");
  std::atomic<int> ran{0};
  pool.run(3, [&](int) { ran++; });
  CHECK(ran == 3);
}

TEST_CASE("kernel_threads: kernelThreads is OMP_NUM_THREADS, else the share set, else usable CPUs",
          "[thread_pool]") {
  ScopedEnv noOmp("OMP_NUM_THREADS", std::nullopt);
  ds::kernels::setKernelThreads(0);
  CHECK(ds::kernels::kernelThreads() == ds::usableCores());
  ds::kernels::setKernelThreads(3);
  CHECK(ds::kernels::kernelThreads() == 3);
  {
    ScopedEnv omp("OMP_NUM_THREADS", "5");
    CHECK(ds::kernels::kernelThreads() == 5);
  }
  {
    ScopedEnv bad("OMP_NUM_THREADS", "zero");  // not a count: as if unset
    CHECK(ds::kernels::kernelThreads() == 3);
  }
  ds::kernels::setKernelThreads(0);
  CHECK(ds::kernels::kernelThreads() == ds::usableCores());
}

TEST_CASE("usable_cores: the affinity mask's CPUs, not the machine's", "[thread_pool]") {
  cpu_set_t all;
  REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
  CHECK(ds::usableCores() == CPU_COUNT(&all));
  // Narrowed to the CPU it runs on, as taskset -c or a one-CPU cpuset would.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const int narrowed = ds::usableCores();
  REQUIRE(sched_setaffinity(0, sizeof all, &all) == 0);
  CHECK(narrowed == 1);
}

TEST_CASE("kernel_threads: each index once, index 0 on the caller, the others elsewhere",
          "[thread_pool]") {
  for (int count : {0, 1, 2, 3}) {
    std::vector<std::atomic<int>> hits(count);
    std::vector<std::thread::id> ranOn(count);
    runOnKernelThreads(count, [&](int i) {
      hits[i]++;
      ranOn[i] = std::this_thread::get_id();
    });
    for (int i = 0; i < count; ++i) CHECK(hits[i] == 1);
    if (count > 0) CHECK(ranOn[0] == std::this_thread::get_id());
    for (int i = 1; i < count; ++i) CHECK(ranOn[i] != std::this_thread::get_id());
  }
}

TEST_CASE("kernel_threads: the products' OpenMP threads where they use OpenMP, else the pool",
          "[thread_pool]") {
  const int before = ThreadPool::global().workers();
  runOnKernelThreads(before + 2, [](int) {});  // the pool would need one more worker for it
  if (ds::kernels::matmulNestsInOpenMP())
    CHECK(ThreadPool::global().workers() == before);  // no second set of threads per rank
  else
    CHECK(ThreadPool::global().workers() == before + 1);
}

TEST_CASE("kernel_threads: a task's exception reaches the caller, and they stay usable",
          "[thread_pool]") {
  CHECK_THROWS_WITH(runOnKernelThreads(3,
                                       [](int i) {
                                         if (i == 1) throw std::runtime_error("task 1 failed");
                                       }),
                    "task 1 failed");
  std::atomic<int> ran{0};
  runOnKernelThreads(3, [&](int) { ran++; });
  CHECK(ran == 3);
}

TEST_CASE("kernel_threads: concurrent callers are each served completely", "[thread_pool]") {
  checkConcurrentCallers(3, 300, runOnKernelThreads);
}

TEST_CASE("kernel_threads: a fork()ed child of a process that ran them runs every index",
          "[thread_pool]") {
  runOnKernelThreads(2, [](int) {});  // the parent's team (or pool) exists before the fork
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    alarm(20);  // a child stuck waiting for threads it lost ends instead of hanging the test
    std::atomic<int> ran{0};
    runOnKernelThreads(2, [&](int) { ran++; });
    _exit(ran == 2 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
