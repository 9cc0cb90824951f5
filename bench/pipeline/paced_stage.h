// bench_pipeline's stand-in for a pipeline stage's compute: a Model that is a Gpt stage whose every
// forward and backward pass lasts a fixed time (the real pass, then a sleep to the deadline), and
// that records when each pass ran. Fixed costs let the schedule be measured, not the CPU count.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/model/gpt.h"

namespace ds::bench {

class PacedStage : public runtime::Model, public runtime::PipelineStage {
 public:
  using Clock = std::chrono::steady_clock;
  struct Pass {
    int step;
    Clock::time_point start, end;
    bool overran;  // the real pass took longer than its fixed time
  };

  // forward/backward of zero: no pacing, each pass takes what the real one takes.
  PacedStage(runtime::Gpt& inner, std::chrono::microseconds forward,
             std::chrono::microseconds backward)
      : inner_(inner), stage_(inner.pipelineStage()), forward_(forward), backward_(backward) {}

  void setStep(int step) { step_ = step; }
  const std::vector<Pass>& passes() const { return passes_; }

  const std::vector<runtime::ParamSpec>& parameters() const override {
    return inner_.parameters();
  }
  int layerCount() const override { return inner_.layerCount(); }
  std::string architecture() const override { return inner_.architecture(); }
  void initTensorRange(const runtime::ParamSpec& spec, float* values, uint64_t seed, size_t begin,
                       size_t end) const override {
    inner_.initTensorRange(spec, values, seed, begin, end);
  }
  float forwardBackward(const runtime::Batch& batch, runtime::LayerAccess& access,
                        float gradScale) override {
    return inner_.forwardBackward(batch, access, gradScale);
  }
  float evaluate(const runtime::Batch& batch, runtime::LayerAccess& access) override {
    return inner_.evaluate(batch, access);
  }
  runtime::PipelineStage* pipelineStage() override { return stage_ ? this : nullptr; }

  bool firstStage() const override { return stage_->firstStage(); }
  bool lastStage() const override { return stage_->lastStage(); }
  size_t boundaryElements(const runtime::Batch& batch) const override {
    return stage_->boundaryElements(batch);
  }
  void setPipeBuffers(int buffers) override { stage_->setPipeBuffers(buffers); }
  float stageForward(int buffer, const runtime::Batch& batch, const float* input, float* output,
                     runtime::LayerAccess& access, float gradScale, bool train) override {
    const Clock::time_point start = Clock::now();
    const float loss = stage_->stageForward(buffer, batch, input, output, access, gradScale, train);
    pace(start, forward_);
    return loss;
  }
  void stageBackward(int buffer, const float* outputGrad, float* inputGrad,
                     runtime::LayerAccess& access) override {
    const Clock::time_point start = Clock::now();
    stage_->stageBackward(buffer, outputGrad, inputGrad, access);
    pace(start, backward_);
  }
  std::vector<std::string> tiedParameters() const override { return stage_->tiedParameters(); }

 private:
  void pace(Clock::time_point start, std::chrono::microseconds cost) {
    const Clock::time_point deadline = start + cost;
    const bool overran = cost.count() > 0 && Clock::now() > deadline;
    if (cost.count() > 0) std::this_thread::sleep_until(deadline);
    passes_.push_back({step_, start, Clock::now(), overran});
  }

  runtime::Gpt& inner_;
  runtime::PipelineStage* stage_;
  std::chrono::microseconds forward_, backward_;
  int step_ = -1;
  std::vector<Pass> passes_;
};

}  // namespace ds::bench
