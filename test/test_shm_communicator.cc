// Shared-memory collectives: every op for world sizes 1, 2, 3, 4, 7 and element counts 0, 1,
// primes and counts not divisible by the world size, with small chunks so multi-chunk paths run;
// ranks as threads and as processes; a dead peer and a silent peer fail the op, named.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "runtime/comm/memory_store.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/common/error.h"

using namespace ds::runtime;
using namespace std::chrono_literals;

namespace {

// Runs body(comm) on `size` threads, each with its own ShmCommunicator on one segment.
template <typename Body>
void onThreads(int size, const ShmOptions& options, Body body) {
  MemoryStore store;
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(size);
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        ShmCommunicator comm = ShmCommunicator::join(store, "shm/test", r, size, options);
        body(comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

ShmOptions smallChunks() {
  ShmOptions options;
  options.chunkBytes = 4096;  // 1024 floats: counts below cross several chunks
  options.timeout = 10s;
  return options;
}

}  // namespace

TEST_CASE("shm: every collective is exact for every world size and element count") {
  for (int size : {1, 2, 3, 4, 7}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{17}, size_t{1009}, size_t{4099}}) {
      INFO("size " << size << " count " << count);
      std::vector<std::vector<float>> reduced(size), gathered(size), broadcasted(size),
          scattered(size), maxima(size), means(size);
      onThreads(size, smallChunks(), [&](ShmCommunicator& comm) {
        const int r = comm.rank();
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i % 13) * (r + 1));
        comm.allReduceSum(data.data(), count);
        reduced[r] = data;
        std::vector<float> peak(count), mean(count);
        for (size_t i = 0; i < count; ++i) peak[i] = mean[i] = static_cast<float>((r * 7 + i) % 5);
        comm.allReduce(peak.data(), count, ReduceOp::Max);
        comm.allReduce(mean.data(), count, ReduceOp::Avg);
        maxima[r] = peak;
        means[r] = mean;
        std::vector<float> mine(count, static_cast<float>(r)), all(count * comm.size());
        for (size_t i = 0; i < count; ++i) mine[i] += static_cast<float>(i);
        comm.allGather(mine.data(), all.data(), count);
        gathered[r] = all;
        // reduce_scatter: block b of rank r's input holds b * 100 + r + (i % 5).
        std::vector<float> blocks(count * comm.size()), myBlock(count, -1.0f);
        for (int b = 0; b < comm.size(); ++b)
          for (size_t i = 0; i < count; ++i) blocks[b * count + i] = b * 100.0f + r + (i % 5);
        comm.reduceScatterSum(blocks.data(), myBlock.data(), count);
        scattered[r] = myBlock;
        std::vector<float> shared(count, r == size - 1 ? 5.0f : -1.0f);
        comm.broadcast(shared.data(), count, size - 1);
        broadcasted[r] = shared;
        comm.barrier();
      });
      const float factor = static_cast<float>(size * (size + 1) / 2);
      for (int r = 0; r < size; ++r) {
        for (size_t i = 0; i < count; ++i) {
          REQUIRE(reduced[r][i] == static_cast<float>(i % 13) * factor);
          REQUIRE(broadcasted[r][i] == 5.0f);
          float expectedMax = 0.0f, expectedSum = 0.0f;
          for (int q = 0; q < size; ++q) {
            expectedMax = std::max(expectedMax, static_cast<float>((q * 7 + i) % 5));
            expectedSum += static_cast<float>((q * 7 + i) % 5);
          }
          REQUIRE(maxima[r][i] == expectedMax);
          REQUIRE(means[r][i] == Approx(expectedSum / size));
          REQUIRE(means[r][i] == means[0][i]);  // bitwise the same on every rank
          REQUIRE(scattered[r][i] == size * (r * 100.0f + (i % 5)) + size * (size - 1) / 2.0f);
          for (int from = 0; from < size; ++from)
            REQUIRE(gathered[r][from * count + i] == static_cast<float>(from) + i);
        }
        REQUIRE(reduced[r] == reduced[0]);
      }
    }
  }
}

TEST_CASE("shm: sums of non-integers are bitwise identical on every rank") {
  std::vector<std::vector<float>> results(3);
  onThreads(3, smallChunks(), [&](ShmCommunicator& comm) {
    std::vector<float> data(3001);
    for (size_t i = 0; i < data.size(); ++i) data[i] = 0.1f * (i + 1) / (comm.rank() + 3);
    comm.allReduceSum(data.data(), data.size());
    results[comm.rank()] = data;
  });
  REQUIRE(std::memcmp(results[0].data(), results[1].data(), 3001 * 4) == 0);
  REQUIRE(std::memcmp(results[0].data(), results[2].data(), 3001 * 4) == 0);
}

TEST_CASE("shm: a rank that never arrives fails the others' op after the timeout, named") {
  ShmOptions options = smallChunks();
  options.timeout = 300ms;
  std::vector<std::string> messages(3);
  onThreads(3, options, [&](ShmCommunicator& comm) {
    if (comm.rank() == 2) return;  // never calls the collective
    std::vector<float> data(10, 1.0f);
    try {
      comm.allReduceSum(data.data(), data.size());
    } catch (const ds::TimeoutError& e) {
      messages[comm.rank()] = e.what();
    }
  });
  REQUIRE_THAT(messages[0], Catch::Contains("rank 2 did not arrive within 300 ms"));
  REQUIRE_THAT(messages[1], Catch::Contains("rank 2 did not arrive"));
}

TEST_CASE("shm: a rank killed in the middle of all_reduce makes the others fail at once") {
  // Processes, not threads: rank 1 is SIGKILLed while the others wait for it.
  const ShmOptions options = smallChunks();
  ShmSegment segment =
      ShmSegment::create(uniqueShmName("test"), ShmCommunicator::segmentBytes(3, options));
  const std::string name = segment.name();
  ShmCommunicator rank0(std::move(segment), 0, 3, options);  // initialises the segment
  std::vector<pid_t> children;
  for (int r = 1; r < 3; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      ShmCommunicator comm(ShmSegment::open(name), r, 3, options);
      if (r == 1) pause();  // waits to be killed instead of joining the collective
      std::vector<float> data(5000, 1.0f);
      try {
        comm.allReduceSum(data.data(), data.size());
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
  REQUIRE_THROWS_WITH(rank0.allReduceSum(data.data(), data.size()), Catch::Contains("died"));
  REQUIRE(std::chrono::steady_clock::now() - started < 2s);  // not the 10 s timeout
  int status = 0;
  waitpid(children[0], &status, 0);
  waitpid(children[1], &status, 0);
  REQUIRE(WEXITSTATUS(status) == 42);
}
