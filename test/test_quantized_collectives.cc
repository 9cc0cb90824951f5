// ZeRO++'s quantisers and collectives (runtime/comm/block_quantize.h, quantized_collectives.h):
// DeepSpeed's symmetric formula on known values (clamp, round half to even, int4 nibbles), the
// round trip's error bound, and the quantised all-gather and two-hop reduce-scatter on 4 ranks
// as 2 nodes x 2 (Gloo over loopback): bit for bit a one-process reference of the same hops, and
// their error against the fp32 collective measured.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "runtime/comm/block_quantize.h"
#include "runtime/comm/memory_store.h"
#include "runtime/comm/quantized_collectives.h"
#include "test/float_arrays.h"
#include "test/gpt_parallel_harness.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;

namespace {

std::vector<float> roundTrip(const BlockQuantizer& q, const std::vector<float>& x) {
  std::vector<uint8_t> bytes(q.bytes(x.size()));
  q.quantize(x.data(), x.size(), bytes.data());
  std::vector<float> out(x.size());
  q.dequantize(bytes.data(), x.size(), out.data());
  return out;
}

double relativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("Block quantiser: DeepSpeed's symmetric int8 and int4 on known values",
          "[comm][zeropp]") {
  // absmax 1: int8 scale 128 (+1 clips to 127), int4 scale 8 (+1 clips to 7).
  const std::vector<float> x = {1.0f, -1.0f, 0.5f, 0.0f, 0.3f, 0.0625f, 0.1875f};
  CHECK(roundTrip({8, 64}, x) ==
        std::vector<float>{127.0f / 128, -1.0f, 0.5f, 0.0f, 38.0f / 128, 8.0f / 128, 24.0f / 128});
  // int4: 0.3 x 8 = 2.4 -> 2; 0.0625 x 8 = 0.5 -> 0 and 0.1875 x 8 = 1.5 -> 2 (half to even).
  CHECK(roundTrip({4, 64}, x) == std::vector<float>{0.875f, -1.0f, 0.5f, 0.0f, 0.25f, 0.0f, 0.25f});
  // Layout: one scale per block, values (int4 two a byte), padded to 16-bit words.
  CHECK(BlockQuantizer{4, 64}.bytes(7) == 4 + 4);
  CHECK(BlockQuantizer{8, 4}.bytes(7) == 2 * 4 + 8);
  CHECK(BlockQuantizer{4, 3}.bytes(7) == 3 * 4 + 4);
  // An all-zero block decodes to zeros; blocks are independent.
  CHECK(roundTrip({8, 2}, {0.0f, 0.0f, 4.0f, -2.0f}) ==
        std::vector<float>{0.0f, 0.0f, 4.0f * 127 / 128, -2.0f});
  // qwZ's blocks: at most 8000 elements, as few as possible.
  CHECK(weightQuantizer(8000).block == 8000);
  CHECK(weightQuantizer(8001).block == 4001);
  CHECK(weightQuantizer(20000).block == 6667);
  CHECK(weightQuantizer(0).block == 1);
}

TEST_CASE("Block quantiser: the round trip's error is at most half a step (a step at +absmax)",
          "[comm][zeropp]") {
  const std::vector<float> x = test::randoms(5000, 11);
  for (int bits : {8, 4}) {
    const BlockQuantizer q{bits, 500};
    const std::vector<float> y = roundTrip(q, x);
    for (size_t b = 0; b < 10; ++b) {
      float absmax = 0;
      for (size_t i = b * 500; i < (b + 1) * 500; ++i) absmax = std::max(absmax, std::fabs(x[i]));
      const float step = 2 * absmax / static_cast<float>(1 << bits);
      for (size_t i = b * 500; i < (b + 1) * 500; ++i)
        REQUIRE(std::fabs(y[i] - x[i]) <= (x[i] > 0 ? step : 0.5f * step) * 1.0001f);
    }
    INFO(bits << " bits: relative error " << relativeError(y, x));
    CHECK(relativeError(y, x) < (bits == 8 ? 0.01 : 0.15));
  }
}

TEST_CASE(
    "ZeRO++ collectives on 2 nodes x 2 ranks: the same bits as a one-process reference, "
    "their error against fp32 measured",
    "[comm][zeropp]") {
  constexpr int kWorld = 4, kPlaces = 2;
  constexpr size_t kChunk = 3001;  // not a multiple of a block
  MemoryStore store;
  std::vector<std::vector<float>> inputs(kWorld), gathered(kWorld), reduced(kWorld);
  for (int r = 0; r < kWorld; ++r) inputs[r] = test::randoms(kWorld * kChunk, 100 + r);
  test::onThreads(kWorld, [&](int r) {
    GroupFactory factory(store, {r, {kWorld}}, test::loopbackGroupOptions("zeropp"));
    std::unique_ptr<Communicator> world = factory.world();
    const test::NodeGroups groups = test::makeNodeGroups(factory, r, kWorld, kPlaces);
    gathered[r].resize(kWorld * kChunk);
    quantizedAllGather(*world, inputs[r].data() + r * kChunk, kChunk, DType::F32,
                       gathered[r].data());
    reduced[r].resize(kChunk);
    quantizedReduceScatter(*groups.node, *groups.crossNode, inputs[r].data(), reduced[r].data(),
                           kChunk, DType::F32);
  });

  // All-gather: every rank decodes the same values, each rank's chunk within int8's bound.
  std::vector<float> exactGather(kWorld * kChunk);
  for (int r = 0; r < kWorld; ++r)
    std::copy(inputs[r].begin() + r * kChunk, inputs[r].begin() + (r + 1) * kChunk,
              exactGather.begin() + r * kChunk);
  for (int r = 1; r < kWorld; ++r) CHECK(gathered[r] == gathered[0]);
  const double gatherError = relativeError(gathered[0], exactGather);
  INFO("qwZ all-gather (int8): relative error " << gatherError);
  CHECK(gatherError < 0.01);

  // Reduce-scatter: the reference's hops, then the error against the exact sums.
  const BlockQuantizer q{4, kGradientQuantBlock};
  double diff = 0, norm = 0;
  for (int d = 0; d < kWorld; ++d) {
    const int node = d / kPlaces, place = d % kPlaces;
    std::vector<float> want(kChunk, 0.0f);
    for (int n = 0; n < kWorld / kPlaces; ++n) {
      // Node n's partial sum of d's chunk: its ranks' int4 contributions, summed, int4 again.
      std::vector<float> partial(kChunk, 0.0f);
      for (int p = 0; p < kPlaces; ++p) {
        const std::vector<float> piece(inputs[n * kPlaces + p].begin() + d * kChunk,
                                       inputs[n * kPlaces + p].begin() + (d + 1) * kChunk);
        const std::vector<float> decoded = roundTrip(q, piece);
        for (size_t i = 0; i < kChunk; ++i)
          partial[i] = p == 0 ? decoded[i] : partial[i] + decoded[i];
      }
      const std::vector<float> decoded = roundTrip(q, partial);
      for (size_t i = 0; i < kChunk; ++i) want[i] = n == 0 ? decoded[i] : want[i] + decoded[i];
    }
    INFO("rank " << d << " (node " << node << ", place " << place << ")");
    CHECK(reduced[d] == want);
    for (size_t i = 0; i < kChunk; ++i) {
      double exact = 0;
      for (int r = 0; r < kWorld; ++r) exact += inputs[r][d * kChunk + i];
      diff += (reduced[d][i] - exact) * (reduced[d][i] - exact);
      norm += exact * exact;
    }
  }
  const double reduceError = std::sqrt(diff / norm);
  INFO("qgZ reduce-scatter (int4, two hops): relative error " << reduceError);
  CHECK(reduceError < 0.2);
}
