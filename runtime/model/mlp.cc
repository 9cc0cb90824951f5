// Mlp: dense layers with tanh between them (none after the last), mean-squared-error loss.
// Plain loops: the model is tiny; the GPT model brings BLAS-backed kernels.
#include "runtime/model/mlp.h"

#include <cmath>

#include "common/error.h"
#include "kernels/cpu/splitmix_impl.h"

namespace ds::runtime {
namespace {

// splitmix64: a counter-based generator, so value k of a stream needs no state.
uint64_t mix(uint64_t x) { return splitmixFinalize(x + 0x9e3779b97f4a7c15ULL); }

float uniform(uint64_t seed, uint64_t index) {  // [-1, 1)
  return static_cast<float>(static_cast<double>(mix(seed ^ mix(index)) >> 11) * 0x1.0p-52 - 1.0);
}

}  // namespace

std::string Mlp::architecture() const {
  std::string s = "mlp activation=tanh layer-sizes=";
  for (size_t l = 0; l < sizes_.size(); ++l) s += (l ? "," : "") + std::to_string(sizes_[l]);
  return s;
}

Mlp::Mlp(std::vector<int> layerSizes) : sizes_(std::move(layerSizes)) {
  if (sizes_.size() < 2) throw Error("Mlp: need at least an input and an output size");
  size_t offset = 0;
  for (size_t l = 0; l + 1 < sizes_.size(); ++l) {
    const int64_t in = sizes_[l], out = sizes_[l + 1];
    auto add = [&](std::string name, std::vector<int64_t> shape, bool decay, size_t numel) {
      ParamSpec spec;
      spec.name = std::move(name);
      spec.shape = std::move(shape);
      spec.weightDecay = decay;
      spec.offset = offset;
      spec.numel = numel;
      spec.layer = static_cast<int>(l);
      specs_.push_back(std::move(spec));
      offset += numel;
    };
    add("layers." + std::to_string(l) + ".weight", {out, in}, true, static_cast<size_t>(out * in));
    add("layers." + std::to_string(l) + ".bias", {out}, false, static_cast<size_t>(out));
  }
}

void Mlp::initTensorRange(const ParamSpec& spec, float* values, uint64_t seed, size_t begin,
                          size_t end) const {
  // Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases, as torch.nn.Linear; value k
  // of the flat layout is splitmix's draw k, already a pure function of the index.
  const int64_t fanIn = spec.name.ends_with(".weight") ? spec.shape[1] : sizes_[0];
  const float bound = 1.0f / std::sqrt(static_cast<float>(fanIn));
  for (size_t i = begin; i < end; ++i) values[i - begin] = bound * uniform(seed, spec.offset + i);
}

void Mlp::layerForward(size_t l, const float* w, const float* b, size_t n) {
  const int in = sizes_[l], out = sizes_[l + 1];
  const bool last = l + 2 == sizes_.size();
  const auto& x = activations_[l];
  auto& y = activations_[l + 1];
  y.resize(n * out);
  for (size_t s = 0; s < n; ++s)
    for (int o = 0; o < out; ++o) {
      float acc = b[o];
      for (int i = 0; i < in; ++i) acc += w[o * in + i] * x[s * in + i];
      y[s * out + o] = last ? acc : std::tanh(acc);
    }
}

const std::vector<float>& Mlp::forward(const float* params, const std::vector<float>& inputs,
                                       size_t n) {
  const size_t layers = sizes_.size() - 1;
  activations_.resize(layers + 1);
  activations_[0].assign(inputs.begin(), inputs.end());
  for (size_t l = 0; l < layers; ++l)
    layerForward(l, params + specs_[2 * l].offset, params + specs_[2 * l + 1].offset, n);
  return activations_[layers];
}

float Mlp::forwardBackward(const Batch& batch, LayerAccess& access, float gradScale) {
  const size_t layers = sizes_.size() - 1, n = batch.size;
  activations_.resize(layers + 1);
  activations_[0].assign(batch.inputs.begin(), batch.inputs.end());
  for (size_t l = 0; l < layers; ++l) {
    const float* p = access.acquireParameters(static_cast<int>(l));
    layerForward(l, p, p + specs_[2 * l + 1].offset - specs_[2 * l].offset, n);
    access.releaseParameters(static_cast<int>(l));
  }
  deltas_.resize(layers + 1);

  // Loss = mean over samples and outputs of (y - t)^2.
  const int outDim = sizes_.back();
  const auto& y = activations_[layers];
  auto& dy = deltas_[layers];
  dy.resize(n * outDim);
  double loss = 0.0;
  const float norm = 1.0f / static_cast<float>(n * outDim);
  for (size_t k = 0; k < n * outDim; ++k) {
    const float diff = y[k] - batch.targets[k];
    loss += static_cast<double>(diff) * diff;
    dy[k] = 2.0f * diff * norm * gradScale;
  }

  for (size_t l = layers; l-- > 0;) {
    const int in = sizes_[l], out = sizes_[l + 1];
    const size_t biasOffset = specs_[2 * l + 1].offset - specs_[2 * l].offset;
    const float* w = access.acquireParameters(static_cast<int>(l));
    float* gw = access.layerGradients(static_cast<int>(l));
    float* gb = gw + biasOffset;
    const auto& x = activations_[l];
    const auto& d = deltas_[l + 1];
    auto& dx = deltas_[l];
    dx.assign(n * in, 0.0f);
    for (size_t s = 0; s < n; ++s)
      for (int o = 0; o < out; ++o) {
        const float g = d[s * out + o];
        gb[o] += g;
        for (int i = 0; i < in; ++i) {
          gw[o * in + i] += g * x[s * in + i];
          dx[s * in + i] += g * w[o * in + i];
        }
      }
    if (l > 0)  // through the tanh that produced x: d tanh = 1 - tanh^2
      for (size_t k = 0; k < n * in; ++k) dx[k] *= 1.0f - x[k] * x[k];
    access.gradientsDone(static_cast<int>(l));
  }
  return static_cast<float>(loss * norm);
}

TeacherTask::TeacherTask(int inputDim, int outputDim, uint64_t taskSeed)
    : inputDim_(inputDim),
      outputDim_(outputDim),
      seed_(taskSeed),
      teacher_({inputDim, 32, outputDim}) {
  teacherParams_.resize(teacher_.parameterCount());
  // Scaled up so the teacher is clearly non-linear.
  teacher_.initParameters(teacherParams_.data(), mix(taskSeed));
  for (auto& p : teacherParams_) p *= 3.0f;
}

Batch TeacherTask::batch(uint64_t firstIndex, size_t count) const {
  Batch out;
  out.size = count;
  out.inputs.resize(count * inputDim_);
  for (size_t s = 0; s < count; ++s)
    for (int i = 0; i < inputDim_; ++i)
      out.inputs[s * inputDim_ + i] = uniform(seed_, (firstIndex + s) * inputDim_ + i);
  Mlp teacher = teacher_;  // forward() keeps scratch state; batch() stays const and thread-safe
  out.targets = teacher.forward(teacherParams_.data(), out.inputs, count);
  return out;
}

float Model::evaluate(const Batch&, LayerAccess&) {
  throw Error("this model has no evaluation pass");
}

}  // namespace ds::runtime
