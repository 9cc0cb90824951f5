// The GPT's training step on the GPU at GPT-2 small's shape (12 layers, width 768, 12 heads, seq
// 1024, vocabulary 50257 padded to 50304, learned positions, tied embeddings; micro-batch 4),
// fp32 as the model computes today: forward and backward (runtime/model/gpt.h on the CUDA
// backend, parameters and gradients in device memory) plus fused AdamW over all parameters, the
// best of 5 steps after two warm-ups, timed with CUDA events. Prints tokens/s and the model flops
// per second (6 x the forward's multiply-accumulates, as Megatron counts them). scripts/gpu-check
// runs PyTorch's eager model of the same shape beside it (bench/gpt/torch_gpt_bench.py with
// DS_TORCH_DEVICE=cuda). One JSON line (also to --json FILE); exit 77 where no GPU is visible.
// --layers N shrinks the model (a quick run).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/accelerator.h"
#include "kernels/cpu/adam_kernel.h"
#include "kernels/cuda/cuda_accelerator.h"
#include "kernels/device_array.h"
#include "runtime/model/device_parameters.h"
#include "runtime/model/gpt.h"
#include "test/small_gpt.h"

using namespace ds;
using namespace ds::kernels;

int main(int argc, char** argv) {
  std::string jsonPath;
  int layers = 12;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--json") jsonPath = argv[i + 1];
    if (std::string(argv[i]) == "--layers") layers = std::atoi(argv[i + 1]);
  }
  if (const std::string why = cuda::unavailableReason(); !why.empty()) {
    std::printf("SKIPPED: no GPU visible: %s\n", why.c_str());
    return 77;
  }
  Accelerator& acc = cuda::cudaAccelerator();
  runtime::GptConfig c;
  c.numLayers = layers;
  c.hiddenSize = 768;
  c.numAttentionHeads = 12;
  c.seqLength = c.maxPositionEmbeddings = 1024;
  c.vocabSize = 50257;
  c.makeVocabSizeDivisibleBy = 128;
  const size_t batch = 4, seq = 1024;
  runtime::Gpt model(c, {}, acc);
  std::vector<float> params(model.parameterCount());
  model.initParameters(params.data(), 1);
  runtime::DeviceParameters access(model, params.data(), acc);
  const size_t count = access.size();
  DeviceArray<float> m, v;
  m.resize(acc, count);
  v.resize(acc, count);
  const runtime::Batch b = test::randomBatch(c, batch, seq, 2);
  int step = 0;
  float loss = 0.0f;
  auto trainStep = [&] {
    access.zeroGradients();
    loss = model.forwardBackward(b, access, 1.0f);
    const AdamStepConstants k = adamStepConstants(1e-4, 0.9, 0.95, 1e-8, 0.1, true, ++step);
    acc.adamStep(access.parameterData(), access.gradientData(), m.data(), v.data(), count, k, {},
                 acc.currentStream());
  };
  const Event start = acc.createEvent(), end = acc.createEvent();
  float best = 1e30f;
  for (int rep = 0; rep < 7; ++rep) {
    acc.recordEvent(start, acc.currentStream());
    trainStep();
    acc.recordEvent(end, acc.currentStream());
    acc.synchronizeEvent(end);
    if (rep >= 2) best = std::min(best, acc.elapsedMs(start, end));
  }
  acc.destroyEvent(start);
  acc.destroyEvent(end);
  const double tokens = static_cast<double>(batch * seq);
  const double tflops = model.trainingFlopsPerToken(seq) * tokens / (best * 1e-3) / 1e12;
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"device\": \"%s\", \"layers\": %d, \"params\": %zu, \"batch\": %zu, \"seq\": "
                "%zu, \"dtype\": \"fp32\", \"step_ms\": %.2f, \"tokens_per_s\": %.0f, "
                "\"model_tflops\": %.2f, \"loss\": %.4f}",
                acc.deviceName().c_str(), layers, count, batch, seq, best, tokens / (best * 1e-3),
                tflops, loss);
  std::printf("%s\n", line);
  if (!jsonPath.empty()) std::ofstream(jsonPath) << line << '\n';
  return 0;
}
