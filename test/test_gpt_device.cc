// The GPT on an accelerator whose memory host code cannot touch (issue 47): built on the guarded
// CPU backend (kernels/cpu/guarded_accelerator.h), where device memory is unreadable outside the
// backend's calls and every kernel argument must be device memory, a Gpt's passes must run with
// its activations, token ids, parameters and gradients all in device memory, and give the CPU
// backend's losses, gradients and logits bit for bit (the same kernels run). A host read of a
// device buffer would kill this test with SIGSEGV ("host code touched device memory"); a host
// buffer passed to a kernel would throw. What still needs host access is refused by name.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/cpu/guarded_accelerator.h"
#include "runtime/model/device_parameters.h"
#include "runtime/model/flat_parameters.h"
#include "runtime/model/gpt.h"
#include "test/delegating_accelerator.h"
#include "test/float_arrays.h"
#include "test/small_gpt.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::bitwiseEqual;
using ds::test::randomBatch;
using ds::test::smallConfig;

namespace {

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct Variant {
  const char* name;
  void (*apply)(GptConfig&);
};

// The options a user configures that change which kernels and copies a pass makes.
const Variant kVariants[] = {
    {"learned positions, LayerNorm, GeLU, tied", [](GptConfig&) {}},
    {"rotary, RMSNorm with qk RMSNorm, SwiGLU, untied, no biases",
     [](GptConfig& c) {
       c.posEmb = PositionEmbedding::Rotary;
       c.norm = NormKind::RmsNorm;
       c.qkNorm = true;
       c.activation = Activation::Swiglu;
       c.intermediateSize = 96;
       c.weightTying = false;
       c.biasInAttnLinear = c.biasInMlp = false;
     }},
    {"sinusoidal, dropout, checkpointing",
     [](GptConfig& c) {
       c.posEmb = PositionEmbedding::Sinusoidal;
       c.attentionDropout = c.hiddenDropout = 0.1;
       c.checkpointActivations = true;
     }},
    {"gpt-j residual with tied norms, qk LayerNorm, rotary 25 percent",
     [](GptConfig& c) {
       c.gptjResidual = c.gptjTied = true;
       c.qkNorm = true;
       c.posEmb = PositionEmbedding::Rotary;
       c.rotaryPct = 0.25;
     }},
    {"sliding window, GQA, RMSNorm, no positions",
     [](GptConfig& c) {
       c.slidingWindowWidth = 4;
       c.numKvHeads = 2;
       c.norm = NormKind::RmsNorm;
       c.posEmb = PositionEmbedding::None;
     }},
    {"LayerNorm without bias, ReLU",
     [](GptConfig& c) {
       c.biasInNorms = false;
       c.activation = Activation::Relu;
     }},
};

// The guarded backend presented as a CUDA device: the model then runs its row loops as it does
// on a GPU (one call over all rows, in order on the calling thread, no per-32-row partial sums)
// over the CPU's kernels, so that path is checked here too; its sums take another order, so the
// results agree with the CPU's within fp32 rounding rather than bit for bit.
class DeviceShaped final : public ds::test::DelegatingAccelerator {
 public:
  DeviceShaped() : DelegatingAccelerator(kernels::guardedCpuAccelerator()) {}
  DeviceKind kind() const override { return DeviceKind::Cuda; }
};

void checkClose(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  float scale = 0.0f;
  for (float w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < want.size(); ++i)
    REQUIRE(got[i] == Approx(want[i]).epsilon(1e-4).margin(1e-6 * scale));
}

std::vector<float> initialParameters(const Gpt& model) {
  std::vector<float> params(model.parameterCount());
  model.initParameters(params.data(), 5);
  return params;
}

// One config's GPT on the CPU backend and on `device`, from the same initial parameters.
struct TwinGpts {
  TwinGpts(const GptConfig& c, kernels::Accelerator& device)
      : cpu(c),
        onDevice(c, {}, device),
        params(initialParameters(cpu)),
        cpuAccess(cpu, params.data()),
        deviceAccess(onDevice, params.data(), device) {}
  Gpt cpu, onDevice;
  std::vector<float> params;
  FlatParameters cpuAccess;
  DeviceParameters deviceAccess;
};

}  // namespace

TEST_CASE(
    "GPT on a device: every pass keeps its buffers in device memory and gives the CPU's "
    "losses, gradients and logits bit for bit",
    "[gpt][accelerator][device]") {
  kernels::Accelerator& device = kernels::guardedCpuAccelerator();
  REQUIRE_FALSE(device.hostAccessible());
  for (const Variant& v : kVariants) {
    SECTION(v.name) {
      GptConfig c = smallConfig();
      v.apply(c);
      TwinGpts twins(c, device);
      auto& [cpu, onDevice, params, cpuAccess, deviceAccess] = twins;
      // Two micro-batches accumulate, the second shorter: buffers are reused and resized.
      for (const auto& [samples, seq, seed] : {std::tuple{3, 12, 1}, std::tuple{2, 7, 2}}) {
        CAPTURE(samples, seq);
        const Batch b = randomBatch(c, samples, seq, seed);
        const float want = cpu.forwardBackward(b, cpuAccess, 0.5f);
        const float got = onDevice.forwardBackward(b, deviceAccess, 0.5f);
        CHECK(sameBits(got, want));
        CHECK(sameBits(onDevice.evaluate(b, deviceAccess), cpu.evaluate(b, cpuAccess)));
      }
      CHECK(bitwiseEqual(deviceAccess.gradients(), cpuAccess.gradients()));
      const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
      CHECK(bitwiseEqual(onDevice.nextTokenLogits(prompt, deviceAccess),
                         cpu.nextTokenLogits(prompt, cpuAccess)));
      deviceAccess.zeroGradients();
      const std::vector<float> zeros = deviceAccess.gradients();
      CHECK(std::all_of(zeros.begin(), zeros.end(), [](float g) { return g == 0.0f; }));
    }
  }
}

TEST_CASE(
    "GPT on a device: the row loops as a GPU runs them agree with the CPU's within fp32 rounding",
    "[gpt][accelerator][device]") {
  DeviceShaped device;
  for (const Variant& v : kVariants) {
    SECTION(v.name) {
      GptConfig c = smallConfig();
      v.apply(c);
      TwinGpts twins(c, device);
      auto& [cpu, onDevice, params, cpuAccess, deviceAccess] = twins;
      // More rows than one 32-row block, so the single call sums differently.
      const Batch b = randomBatch(c, 4, 12, 1);
      const float want = cpu.forwardBackward(b, cpuAccess, 0.5f);
      CHECK(onDevice.forwardBackward(b, deviceAccess, 0.5f) == Approx(want).epsilon(1e-6));
      checkClose(deviceAccess.gradients(), cpuAccess.gradients());
    }
  }
}

TEST_CASE("GPT on a device: pipeline stages pass device buffers and give the CPU stages' results",
          "[gpt][accelerator][device][pipe]") {
  kernels::Accelerator& device = kernels::guardedCpuAccelerator();
  GptConfig c = smallConfig();
  c.weightTying = false;
  c.hiddenDropout = 0.1;
  const GptPlacement first{0, 1, nullptr, 0, 2}, last{0, 1, nullptr, 2, -1};
  Gpt cpu0(c, first), cpu1(c, last), dev0(c, first, device), dev1(c, last, device);
  // Each stage's parameters drawn alone (the same for both devices).
  std::vector<float> p0(cpu0.parameterCount()), p1(cpu1.parameterCount());
  cpu0.initParameters(p0.data(), 3);
  cpu1.initParameters(p1.data(), 3);
  FlatParameters c0(cpu0, p0.data()), c1(cpu1, p1.data());
  DeviceParameters d0(dev0, p0.data(), device), d1(dev1, p1.data(), device);
  const Batch b = randomBatch(c, 2, 12, 4);
  const size_t n = cpu0.boundaryElements(b);
  std::vector<float> act(n), grad(n);
  kernels::DeviceArray<float> devAct, devGrad;
  devAct.resize(device, n);
  devGrad.resize(device, n);
  cpu0.stageForward(0, b, nullptr, act.data(), c0, 0.5f, true);
  dev0.stageForward(0, b, nullptr, devAct.data(), d0, 0.5f, true);
  CHECK(bitwiseEqual(kernels::copyToHost(device, devAct.data(), n), act));
  const float want = cpu1.stageForward(0, b, act.data(), nullptr, c1, 0.5f, true);
  CHECK(sameBits(dev1.stageForward(0, b, devAct.data(), nullptr, d1, 0.5f, true), want));
  cpu1.stageBackward(0, nullptr, grad.data(), c1);
  dev1.stageBackward(0, nullptr, devGrad.data(), d1);
  CHECK(bitwiseEqual(kernels::copyToHost(device, devGrad.data(), n), grad));
  cpu0.stageBackward(0, grad.data(), nullptr, c0);
  dev0.stageBackward(0, devGrad.data(), nullptr, d0);
  CHECK(bitwiseEqual(d0.gradients(), c0.gradients()));
  CHECK(bitwiseEqual(d1.gradients(), c1.gradients()));
}

TEST_CASE("GPT on a device: the options whose passes still need host access are refused by name",
          "[gpt][accelerator][device]") {
  kernels::Accelerator& device = kernels::guardedCpuAccelerator();
  GptConfig moe = smallConfig();
  moe.moe.numExperts = 2;
  CHECK_THROWS_WITH(Gpt(moe, {}, device), Catch::Contains("moe-num-experts above 1") &&
                                              Catch::Contains("use device cpu"));
  GptConfig scale = smallConfig();
  scale.norm = NormKind::ScaleNorm;
  CHECK_THROWS_WITH(Gpt(scale, {}, device), Catch::Contains("norm: scalenorm"));
  GptPlacement sliced;
  sliced.modelSize = 2;
  CHECK_THROWS_WITH(Gpt(smallConfig(), sliced, device),
                    Catch::Contains("model-parallel-size above 1"));
  // The same options on the CPU backend are not refused for the device's sake.
  CHECK_NOTHROW(Gpt(moe));
  CHECK_NOTHROW(Gpt(scale));
}

TEST_CASE("device array: resized as std::vector is, in device memory", "[accelerator][device]") {
  kernels::Accelerator& device = kernels::guardedCpuAccelerator();
  kernels::DeviceArray<float> a;
  CHECK(a.empty());
  kernels::assignHost(device, a, std::vector<float>{1, 2, 3});
  float* first = a.data();
  a.resize(device, 5);  // grows: the three kept, two zeros
  CHECK(kernels::copyToHost(device, a.data(), a.size()) == std::vector<float>{1, 2, 3, 0, 0});
  a.resize(device, 2);  // shrinks: the allocation stays
  const float* grown = a.data();
  CHECK(a.capacity() == 5);
  a.resize(device, 4);  // grows within it: the two kept, zeros after them
  CHECK(a.data() == grown);
  CHECK(kernels::copyToHost(device, a.data(), a.size()) == std::vector<float>{1, 2, 0, 0});
  CHECK(first != nullptr);
  kernels::DeviceArray<float> b(std::move(a));
  CHECK(a.empty());
  CHECK(b.size() == 4);
  kernels::DeviceArray<float> c;
  kernels::assignDevice(device, c, b.data(), 3);
  CHECK(kernels::copyToHost(device, c.data(), c.size()) == std::vector<float>{1, 2, 0});
  b.release();
  CHECK((b.data() == nullptr && b.capacity() == 0));
  // A destination the caller overwrites: no values kept, the allocation reused where it fits.
  const float* held = c.data();
  c.resizeForOverwrite(device, 2);
  CHECK((c.size() == 2 && c.data() == held));
  c.resizeForOverwrite(device, 9);
  CHECK((c.size() == 9 && c.capacity() == 9));
}
