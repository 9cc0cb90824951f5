// Shared-memory specifics (every op and dtype is in test_collectives): bitwise-identical sums of
// non-integers, a rank process killed mid all_reduce fails the others at once, named, and a rank
// waiting long on a late peer leaves the CPU to it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <ctime>
#include <thread>

#include "common/error.h"
#include "runtime/comm/memory_store.h"
#include "runtime/comm/shm_communicator.h"
#include "test/comm_harness.h"

using namespace ds::runtime;
using namespace std::chrono_literals;

namespace {

// Runs body(comm) on `size` threads, each with its own ShmCommunicator on one segment.
template <typename Body>
void onThreads(int size, const ShmOptions& options, Body body) {
  MemoryStore store;
  ds::test::onThreads(size, [&](int r) {
    ShmCommunicator comm = ShmCommunicator::join(store, "shm/test", r, size, options);
    body(comm);
  });
}

ShmOptions smallChunks() {
  ShmOptions options;
  options.chunkBytes = 4096;  // 1024 floats: counts below cross several chunks
  options.timeout = 10s;
  return options;
}

}  // namespace

TEST_CASE("shm: sums of non-integers are bitwise identical on every rank") {
  std::vector<std::vector<float>> results(3);
  onThreads(3, smallChunks(), [&](ShmCommunicator& comm) {
    std::vector<float> data(3001);
    for (size_t i = 0; i < data.size(); ++i) data[i] = 0.1f * (i + 1) / (comm.rank() + 3);
    comm.allReduce(data.data(), data.size());
    results[comm.rank()] = data;
  });
  REQUIRE(std::memcmp(results[0].data(), results[1].data(), 3001 * 4) == 0);
  REQUIRE(std::memcmp(results[0].data(), results[2].data(), 3001 * 4) == 0);
}

TEST_CASE("shm: a rank waiting 600 ms for a late peer uses a few ms of CPU, not a tenth of a core") {
  // Its naps grow with the wait (up to 1 ms); fixed 20 us naps cost ~60 ms of CPU over 600 ms.
  double waiterCpuSeconds = -1.0;
  onThreads(2, smallChunks(), [&](ShmCommunicator& comm) {
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(600ms);  // rank 0 is busy elsewhere (a checkpoint, say)
      comm.barrier();
      return;
    }
    timespec start{}, end{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    comm.barrier();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
    waiterCpuSeconds = static_cast<double>(end.tv_sec - start.tv_sec) +
                       static_cast<double>(end.tv_nsec - start.tv_nsec) * 1e-9;
  });
  INFO("the waiting rank's CPU time: " << waiterCpuSeconds * 1e3 << " ms");
  CHECK(waiterCpuSeconds >= 0.0);
  CHECK(waiterCpuSeconds < 0.025);
}

TEST_CASE("shm: a rank killed in the middle of all_reduce makes the others fail at once") {
  // Processes, not threads: rank 1 is SIGKILLed while the others wait for it.
  const ShmOptions options = smallChunks();
  auto segment = std::make_shared<ShmSegment>(
      ShmSegment::create(uniqueShmName("test"), ShmCommunicator::segmentBytes(3, options)));
  const std::string name = segment->name();
  ShmCommunicator rank0(segment, 0, 3, options);  // initialises the segment
  std::vector<pid_t> children;
  for (int r = 1; r < 3; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      ShmCommunicator comm(std::make_shared<ShmSegment>(ShmSegment::open(name)), r, 3, options);
      if (r == 1) pause();  // waits to be killed instead of joining the collective
      std::vector<float> data(5000, 1.0f);
      try {
        comm.allReduce(data.data(), data.size());
      } catch (const ds::Error& e) {
        _exit(std::string(e.what()).find("rank 1 (pid") != std::string::npos ? 42 : 43);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  std::this_thread::sleep_for(100ms);
  kill(children[0], SIGKILL);
  const auto started = std::chrono::steady_clock::now();
  std::vector<float> data(5000, 1.0f);
  REQUIRE_THROWS_WITH(rank0.allReduce(data.data(), data.size()), Catch::Contains("died"));
  REQUIRE(std::chrono::steady_clock::now() - started < 2s);  // not the 10 s timeout
  int status = 0;
  waitpid(children[0], &status, 0);
  waitpid(children[1], &status, 0);
  REQUIRE(WEXITSTATUS(status) == 42);
}

TEST_CASE("shm: a process leaving through _exit before its peers attached leaves no segment") {
  const std::string name = uniqueShmName("group");
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // As a rank 0 that created the group and is aborted before the rendezvous barrier.
    ShmSegment segment = ShmSegment::create(name, 1 << 20);
    ShmSegment::open(name);  // it exists now
    unlinkOwnedShmSegments();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_THROWS_WITH(ShmSegment::open(name), Catch::Contains("No such file"));
}

TEST_CASE("shm: a segment unlinked normally is forgotten by unlinkOwnedShmSegments") {
  ShmSegment first = ShmSegment::create(uniqueShmName("group"), 4096);
  first.unlinkName();
  // A later segment of the same process with another name is still cleaned up.
  const std::string name = uniqueShmName("group");
  ShmSegment second = ShmSegment::create(name, 4096);
  unlinkOwnedShmSegments();
  CHECK_THROWS_WITH(ShmSegment::open(name), Catch::Contains("No such file"));
}
