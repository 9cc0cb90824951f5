// Every op x backend x dtype x world size x element count, with ranks as threads: all_reduce
// (sum, avg, max), all_gather, reduce_scatter (sum, max), all_to_all, broadcast, send/recv around
// a ring, barrier. Values are small integers, exact in bf16 and fp16, so results are compared exactly
// (averages: the fp32 quotient rounded once to the dtype, as every backend computes it).
#include <catch2/catch.hpp>
#include <cstring>

#include "common/error.h"
#include "runtime/comm/elementwise_reduce.h"
#include "test/comm_harness.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::Backend;
using namespace std::chrono_literals;

namespace {

float value(int rank, size_t i) { return static_cast<float>(i % 5 + rank % 3); }

std::vector<char> encode(const std::vector<float>& values, DType dtype) {
  std::vector<char> bytes(values.size() * dtypeBytes(dtype));
  fromFloat(values.data(), bytes.data(), values.size(), dtype);
  return bytes;
}

std::vector<float> decode(const std::vector<char>& bytes, DType dtype) {
  std::vector<float> values(bytes.size() / dtypeBytes(dtype));
  toFloat(bytes.data(), values.data(), values.size(), dtype);
  return values;
}

float roundedTo(float x, DType dtype) { return decode(encode({x}, dtype), dtype)[0]; }

struct Results {
  std::vector<float> sum, avg, max, gathered, scatteredSum, scatteredMax, exchanged, broadcasted,
      received;
  std::vector<char> sumBits;
};

void runEveryOp(Communicator& comm, DType dtype, size_t count, Results& out) {
  const int n = comm.size(), r = comm.rank();
  std::vector<float> mine(count), blocks(count * n);
  for (size_t i = 0; i < count; ++i) mine[i] = value(r, i);
  for (size_t i = 0; i < count * n; ++i) blocks[i] = value(r, i);

  std::vector<char> sum = encode(mine, dtype), avg = sum, max = sum;
  comm.allReduce(sum.data(), count, dtype, ReduceOp::Sum);
  comm.allReduce(avg.data(), count, dtype, ReduceOp::Avg);
  comm.allReduce(max.data(), count, dtype, ReduceOp::Max);
  out.sumBits = sum;
  out.sum = decode(sum, dtype);
  out.avg = decode(avg, dtype);
  out.max = decode(max, dtype);

  std::vector<char> gathered(count * n * dtypeBytes(dtype));
  comm.allGather(encode(mine, dtype).data(), gathered.data(), count, dtype);
  out.gathered = decode(gathered, dtype);

  std::vector<char> block(count * dtypeBytes(dtype));
  comm.reduceScatter(encode(blocks, dtype).data(), block.data(), count, dtype, ReduceOp::Sum);
  out.scatteredSum = decode(block, dtype);
  comm.reduceScatter(encode(blocks, dtype).data(), block.data(), count, dtype, ReduceOp::Max);
  out.scatteredMax = decode(block, dtype);

  std::vector<char> exchanged(count * n * dtypeBytes(dtype));
  comm.allToAll(encode(blocks, dtype).data(), exchanged.data(), count, dtype);
  out.exchanged = decode(exchanged, dtype);

  std::vector<float> shared(count, -1.0f);
  if (r == n - 1)
    for (size_t i = 0; i < count; ++i) shared[i] = value(r, i) + 1.0f;
  std::vector<char> sharedBits = encode(shared, dtype);
  comm.broadcast(sharedBits.data(), count, dtype, n - 1);
  out.broadcasted = decode(sharedBits, dtype);

  if (n > 1) {  // a ring: even ranks send first, so the chain of blocking sends always resolves
    std::vector<float> message(count);
    for (size_t i = 0; i < count; ++i) message[i] = value(r, i) + 10.0f;
    std::vector<char> outgoing = encode(message, dtype), incoming(outgoing.size());
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    if (r % 2 == 0) comm.send(outgoing.data(), count, dtype, right);
    comm.recv(incoming.data(), count, dtype, left);
    if (r % 2 != 0) comm.send(outgoing.data(), count, dtype, right);
    out.received = decode(incoming, dtype);
  }
  comm.barrier();
}

void checkResults(const std::vector<Results>& results, DType dtype, size_t count) {
  const int n = static_cast<int>(results.size());
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    const Results& got = results[r];
    REQUIRE(got.sumBits == results[0].sumBits);  // bitwise identical on every rank
    for (size_t i = 0; i < count; ++i) {
      float sum = 0, peak = 0;
      for (int s = 0; s < n; ++s) sum += value(s, i), peak = std::max(peak, value(s, i));
      REQUIRE(got.sum[i] == sum);
      REQUIRE(got.avg[i] == roundedTo(sum * (1.0f / static_cast<float>(n)), dtype));
      REQUIRE(got.max[i] == peak);
      for (int s = 0; s < n; ++s) REQUIRE(got.gathered[s * count + i] == value(s, i));
      float blockSum = 0, blockMax = 0;
      for (int s = 0; s < n; ++s)
        blockSum += value(s, r * count + i), blockMax = std::max(blockMax, value(s, r * count + i));
      REQUIRE(got.scatteredSum[i] == blockSum);
      REQUIRE(got.scatteredMax[i] == blockMax);
      for (int s = 0; s < n; ++s)  // block s from rank s: its block r
        REQUIRE(got.exchanged[s * count + i] == value(s, r * count + i));
      REQUIRE(got.broadcasted[i] == value(n - 1, i) + 1.0f);
      if (n > 1) REQUIRE(got.received[i] == value((r + n - 1) % n, i) + 10.0f);
    }
  }
}

std::vector<std::vector<int>> layoutsFor(Backend backend) {
  if (backend == Backend::Hierarchical) return {{1}, {1, 1}, {2, 2}, {3, 3}, {1, 1, 1, 1, 1, 1, 1}};
  return {{1}, {2}, {3}, {4}, {7}};
}

}  // namespace

TEST_CASE("collectives: every op, backend, dtype, world size and element count") {
  for (Backend backend : {Backend::InProcess, Backend::Shm, Backend::Gloo, Backend::Hierarchical}) {
    for (const std::vector<int>& nodes : layoutsFor(backend)) {
      for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
        int world = 0;
        for (int size : nodes) world += size;
        std::vector<std::vector<Results>> results(5, std::vector<Results>(world));
        const std::vector<size_t> counts = {0, 1, 17, 1009, 4099};
        ds::test::runGroup(backend, nodes, [&](Communicator& comm) {
          for (size_t c = 0; c < counts.size(); ++c)
            runEveryOp(comm, dtype, counts[c], results[c][comm.rank()]);
        });
        for (size_t c = 0; c < counts.size(); ++c) {
          INFO(ds::test::backendLabel(backend)
               << ", " << nodes.size() << " nodes, world " << world << ", " << dtypeName(dtype)
               << ", count " << counts[c]);
          checkResults(results[c], dtype, counts[c]);
        }
      }
    }
  }
}

TEST_CASE("send/recv: long messages in order, empty ones, and a count mismatch named") {
  for (Backend backend : {Backend::InProcess, Backend::Shm, Backend::Gloo, Backend::Hierarchical}) {
    INFO(ds::test::backendLabel(backend));
    std::string mismatch;
    ds::test::runGroup(backend, {2, 2}, [&](Communicator& comm) {
      // 5 messages of 100k floats (far more than a shared-memory channel holds) from 0 to 2
      // (another node under hierarchical) and from 0 to 1, then an empty one each way.
      const size_t count = 100'000;
      if (comm.rank() == 0) {
        for (int m = 0; m < 5; ++m) {
          std::vector<float> data(count, static_cast<float>(m));
          comm.send(data.data(), count, 2);
          comm.send(data.data(), count, 1);
        }
        comm.send(static_cast<const float*>(nullptr), 0, 2);
        std::vector<float> wrong(10);
        comm.send(wrong.data(), wrong.size(), 1);
      } else if (comm.rank() <= 2) {
        for (int m = 0; m < 5; ++m) {
          std::vector<float> data(count, -1.0f);
          comm.recv(data.data(), count, 0);
          ds::test::rankCheck(data == std::vector<float>(count, static_cast<float>(m)),
                              "message " + std::to_string(m) + " arrived intact");
        }
        if (comm.rank() == 2) comm.recv(static_cast<float*>(nullptr), 0, 0);
        if (comm.rank() == 1) {
          std::vector<float> data(12);
          try {
            comm.recv(data.data(), data.size(), 0);
          } catch (const ds::Error& e) {
            mismatch = e.what();
          }
        }
      }
      comm.barrier();  // nobody leaves (closing its connections) while others still talk
    });
    REQUIRE_THAT(mismatch, Catch::Contains("rank 0 sent 40 bytes, this rank expected 48"));
  }
}

TEST_CASE("collectives: a rank that never joins an op is named by the others") {
  for (Backend backend : {Backend::InProcess, Backend::Gloo}) {
    INFO(ds::test::backendLabel(backend));
    std::vector<std::string> messages(3);
    ds::test::runGroup(
        backend, {1, 1, 1},
        [&](Communicator& comm) {
          // Rank 2 never calls the collective; it stays alive (connections open) meanwhile, so
          // the others see a silent peer, not a closed one.
          if (comm.rank() == 2) return std::this_thread::sleep_for(1500ms);
          std::vector<float> data(10, 1.0f);
          try {
            comm.allReduce(data.data(), data.size());
          } catch (const ds::TimeoutError& e) {
            messages[comm.rank()] = e.what();
          }
        },
        500ms);
    REQUIRE_THAT(messages[0], Catch::Contains("rank 2 did not answer"));
    REQUIRE_THAT(messages[1], Catch::Contains("rank 2 did not answer"));
  }
}

TEST_CASE("send/recv: a peer that never sends is named") {
  for (Backend backend : {Backend::InProcess, Backend::Gloo}) {
    INFO(ds::test::backendLabel(backend));
    std::string message;
    ds::test::runGroup(
        backend, {1, 1},
        [&](Communicator& comm) {
          if (comm.rank() == 1) return std::this_thread::sleep_for(1000ms);  // silent, alive
          float data[4];
          try {
            comm.recv(data, 4, 1);
          } catch (const ds::TimeoutError& e) {
            message = e.what();
          }
        },
        300ms);
    REQUIRE_THAT(message, Catch::Contains("rank 1 did not"));
  }
}

TEST_CASE("collectives: bad roots and peers are errors naming the group") {
  auto group = ShmCommunicator::inProcessGroup(2);
  float data[1] = {0};
  REQUIRE_THROWS_WITH(group[0].broadcast(data, 1, 2),
                      Catch::Contains("root 2 is not a rank of this group of 2"));
  REQUIRE_THROWS_WITH(group[0].send(data, 1, 0),
                      Catch::Contains("peer 0 is not another rank of this group of 2"));
  REQUIRE_THROWS_WITH(group[1].recv(data, 1, -1), Catch::Contains("peer -1"));
}
