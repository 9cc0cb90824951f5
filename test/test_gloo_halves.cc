// Gloo's bf16/fp16 all_reduce and reduce_scatter travel as 16 bits: each ring step rounds its
// partial sum to the dtype (as NCCL's ring does) and an average is scaled in the last step, before
// that step's rounding. Checked bitwise against a model of the ring, on values whose sums do round.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "kernels/cpu/half_convert.h"
#include "test/comm_harness.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::Backend;

namespace {

using Halves = std::vector<uint16_t>;

float widen(uint16_t h, DType dtype) {
  return dtype == DType::BF16 ? kernels::bf16ToFloat(h) : kernels::fp16ToFloat(h);
}
uint16_t narrow(float x, DType dtype) {
  return dtype == DType::BF16 ? kernels::floatToBf16(x) : kernels::floatToFp16(x);
}

// Values in (-8, 8) with every mantissa bit in use, so partial sums need rounding.
uint16_t value(int rank, size_t i, DType dtype) {
  const uint32_t hash = static_cast<uint32_t>((i * 2654435761u) ^ (rank * 40503u + 7u)) * 69069u;
  return narrow((static_cast<float>(hash >> 8) / 16777216.0f - 0.5f) * 16.0f, dtype);
}

// Block b of n (elements [bounds[b], bounds[b+1])) ends on rank b: its partial sum starts on rank
// b+1 and passes ranks b+2, ..., b, each adding its own value and rounding.
uint16_t ringModel(int n, int block, size_t i, DType dtype, ReduceOp op) {
  float acc = widen(value((block + 1) % n, i, dtype), dtype);
  for (int k = 2; k <= n; ++k) {
    const float own = widen(value((block + k) % n, i, dtype), dtype);
    float combined = op == ReduceOp::Max ? (own < acc ? acc : own) : own + acc;
    if (op == ReduceOp::Avg && k == n) combined *= 1.0f / static_cast<float>(n);
    acc = widen(narrow(combined, dtype), dtype);
  }
  return narrow(acc, dtype);
}

// What the old path (fp32 on the wire, rounded once) gave for a sum.
uint16_t roundedOnce(int n, size_t i, DType dtype) {
  float sum = 0.0f;
  for (int r = 0; r < n; ++r) sum += widen(value(r, i, dtype), dtype);
  return narrow(sum, dtype);
}

}  // namespace

TEST_CASE("gloo: 16-bit all_reduce and reduce_scatter round every ring step, bitwise") {
  for (DType dtype : {DType::BF16, DType::F16})
    for (int n : {1, 2, 3, 4}) {
      // 600k elements span more than one 1 MiB ring segment per block at n <= 2.
      for (size_t count : {size_t{1}, size_t{17}, size_t{1009}, size_t{600'000}}) {
        INFO(dtypeName(dtype) << ", world " << n << ", count " << count);
        std::vector<std::vector<Halves>> reduced(3, std::vector<Halves>(n));
        std::vector<Halves> scattered(n);
        const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max};
        ds::test::runGroup(Backend::Gloo, std::vector<int>(n, 1), [&](Communicator& comm) {
          const int r = comm.rank();
          for (int o = 0; o < 3; ++o) {
            Halves data(count);
            for (size_t i = 0; i < count; ++i) data[i] = value(r, i, dtype);
            comm.allReduce(data.data(), count, dtype, ops[o]);
            reduced[o][r] = data;
          }
          Halves blocks(count * n), block(count);
          for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = value(r, i, dtype);
          comm.reduceScatter(blocks.data(), block.data(), count, dtype, ReduceOp::Sum);
          scattered[r] = block;
        });
        size_t differFromOnce = 0;
        for (int o = 0; o < 3; ++o) {
          INFO("op " << o);
          Halves expected(count);
          for (int b = 0; b < n; ++b)
            for (size_t i = count * b / n; i < count * (b + 1) / n; ++i)
              expected[i] = ringModel(n, b, i, dtype, ops[o]);
          for (int r = 0; r < n; ++r) REQUIRE(reduced[o][r] == expected);
          if (ops[o] == ReduceOp::Sum)
            for (size_t i = 0; i < count; ++i)
              differFromOnce += expected[i] != roundedOnce(n, i, dtype);
        }
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            REQUIRE(scattered[r][i] == ringModel(n, r, r * count + i, dtype, ReduceOp::Sum));
        // The values do exercise the rounding: from 3 ranks on, some sums are not the fp32 sum
        // rounded once (the old path's bits).
        if (n >= 3 && count >= 1009) CHECK(differFromOnce > 0);
      }
    }
}
