// The GPU attention kernels' speed (kernels/cuda/attention_kernels.cu), forward and backward, fp32,
// at GPT-2 small's attention shape (12 heads of 64, seq 1024, batch 4), timed with CUDA events:
// the best of 5 after one warm-up. scripts/gpu-check runs it beside PyTorch's
// scaled_dot_product_attention on the same GPU. One JSON line (also to --json FILE); exit 77
// where no GPU is visible.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/accelerator.h"
#include "kernels/cuda/cuda_accelerator.h"

using namespace ds::kernels;

int main(int argc, char** argv) {
  std::string jsonPath;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--json") jsonPath = argv[i + 1];
  if (const std::string why = cuda::unavailableReason(); !why.empty()) {
    std::printf("SKIPPED: no GPU visible: %s\n", why.c_str());
    return 77;
  }
  Accelerator& acc = cuda::cudaAccelerator();
  const AttentionShape s{4, 1024, 12, 12, 64, 1024};
  const size_t rows = s.samples * s.seq;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(rows * s.qkvStride()), dCtx(rows * s.ctxStride());
  for (float& x : qkv) x = normal(rng);
  for (float& x : dCtx) x = normal(rng);
  DeviceBuffer dQkv(acc, qkv.size() * sizeof(float)), dDctx(acc, dCtx.size() * sizeof(float)),
      ctx(acc, dCtx.size() * sizeof(float)), stats(acc, s.statsSize() * sizeof(float)),
      dqkv(acc, qkv.size() * sizeof(float));
  const Stream stream = acc.createStream();
  acc.setCurrentStream(stream);
  acc.copy(dQkv.data(), qkv.data(), dQkv.bytes(), CopyKind::HostToDevice, stream);
  acc.copy(dDctx.data(), dCtx.data(), dDctx.bytes(), CopyKind::HostToDevice, stream);
  const Event start = acc.createEvent(), middle = acc.createEvent(), end = acc.createEvent();
  float forward = 1e30f, backward = 1e30f;
  for (int rep = 0; rep < 6; ++rep) {
    acc.recordEvent(start, stream);
    acc.attentionForward(s, dQkv.data<float>(), ctx.data<float>(), stats.data<float>(), nullptr);
    acc.recordEvent(middle, stream);
    acc.attentionBackward(s, dQkv.data<float>(), ctx.data<float>(), stats.data<float>(),
                          dDctx.data<float>(), dqkv.data<float>(), nullptr);
    acc.recordEvent(end, stream);
    acc.synchronizeEvent(end);
    if (rep == 0) continue;  // warm-up
    forward = std::min(forward, acc.elapsedMs(start, middle));
    backward = std::min(backward, acc.elapsedMs(middle, end));
  }
  // Useful work: QK^T and PV over the visible pairs forward, twice as many products backward.
  const double pairs = static_cast<double>(s.seq) * (s.seq + 1) / 2 * s.samples * s.heads;
  const double gflops = 2.0 * pairs * s.headDim * 2 * 3 / ((forward + backward) * 1e-3) / 1e9;
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"device\": \"%s\", \"batch\": %zu, \"seq\": %zu, \"heads\": %zu, \"head_dim\": "
                "%zu, \"dtype\": \"fp32\", \"forward_ms\": %.3f, \"backward_ms\": %.3f, "
                "\"gflops\": %.1f}",
                acc.deviceName().c_str(), s.samples, s.seq, s.heads, s.headDim, forward, backward,
                gflops);
  std::printf("%s\n", line);
  if (!jsonPath.empty()) std::ofstream(jsonPath) << line << '\n';
  acc.destroyEvent(start);
  acc.destroyEvent(middle);
  acc.destroyEvent(end);
  acc.setCurrentStream({});
  acc.destroyStream(stream);
  return 0;
}
