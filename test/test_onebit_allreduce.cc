// The 1-bit compressed all-reduce (runtime/comm/onebit_allreduce.h) on 1-4 ranks (threads over
// shared memory) against the plain one-process reference of DeepSpeed's compressed_allreduce
// (test/onebit_reference.h), three calls in a row so that both errors carry over; counts that
// need padding included. Then what error feedback is for: the running
// mean of the outputs for a fixed input approaches the true average; and the bytes each rank
// sends, from the comms logger, against an fp32 all-reduce's.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "runtime/comm/comms_logger.h"
#include "runtime/comm/onebit_allreduce.h"
#include "test/gpt_parallel_harness.h"
#include "test/float_arrays.h"
#include "test/onebit_reference.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::onThreads;

TEST_CASE(
    "1-bit all-reduce equals the reference of DeepSpeed's compressed_allreduce, errors "
    "carried over three calls",
    "[comm][onebit]") {
  for (int n : {1, 2, 3, 4})
    for (size_t count : {size_t{1}, size_t{100}, size_t{4096}, size_t{5003}}) {
      INFO(n << " ranks, " << count << " elements");
      auto group = test::shmGroup(n);
      std::vector<OneBitErrors> errors(n), want(n);
      for (int r = 0; r < n; ++r) {
        errors[r].reset(count, n);
        want[r].reset(count, n);
        CHECK(errors[r].worker.size() % (16 * static_cast<size_t>(n)) == 0);
        CHECK(errors[r].worker.size() >= count);
      }
      for (unsigned call = 0; call < 3; ++call) {
        std::vector<std::vector<float>> got(n), expected(n);
        for (int r = 0; r < n; ++r)
          got[r] = expected[r] = test::randoms(count, 100 * call + static_cast<unsigned>(r));
        test::referenceOneBitAllReduce(expected, want);
        onThreads(n, [&](int r) { oneBitAllReduce(group[r], got[r].data(), count, errors[r]); });
        for (int r = 0; r < n; ++r) {
          CHECK(got[r] == expected[r]);  // the same operations in the same order: bit for bit
          CHECK(errors[r].worker == want[r].worker);
          CHECK(errors[r].server == want[r].server);
        }
        for (int r = 1; r < n; ++r) CHECK(got[r] == got[0]);  // every rank the same result
      }
    }
}

TEST_CASE("1-bit all-reduce: error feedback makes the running mean approach the true average",
          "[comm][onebit]") {
  constexpr int n = 4;
  constexpr size_t count = 1000;
  auto group = test::shmGroup(n);
  std::vector<std::vector<float>> inputs(n);
  std::vector<float> average(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    inputs[r] = test::randoms(count, 7 + static_cast<unsigned>(r));
    for (size_t i = 0; i < count; ++i) average[i] += inputs[r][i] / n;
  }
  std::vector<OneBitErrors> errors(n);
  for (auto& e : errors) e.reset(count, n);
  std::vector<double> sum(count, 0.0);
  double firstError = 0.0, scale = 0.0;
  for (size_t i = 0; i < count; ++i) scale += static_cast<double>(average[i]) * average[i];
  constexpr int kCalls = 200;
  for (int call = 0; call < kCalls; ++call) {
    std::vector<std::vector<float>> data = inputs;
    onThreads(n, [&](int r) { oneBitAllReduce(group[r], data[r].data(), count, errors[r]); });
    double diff = 0.0;
    for (size_t i = 0; i < count; ++i) {
      sum[i] += data[0][i];
      const double d = sum[i] / (call + 1) - average[i];
      diff += d * d;
    }
    if (call == 0) firstError = std::sqrt(diff / scale);
    if (call == kCalls - 1) {
      // One call alone is far off (signs and two scales); the errors carry the rest forward, so
      // the mean of many calls closes in on the average as about 1 / calls.
      INFO("relative error of one call " << firstError << ", of the mean of " << kCalls << " "
                                         << std::sqrt(diff / scale));
      CHECK(firstError > 0.3);
      CHECK(std::sqrt(diff / scale) < 0.02);
    }
  }
}

TEST_CASE("1-bit all-reduce sends a sixteenth of an fp32 all-reduce's bytes and more",
          "[comm][onebit]") {
  constexpr int n = 4;
  constexpr size_t count = 1 << 16;
  auto group = test::shmGroup(n);
  CommsLoggerConfig config;
  config.enabled = true;
  std::vector<std::unique_ptr<CommsLogger>> loggers;
  for (int r = 0; r < n; ++r) loggers.push_back(std::make_unique<CommsLogger>(config));
  onThreads(n, [&](int r) {
    LoggingCommunicator logged(group[r], *loggers[r]);
    std::vector<float> data = test::randoms(count, static_cast<unsigned>(r));
    OneBitErrors errors;
    errors.reset(count, n);
    oneBitAllReduce(logged, data.data(), count, errors);
  });
  const uint64_t bytes = loggers[0]->bytes();  // rank 0's messages, as the logger sizes them
  // All-to-all of the signs (count / 8 bytes), the gathered server signs (count / 8) and two
  // gathered scales (16 bytes each): against 4 x count bytes of an fp32 all-reduce, 16x less.
  CHECK(bytes == count / 8 + count / 8 + 2 * 4 * n);
  CHECK(4 * count / bytes >= 15);
}
