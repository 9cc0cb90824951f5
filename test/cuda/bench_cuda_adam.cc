// Fused AdamW on the GPU (kernels/cuda/optimizer_kernels.cu through Accelerator::adamStep) over
// 100M fp32 parameters, the size: the best of 10 steps after two warm-ups, timed with CUDA
// events, plus the same step writing a bf16 copy of the parameters (the mixed-precision engine's
// use). A step reads parameters, gradients and both moments and writes parameters and moments:
// 28 bytes a parameter (30 with the bf16 copy), so the roofline is those bytes over the memory
// bandwidth, which this program measures with a device-to-device copy of the same size.
// scripts/gpu-check runs PyTorch's torch.optim.AdamW(fused=True) beside it on the same GPU
// (test/cuda/torch_adam_bench.py). One JSON line (also to --json FILE); exit 77 where no GPU is
// visible. --params N changes the size.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/accelerator.h"
#include "kernels/cpu/adam_kernel.h"
#include "kernels/cuda/cuda_accelerator.h"

using namespace ds::kernels;

namespace {

// The best of `reps` timed runs of fn after `warmups` untimed ones, in milliseconds.
template <class Fn>
float bestMs(Accelerator& acc, Stream stream, int warmups, int reps, Fn fn) {
  const Event start = acc.createEvent(), end = acc.createEvent();
  float best = 1e30f;
  for (int rep = 0; rep < warmups + reps; ++rep) {
    acc.recordEvent(start, stream);
    fn();
    acc.recordEvent(end, stream);
    acc.synchronizeEvent(end);
    if (rep >= warmups) best = std::min(best, acc.elapsedMs(start, end));
  }
  acc.destroyEvent(start);
  acc.destroyEvent(end);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string jsonPath;
  size_t count = 100'000'000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--json") jsonPath = argv[i + 1];
    if (std::string(argv[i]) == "--params") count = std::strtoull(argv[i + 1], nullptr, 10);
  }
  if (const std::string why = cuda::unavailableReason(); !why.empty()) {
    std::printf("SKIPPED: no GPU visible: %s\n", why.c_str());
    return 77;
  }
  Accelerator& acc = cuda::cudaAccelerator();
  const size_t bytes = count * sizeof(float);
  DeviceBuffer params(acc, bytes), grads(acc, bytes), m(acc, bytes), v(acc, bytes),
      half(acc, count * sizeof(uint16_t)), copyTarget(acc, bytes);
  const Stream stream = acc.createStream();
  acc.setCurrentStream(stream);
  // Values that keep the update finite: zero moments and parameters, constant gradients.
  for (DeviceBuffer* b : {&params, &m, &v}) acc.fillZero(b->data(), bytes, stream);
  {
    const std::vector<float> ones(count, 1e-3f);
    acc.copy(grads.data(), ones.data(), bytes, CopyKind::HostToDevice, stream);
  }
  int step = 0;
  auto adam = [&](const HalfCopy& copy) {
    const AdamStepConstants c = adamStepConstants(1e-4, 0.9, 0.999, 1e-8, 0.01, true, ++step);
    acc.adamStep(params.data<float>(), grads.data<float>(), m.data<float>(), v.data<float>(), count,
                 c, copy, stream);
  };
  const float fp32Ms = bestMs(acc, stream, 2, 10, [&] { adam({}); });
  const float bf16Ms = bestMs(acc, stream, 2, 10, [&] {
    adam({half.data<uint16_t>(), HalfFormat::Bf16});
  });
  // The bandwidth a plain copy reaches: it reads and writes `bytes` once each.
  const float copyMs = bestMs(acc, stream, 2, 10, [&] {
    acc.copy(copyTarget.data(), params.data(), bytes, CopyKind::DeviceToDevice, stream);
  });
  const double bandwidth = 2.0 * static_cast<double>(bytes) / (copyMs * 1e-3);  // bytes/s
  const double rooflineMs = 28.0 * static_cast<double>(count) / bandwidth * 1e3;
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"device\": \"%s\", \"params\": %zu, \"fp32_ms\": %.3f, \"bf16_copy_ms\": %.3f, "
                "\"copy_bandwidth_gbs\": %.1f, \"roofline_ms\": %.3f, \"of_roofline\": %.3f}",
                acc.deviceName().c_str(), count, fp32Ms, bf16Ms, bandwidth / 1e9, rooflineMs,
                rooflineMs / fp32Ms);
  std::printf("%s\n", line);
  if (!jsonPath.empty()) std::ofstream(jsonPath) << line << '\n';
  acc.setCurrentStream({});
  acc.destroyStream(stream);
  return 0;
}
