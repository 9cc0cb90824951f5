// Engine::trainBatch / evalBatch: one step of micro-batches, through DeepSpeed's pipe schedules
// (runtime/parallel/pipe_schedule.h) when the model is one stage of a pipeline. The schedules say
// what to do step by step; this file does it: the stage's forward and backward, the sends and
// receives between neighbours, the tied weights' gradient sum, and the engine's boundary step.
#include <chrono>

#include "common/error.h"
#include "runtime/engine/engine.h"
#include "runtime/parallel/pipe_schedule.h"

namespace ds::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double elapsedMs(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

// What one pipe buffer holds at the stage's edges: its micro-batch, the activations received and
// sent, and their gradients. The model keeps the activations inside the stage.
struct BoundaryBuffer {
  int64_t micro = -1;  // the micro-batch loaded; -1 free
  Batch batch;
  std::vector<float> input, output, inputGrad, outputGrad;
};

// Micro-batches enter buffers in order: the first instruction that needs a buffer's micro-batch
// (its load, its activation's receive or its forward) takes the next one.
class MicroBatches {
 public:
  MicroBatches(const std::function<Batch(int64_t)>& source, int buffers)
      : source_(source), buffers_(static_cast<size_t>(buffers)) {}
  BoundaryBuffer& load(int b) {
    BoundaryBuffer& buffer = buffers_.at(static_cast<size_t>(b));
    if (buffer.micro < 0) {
      buffer.micro = next_++;
      buffer.batch = source_(buffer.micro);
    }
    return buffer;
  }
  BoundaryBuffer& at(int b) { return buffers_.at(static_cast<size_t>(b)); }

 private:
  const std::function<Batch(int64_t)>& source_;
  std::vector<BoundaryBuffer> buffers_;
  int64_t next_ = 0;
};

// Neighbour pairs (topology_groups.h): group rank 0 is the lower stage.
constexpr int kLower = 0, kUpper = 1;

// Runs a schedule's instructions in order: here the micro-batch loads and the activation hand-offs
// both schedules share, every other instruction by `run`.
template <class Run>
void runSchedule(const std::vector<PipeStep>& schedule, MicroBatches& micro,
                 const PipelineStage& stage, const ParallelGroups& grid, Run run) {
  for (const PipeStep& step : schedule)
    for (const PipeInstruction& instruction : step) {
      const int b = instruction.bufferId;
      switch (instruction.op) {
        case PipeOp::LoadMicroBatch:
          micro.load(b);
          break;
        case PipeOp::RecvActivation: {
          BoundaryBuffer& buffer = micro.load(b);
          buffer.input.resize(stage.boundaryElements(buffer.batch));
          grid.prevStage->recv(buffer.input.data(), buffer.input.size(), kLower);
          break;
        }
        case PipeOp::SendActivation: {
          const BoundaryBuffer& buffer = micro.at(b);
          grid.nextStage->send(buffer.output.data(), buffer.output.size(), kUpper);
          break;
        }
        default:
          run(instruction);
      }
    }
}

}  // namespace

PipelineStage* Engine::pipelineStage() const {
  if (!grid_.pipe || grid_.pipe->size() <= 1) return nullptr;
  return model_.pipelineStage();
}

float Engine::trainBatch(const std::function<Batch(int64_t)>& microBatch) {
  if (PipelineStage* stage = pipelineStage())
    return shareLoss(runTrainSchedule(*stage, microBatch));
  const int64_t gas = config_.batch.gradientAccumulationSteps;
  double sum = 0.0;
  for (int64_t m = 0; m < gas; ++m) {
    sum += forwardBackward(microBatch(m));
    step();
  }
  return shareLoss(static_cast<float>(sum / static_cast<double>(gas)));
}

float Engine::evalBatch(const std::function<Batch(int64_t)>& microBatch) {
  if (PipelineStage* stage = pipelineStage())
    return shareLoss(runInferenceSchedule(*stage, microBatch));
  const int64_t gas = config_.batch.gradientAccumulationSteps;
  double sum = 0.0;
  for (int64_t m = 0; m < gas; ++m) sum += evaluate(microBatch(m));
  return shareLoss(static_cast<float>(sum / static_cast<double>(gas)));
}

float Engine::runTrainSchedule(PipelineStage& stage,
                               const std::function<Batch(int64_t)>& microBatch) {
  const int gas = static_cast<int>(config_.batch.gradientAccumulationSteps);
  const int stages = grid_.pipe->size(), stageId = grid_.pipe->rank();
  const int buffers = trainPipeBuffers(gas, stages, stageId);
  stage.setPipeBuffers(buffers);
  MicroBatches micro(microBatch, buffers);
  // Gradients of loss / gas per micro-batch (times the loss scale), as forwardBackward's: the
  // activation gradients sent back carry the same factor, so every stage's sum is the step's.
  const float gradScale = static_cast<float>(scaler_.scale() / gas);
  double lossSum = 0.0;
  auto run = [&](const PipeInstruction& instruction) {
    const int b = instruction.bufferId;
    switch (instruction.op) {
      case PipeOp::ForwardPass: {
        BoundaryBuffer& buffer = micro.load(b);
        if (!stage.lastStage()) buffer.output.resize(stage.boundaryElements(buffer.batch));
        inBackward_ = false;
        forwardStart_ = Clock::now();
        const float loss = stage.stageForward(b, buffer.batch, buffer.input.data(),
                                              buffer.output.data(), *this, gradScale, true);
        // The last stage's head opens its backward inside the forward (layerGradients).
        if (inBackward_)
          times_.backwardMs += elapsedMs(backwardStart_);
        else
          times_.forwardMs += elapsedMs(forwardStart_);
        if (stage.lastStage()) lossSum += loss;
        break;
      }
      case PipeOp::RecvGrad: {
        BoundaryBuffer& buffer = micro.at(b);
        buffer.outputGrad.resize(stage.boundaryElements(buffer.batch));
        grid_.nextStage->recv(buffer.outputGrad.data(), buffer.outputGrad.size(), kUpper);
        break;
      }
      case PipeOp::BackwardPass: {
        BoundaryBuffer& buffer = micro.at(b);
        if (!stage.firstStage()) buffer.inputGrad.resize(stage.boundaryElements(buffer.batch));
        inBackward_ = true;
        backwardStart_ = Clock::now();
        stage.stageBackward(b, buffer.outputGrad.data(), buffer.inputGrad.data(), *this);
        times_.backwardMs += elapsedMs(backwardStart_);
        buffer.micro = -1;  // free for the next micro-batch; inputGrad is sent next step
        break;
      }
      case PipeOp::SendGrad: {
        const BoundaryBuffer& buffer = micro.at(b);
        grid_.prevStage->send(buffer.inputGrad.data(), buffer.inputGrad.size(), kLower);
        break;
      }
      case PipeOp::ReduceTiedGrads:
        reduceTiedGradients(stage);
        break;
      case PipeOp::OptimizerStep:
        queue_->waitIdle();
        microSteps_ += gas;
        stepAtBoundary();
        queue_->waitIdle();
        break;
      default:  // ReduceGrads is the boundary step's; the hand-offs are runSchedule's
        break;
    }
  };
  runSchedule(trainSchedule(gas, stages, stageId), micro, stage, grid_, run);
  return static_cast<float>(lossSum / gas);
}

float Engine::runInferenceSchedule(PipelineStage& stage,
                                   const std::function<Batch(int64_t)>& microBatch) {
  const int gas = static_cast<int>(config_.batch.gradientAccumulationSteps);
  const int stages = grid_.pipe->size(), stageId = grid_.pipe->rank();
  stage.setPipeBuffers(kInferencePipeBuffers);
  MicroBatches micro(microBatch, kInferencePipeBuffers);
  double lossSum = 0.0;
  auto run = [&](const PipeInstruction& instruction) {
    const int b = instruction.bufferId;
    if (instruction.op != PipeOp::ForwardPass)
      throw Error("pipeline: " + toString(instruction) + " in an inference schedule");
    BoundaryBuffer& buffer = micro.load(b);
    if (!stage.lastStage()) buffer.output.resize(stage.boundaryElements(buffer.batch));
    inBackward_ = false;
    const float loss = stage.stageForward(b, buffer.batch, buffer.input.data(),
                                          buffer.output.data(), *this, 0.0f, false);
    if (stage.lastStage()) lossSum += loss;
    buffer.micro = -1;  // its output is sent next step, before the buffer's next forward
  };
  runSchedule(inferenceSchedule(gas, stages, stageId), micro, stage, grid_, run);
  queue_->waitIdle();
  return static_cast<float>(lossSum / gas);
}

float Engine::shareLoss(float lastStageMean) {
  float loss = lastStageMean;
  const bool pipelined = pipelineStage() != nullptr;
  // The data group's ranks are all on one stage: only the last stage's groups average.
  if (!pipelined || grid_.pipe->rank() == grid_.pipe->size() - 1) {
    queue_->run([&] { comm_.allReduce(&loss, 1); });
    loss /= static_cast<float>(comm_.size());
  }
  if (pipelined) grid_.pipe->broadcast(&loss, 1, DType::F32, grid_.pipe->size() - 1);
  return loss;
}

void Engine::reduceTiedGradients(PipelineStage& stage) {
  const std::vector<std::string> tied = stage.tiedParameters();
  if (tied.empty()) return;
  if (!grid_.tied)
    throw Error("pipeline: this stage shares \"" + tied.front() +
                "\" with the other end of the pipeline, but the engine has no tied group "
                "(ParallelGroups::tied)");
  for (const std::string& name : tied) {
    const std::vector<ParamSpec>& specs = dense().specs;
    size_t t = 0;
    while (t < specs.size() && specs[t].name != name) ++t;
    if (t == specs.size())
      throw Error("pipeline: the tied tensor \"" + name + "\" is not in this stage's parameters");
    dense().zero->allReduceTensorGradient(t, *grid_.tied);
  }
  queue_->waitIdle();
}

}  // namespace ds::runtime
