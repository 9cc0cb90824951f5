// ZeRO's partition layout: shards of every rank put back together give the flat buffer, staging
// is rank-major, packing layer by layer equals packing a bucket at once, for world sizes
// {1, 2, 3, 4, 7} and tensor sizes that are empty, tiny, prime and not divisible.
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>

#include "kernels/cpu/half_convert.h"
#include "runtime/zero/partition_layout.h"
#include "test/param_table.h"

using namespace ds::runtime;
using ds::DType;

namespace {

std::vector<ParamSpec> table(const std::vector<size_t>& sizes) {
  std::vector<std::pair<size_t, bool>> tensors;
  for (size_t i = 0; i < sizes.size(); ++i) tensors.push_back({sizes[i], i % 2 == 0});
  return ds::test::makeSpecs(tensors);
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 1.0f + static_cast<float>(i);
  return v;
}

}  // namespace

TEST_CASE("partition layout: shards cover every element once, staging is rank-major") {
  const std::vector<size_t> sizes = {0, 1, 17, 1009, 4, 0, 13};
  const auto specs = table(sizes);
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  const auto flat = ramp(total);
  for (int world : {1, 2, 3, 4, 7}) {
    INFO("world " << world);
    std::vector<float> rebuilt(total, 0.0f);
    const PartitionLayout rank0(specs, world, 0);
    std::vector<float> staging(world * rank0.shardSize(), -1.0f);
    rank0.pack(flat.data(), DType::F32, 0, 0, specs.size(), staging.data(), DType::F32);
    for (int r = 0; r < world; ++r) {
      const PartitionLayout layout(specs, world, r);
      REQUIRE(layout.shardSize() == rank0.shardSize());
      std::vector<float> shard(layout.shardSize(), -1.0f);
      layout.extractShard(flat.data(), DType::F32, 0, 0, specs.size(), shard.data(), DType::F32);
      // The staging's r-th block is exactly rank r's shard.
      CHECK(std::memcmp(shard.data(), staging.data() + r * layout.shardSize(),
                        shard.size() * sizeof(float)) == 0);
      layout.insertShard(shard.data(), DType::F32, 0, specs.size(), rebuilt.data(), DType::F32, 0);
      // Slices are equal and padding is zero.
      for (size_t t = 0; t < specs.size(); ++t) {
        const auto& p = layout.tensor(t);
        CHECK(p.slice == (sizes[t] + world - 1) / world);
        for (size_t i = 0; i < p.slice; ++i)
          if (r * p.slice + i >= sizes[t]) CHECK(shard[p.shardOffset + i] == 0.0f);
      }
    }
    CHECK(rebuilt == flat);
    std::vector<float> unpacked(total, 0.0f);
    rank0.unpack(staging.data(), DType::F32, 0, specs.size(), unpacked.data(), DType::F32, 0);
    CHECK(unpacked == flat);
  }
}

TEST_CASE("partition layout: a bucket packed tensor by tensor equals the bucket packed at once") {
  const auto specs = table({5, 3, 11, 2, 7});
  const auto flat = ramp(28);
  for (int world : {1, 2, 3, 4, 7}) {
    const PartitionLayout layout(specs, world, 0);
    const size_t s0 = 1, s1 = 5, chunk = layout.chunk(s0, s1);
    std::vector<float> whole(world * chunk), pieces(world * chunk, -1.0f);
    // flatBase: the buffer starts at tensor s0, as a layer's gradient scratch does.
    const size_t base = specs[s0].offset;
    layout.pack(flat.data() + base, DType::F32, base, s0, s1, whole.data(), DType::F32, 0.5f);
    for (size_t t = s1; t-- > s0;)
      layout.packPart(flat.data() + specs[t].offset, DType::F32, specs[t].offset, t, t + 1, s0, s1,
                      pieces.data(), DType::F32, 0.5f);
    CHECK(pieces == whole);
    CHECK(whole[0] == 0.5f * flat[base]);
  }
}

TEST_CASE("partition layout: dtype conversion and accumulation round to nearest even once") {
  const std::vector<float> values = {1.0f, 1.00390625f, -3.3f, 65504.0f, 1e-8f};
  for (DType type : {DType::BF16, DType::F16}) {
    std::vector<uint16_t> half(values.size());
    convertElements(values.data(), DType::F32, half.data(), type, values.size());
    for (size_t i = 0; i < values.size(); ++i)
      CHECK(half[i] == (type == DType::BF16 ? ds::kernels::floatToBf16(values[i])
                                            : ds::kernels::floatToFp16(values[i])));
    std::vector<uint16_t> sum = half;
    accumulateElements(sum.data(), type, values.data(), DType::F32, values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const float wide = type == DType::BF16 ? ds::kernels::bf16ToFloat(half[i])
                                             : ds::kernels::fp16ToFloat(half[i]);
      const float expected = wide + values[i];
      CHECK(sum[i] == (type == DType::BF16 ? ds::kernels::floatToBf16(expected)
                                           : ds::kernels::floatToFp16(expected)));
    }
  }
}
