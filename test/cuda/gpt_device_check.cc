// The GPT on the GPU against PyTorch (issue 47): for a few configs, a Gpt built on the CUDA
// accelerator (parameters, gradients and activations in device memory) runs one forward and
// backward pass, and its loss and every parameter's gradient are compared with the float64 PyTorch
// reference (test/reference/gpt_reference.py, run on the host's CPU) on the same weights and
// batch. A plain program like the kernel test, so that scripts/gpu-check builds it with the CUDA
// toolkit alone: one line per config, exit 0 when all pass, 1 when any fails, 77 (CTest: skipped)
// without a GPU or without torch. --json FILE writes the results. In the main build, --device cpu
// runs the same on the CPU backend: a test of the check itself, where no GPU is.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/accelerator.h"
#include "runtime/model/device_parameters.h"
#include "runtime/model/gpt.h"
#include "test/cuda/check_report.h"
#include "test/cuda/torch_reference.h"
#include "test/small_gpt.h"
#if !defined(DS_GPT_CHECK_CPU_BACKEND)
#include "kernels/cuda/cuda_accelerator.h"
#endif

namespace {

using ds::kernels::Accelerator;
using ds::kernels::DeviceKind;
using ds::runtime::Activation;
using ds::runtime::Batch;
using ds::runtime::DeviceParameters;
using ds::runtime::Gpt;
using ds::runtime::GptConfig;
using ds::runtime::NormKind;
using ds::runtime::PositionEmbedding;

// The loss, relative to the reference's (the CPU backend's are 4e-8 off).
constexpr double kLossTolerance = 1e-4;
// A gradient element, relative to |reference| + 2% of the tensor's largest |reference|: 1e-4
// relative plus an absolute margin of 2e-6 x the tensor's scale. Rounding in fp32 leaves every
// element of a gradient an absolute error of a few ulps of the tensor's scale, not of the
// element (an element is small by cancellation of large terms), so a purely relative bound
// cannot hold near zero. The CPU backend's errors reach 1.0e-6 of the scale on these configs
// (elements near 1e-3 of it are 6e-4 off, relatively); the GPU sums in other orders, hence twice
// that. A wrong kernel is off by orders of magnitude more.
constexpr double kGradTolerance = 1e-4;
constexpr double kGradFloor = 2e-2;
constexpr float kGradScale = 4.0f;  // the gradients carry it, the loss does not
constexpr uint64_t kInitSeed = 7, kBatchSeed = 11;

struct Config {
  const char* name;
  void (*apply)(GptConfig&);
  size_t samples;
};

// test/small_gpt.h's small GPT and variants over the options whose kernels differ, then one near
// configs/gpt_demo.yml's shape (4 layers, width 256, seq 128, the byte vocabulary) where sums
// are long enough for fp32 rounding to show. No dropout: the reference has none.
const Config kConfigs[] = {
    {"small: learned, LayerNorm, GeLU, tied", [](GptConfig&) {}, 3},
    {"rotary, RMSNorm, SwiGLU, untied",
     [](GptConfig& c) {
       c.posEmb = PositionEmbedding::Rotary;
       c.norm = NormKind::RmsNorm;
       c.activation = Activation::Swiglu;
       c.intermediateSize = 96;
       c.weightTying = false;
     },
     3},
    {"sinusoidal, checkpointing",
     [](GptConfig& c) {
       c.posEmb = PositionEmbedding::Sinusoidal;
       c.attentionDropout = c.hiddenDropout = 0.0;
       c.checkpointActivations = true;
     },
     3},
    {"GQA 2 kv heads, sliding window 4",
     [](GptConfig& c) {
       c.numKvHeads = 2;
       c.slidingWindowWidth = 4;
     },
     3},
    {"larger: 4 layers, width 256, 8 heads, seq 128, rotary 50%",
     [](GptConfig& c) {
       c.numLayers = 4;
       c.hiddenSize = 256;
       c.numAttentionHeads = 8;
       c.seqLength = c.maxPositionEmbeddings = 128;
       c.vocabSize = 257;
       c.makeVocabSizeDivisibleBy = 128;
       c.posEmb = PositionEmbedding::Rotary;
       c.rotaryPct = 0.5;
       c.initMethodStd = 0.02;
     },
     4},
};

struct Outcome {
  std::string name;
  double loss = NAN, referenceLoss = NAN, lossError = NAN, gradError = NAN, seconds = NAN;
  std::string worstTensor, error;
  bool passed = false;
};

struct Options {
  DeviceKind device = DeviceKind::Cuda;
  std::string json, python, reference = DS_SOURCE_DIR "/test/reference/gpt_reference.py";
};

// The worst gradient element of each tensor (kGradTolerance's measure) and where it is.
void compareGradients(const Gpt& model, const std::vector<float>& got,
                      const std::vector<float>& want, Outcome& o) {
  o.gradError = 0.0;
  for (const auto& p : model.parameters()) {
    double scale = 0.0, worst = 0.0;
    for (size_t i = p.offset; i < p.offset + p.numel; ++i)
      scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    const double floor = scale > 0.0 ? kGradFloor * scale : 1e-30;
    for (size_t i = p.offset; i < p.offset + p.numel; ++i) {
      const double d = std::fabs(static_cast<double>(got[i]) / kGradScale - want[i]);
      worst = std::isnan(d) ? INFINITY : std::max(worst, d / (std::fabs(want[i]) + floor));
    }
    if (worst > o.gradError || o.worstTensor.empty()) {
      o.gradError = worst;
      o.worstTensor = p.name;
    }
  }
}

Outcome check(const Config& config, Accelerator& acc, const Options& opt, std::string& torch) {
  Outcome o;
  o.name = config.name;
  try {
    GptConfig c = ds::test::smallConfig();
    config.apply(c);
    Gpt model(c, {}, acc);
    std::vector<float> params(model.parameterCount());
    model.initParameters(params.data(), kInitSeed);  // on the host, as the engine does
    const Batch batch = ds::test::randomBatch(c, config.samples, c.seqLength, kBatchSeed);
    DeviceParameters access(model, params.data(), acc);
    o.loss = model.forwardBackward(batch, access, kGradScale);
    const std::vector<float> grads = access.gradients();
    const ds::test::TorchReference ref =
        ds::test::runTorchReference(opt.python, opt.reference, model, params, batch);
    torch = ref.torch;
    o.referenceLoss = ref.loss;
    o.lossError = std::fabs(o.loss - ref.loss) / std::fabs(ref.loss);
    compareGradients(model, grads, ref.grads, o);
    o.passed = o.lossError <= kLossTolerance && o.gradError <= kGradTolerance;
    // The pass above was the warm-up (allocations, cuBLASLt's first plans); this one is timed.
    access.zeroGradients();
    acc.synchronizeDevice();
    const auto start = std::chrono::steady_clock::now();
    model.forwardBackward(batch, access, kGradScale);
    acc.synchronizeDevice();
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } catch (const std::exception& e) {
    o.passed = false;
    o.error = e.what();
  }
  return o;
}

std::string jsonNumber(double v) {
  return std::isfinite(v) ? ds::test::torch_reference::number(v) : "null";
}

void writeJson(const std::string& path, const std::string& device, const std::string& torch,
               const std::vector<Outcome>& outcomes) {
  using ds::test::jsonEscaped;
  std::ofstream out(path);
  out << "{\"device\": \"" << jsonEscaped(device) << "\", \"reference\": \"PyTorch "
      << jsonEscaped(torch) << " float64 on the host CPU\", \"loss_tolerance\": " << kLossTolerance
      << ", \"grad_tolerance\": " << kGradTolerance << ", \"grad_floor\": " << kGradFloor
      << ", \"configs\": [";
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    out << (i ? ",\n  " : "\n  ") << "{\"name\": \"" << jsonEscaped(o.name)
        << "\", \"loss\": " << jsonNumber(o.loss)
        << ", \"reference_loss\": " << jsonNumber(o.referenceLoss)
        << ", \"loss_rel_error\": " << jsonNumber(o.lossError)
        << ", \"max_grad_error\": " << jsonNumber(o.gradError) << ", \"worst_tensor\": \""
        << jsonEscaped(o.worstTensor) << "\", \"seconds\": " << jsonNumber(o.seconds)
        << ", \"passed\": " << (o.passed ? "true" : "false");
    if (!o.error.empty()) out << ", \"error\": \"" << jsonEscaped(o.error) << "\"";
    out << "}";
  }
  out << "]}\n";
}

bool parse(int argc, char** argv, Options& opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    if (arg == "--device" && (value == "cuda" || value == "cpu"))
      opt.device = value == "cpu" ? DeviceKind::Cpu : DeviceKind::Cuda;
    else if (arg == "--json")
      opt.json = value;
    else if (arg == "--python")
      opt.python = value;
    else if (arg == "--reference")
      opt.reference = value;
    else
      return false;
  }
  return true;
}

// The interpreter: --python, else DS_TORCH_PYTHON (as the CPU tests take it), else the build's
// default: the main build's /usr/bin/python3 (test/torch_python.h), the GPU machine's python3
// (PyTorch's) in scripts/gpu-check's.
std::string defaultPython() {
  const char* env = std::getenv("DS_TORCH_PYTHON");
  return env && *env ? env : DS_DEFAULT_PYTHON;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, opt)) {
    std::fprintf(stderr,
                 "usage: %s [--device cuda|cpu] [--json FILE] [--python CMD] [--reference "
                 "gpt_reference.py]\n",
                 argv[0]);
    return 2;
  }
  if (opt.python.empty()) opt.python = defaultPython();
  std::string why;
#if defined(DS_GPT_CHECK_CPU_BACKEND)
  const bool available = ds::kernels::acceleratorAvailable(opt.device, &why);
#else
  // scripts/gpu-check's build has the CUDA backend alone (test/cuda/CMakeLists.txt says why).
  if (opt.device == DeviceKind::Cpu) {
    std::fprintf(stderr, "--device cpu: this build has no CPU backend (scripts/gpu-check's)\n");
    return 2;
  }
  why = ds::kernels::cuda::unavailableReason();
  const bool available = why.empty();
  if (!available) why = "no GPU visible: " + why;
#endif
  if (!available) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  if (!ds::test::torchImports(opt.python)) {
    std::printf("SKIPPED: %s cannot import torch (--python or DS_TORCH_PYTHON names another)\n",
                opt.python.c_str());
    return 77;
  }
  std::string device = "?", torch = "?";
  std::vector<Outcome> outcomes;
  try {
#if defined(DS_GPT_CHECK_CPU_BACKEND)
    Accelerator& acc = ds::kernels::accelerator(opt.device);
#else
    Accelerator& acc = ds::kernels::cuda::cudaAccelerator();
#endif
    device = acc.deviceName();
    std::printf("device: %s; reference: %s\n", device.c_str(), opt.reference.c_str());
    for (const Config& config : kConfigs) {
      outcomes.push_back(check(config, acc, opt, torch));
      const Outcome& o = outcomes.back();
      std::printf(
          "%s  %-58s loss %.6f (torch %.6f, error %.2g)  gradients: error %.2g in %s  %.3f s%s%s\n",
          o.passed ? "PASS" : "FAIL", o.name.c_str(), o.loss, o.referenceLoss, o.lossError,
          o.gradError, o.worstTensor.empty() ? "-" : o.worstTensor.c_str(), o.seconds,
          o.error.empty() ? "" : "\n      ", o.error.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {  // the device itself failed: nothing was compared
    std::printf("FAIL  %s: %s\n", device.c_str(), e.what());
    outcomes.push_back({"device", NAN, NAN, NAN, NAN, NAN, "", e.what(), false});
  }
  const long failed =
      std::count_if(outcomes.begin(), outcomes.end(), [](const Outcome& o) { return !o.passed; });
  std::printf("%zu configs, %ld failed (tolerances: loss %.0e, gradients %.0e relative)\n",
              outcomes.size(), failed, kLossTolerance, kGradTolerance);
  if (!opt.json.empty()) writeJson(opt.json, device, torch, outcomes);
  return failed == 0 ? 0 : 1;
}
