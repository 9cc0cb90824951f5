// The NCCL backend on real GPUs: one rank per device (NCCL refuses two ranks of one communicator on
// one GPU, "Duplicate GPU detected"), as many as the machine has up to 4; every op (all_reduce and
// reduce_scatter with sum, avg and max) and dtype against values computed on the host. With fewer
// than two GPUs no NCCL collective would run (a one-rank group short-circuits), so the program
// exits 77 and CTest reports the test as skipped.
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "runtime/comm/elementwise_reduce.h"
#include "runtime/comm/memory_store.h"
#include "runtime/comm/nccl_communicator.h"
#include "test/comm_harness.h"

using namespace ds;
using namespace ds::runtime;

namespace {

int deviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

// Host values -> device buffer of `dtype`, and back.
void* upload(const std::vector<float>& values, DType dtype) {
  std::vector<char> bytes(values.size() * dtypeBytes(dtype));
  fromFloat(values.data(), bytes.data(), values.size(), dtype);
  void* device = nullptr;
  ds::test::rankCheck(cudaMalloc(&device, std::max<size_t>(bytes.size(), 1)) == cudaSuccess,
                      "cudaMalloc");
  ds::test::rankCheck(
      cudaMemcpy(device, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess,
      "cudaMemcpy to the device");
  return device;
}

std::vector<float> download(const void* device, size_t count, DType dtype) {
  std::vector<char> bytes(count * dtypeBytes(dtype));
  ds::test::rankCheck(
      cudaMemcpy(bytes.data(), device, bytes.size(), cudaMemcpyDeviceToHost) == cudaSuccess,
      "cudaMemcpy to the host");
  std::vector<float> values(count);
  toFloat(bytes.data(), values.data(), count, dtype);
  return values;
}

float value(int rank, size_t i) { return static_cast<float>(i % 5 + rank % 3); }

}  // namespace

TEST_CASE("nccl: every op, reduction and dtype, one rank per GPU") {
  const int world = std::min(deviceCount(), 4);
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    INFO(dtypeName(dtype) << ", " << world << " ranks");
    const size_t count = 4099;
    MemoryStore store;
    std::vector<std::vector<float>> sums(world), avgs(world), maxes(world), gathered(world),
        scattered(world), scatteredMax(world), broadcasted(world), received(world);
    ds::test::onThreads(world, [&](int r) {
      NcclCommunicator comm(store, r, world, {r, std::string("nccl-") + dtypeName(dtype)});
      ds::test::rankCheck(cudaSetDevice(r) == cudaSuccess, "cudaSetDevice");
      std::vector<float> mine(count), blocks(count * world);
      for (size_t i = 0; i < count; ++i) mine[i] = value(r, i);
      for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = value(r, i);
      void* data = upload(mine, dtype);
      comm.allReduce(data, count, dtype);
      sums[r] = download(data, count, dtype);
      void* averaged = upload(mine, dtype);
      comm.allReduce(averaged, count, dtype, ReduceOp::Avg);
      avgs[r] = download(averaged, count, dtype);
      void* peaked = upload(mine, dtype);
      comm.allReduce(peaked, count, dtype, ReduceOp::Max);
      maxes[r] = download(peaked, count, dtype);
      void* in = upload(mine, dtype);
      void* all = upload(std::vector<float>(count * world), dtype);
      comm.allGather(in, all, count, dtype);
      gathered[r] = download(all, count * world, dtype);
      void* blockIn = upload(blocks, dtype);
      void* blockOut = upload(std::vector<float>(count), dtype);
      comm.reduceScatter(blockIn, blockOut, count, dtype);
      scattered[r] = download(blockOut, count, dtype);
      comm.reduceScatter(blockIn, blockOut, count, dtype, ReduceOp::Max);
      scatteredMax[r] = download(blockOut, count, dtype);
      void* shared = upload(std::vector<float>(count, r == world - 1 ? 9.0f : -1.0f), dtype);
      comm.broadcast(shared, count, dtype, world - 1);
      broadcasted[r] = download(shared, count, dtype);
      if (world > 1) {
        void* outgoing = upload(std::vector<float>(count, static_cast<float>(r)), dtype);
        void* incoming = upload(std::vector<float>(count), dtype);
        const int right = (r + 1) % world, left = (r + world - 1) % world;
        if (r % 2 == 0) comm.send(outgoing, count, dtype, right);
        comm.recv(incoming, count, dtype, left);
        if (r % 2 != 0) comm.send(outgoing, count, dtype, right);
        received[r] = download(incoming, count, dtype);
        cudaFree(outgoing);
        cudaFree(incoming);
      }
      comm.barrier();
      for (void* p : {data, averaged, peaked, in, all, blockIn, blockOut, shared}) cudaFree(p);
    });
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < count; ++i) {
        float sum = 0, blockSum = 0, peak = 0, blockPeak = 0;
        for (int s = 0; s < world; ++s) {
          sum += value(s, i), blockSum += value(s, r * count + i);
          peak = std::max(peak, value(s, i)),
          blockPeak = std::max(blockPeak, value(s, r * count + i));
        }
        REQUIRE(sums[r][i] == sum);
        // NCCL may pre-multiply by 1/world before summing (its ncclAvg for floating types), so
        // the average is compared within the dtype's rounding, not bitwise.
        const double tolerance = dtype == DType::F32 ? 1e-6 : dtype == DType::F16 ? 2e-3 : 1e-2;
        REQUIRE(avgs[r][i] == Approx(sum / static_cast<float>(world)).epsilon(tolerance));
        REQUIRE(maxes[r][i] == peak);
        REQUIRE(scatteredMax[r][i] == blockPeak);
        for (int s = 0; s < world; ++s) REQUIRE(gathered[r][s * count + i] == value(s, i));
        REQUIRE(scattered[r][i] == blockSum);
        REQUIRE(broadcasted[r][i] == 9.0f);
        if (world > 1) REQUIRE(received[r][i] == static_cast<float>((r + world - 1) % world));
      }
  }
}

int main(int argc, char** argv) {
  if (const int devices = deviceCount(); devices < 2) {
    std::printf("NCCL test skipped: it needs two or more CUDA devices (one rank each), found %d\n",
                devices);
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
