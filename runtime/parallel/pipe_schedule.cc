// The step -> instruction rules of DeepSpeed's TrainSchedule and InferenceSchedule, written from
// their behaviour so that a stage here issues what a DeepSpeed stage would, step for step.
#include "runtime/parallel/pipe_schedule.h"

#include <algorithm>

#include "common/error.h"

namespace ds::runtime {

namespace {

const char* opName(PipeOp op) {
  switch (op) {
    case PipeOp::LoadMicroBatch:
      return "LoadMicroBatch";
    case PipeOp::ForwardPass:
      return "ForwardPass";
    case PipeOp::BackwardPass:
      return "BackwardPass";
    case PipeOp::SendActivation:
      return "SendActivation";
    case PipeOp::RecvActivation:
      return "RecvActivation";
    case PipeOp::SendGrad:
      return "SendGrad";
    case PipeOp::RecvGrad:
      return "RecvGrad";
    case PipeOp::ReduceTiedGrads:
      return "ReduceTiedGrads";
    case PipeOp::ReduceGrads:
      return "ReduceGrads";
    case PipeOp::OptimizerStep:
      return "OptimizerStep";
  }
  return "?";
}

void checkShape(const char* what, int microBatches, int stages, int stageId) {
  if (microBatches < 1 || stages < 1 || stageId < 0 || stageId >= stages)
    throw Error(std::string(what) +
                ": expected micro_batches >= 1, stages >= 1 and 0 <= stage_id "
                "< stages, got micro_batches " +
                std::to_string(microBatches) + ", stages " + std::to_string(stages) +
                ", stage_id " + std::to_string(stageId));
}

bool isEven(int n) { return n % 2 == 0; }

// The micro-batch a training step works on, and whether it is a forward. Stages of one parity
// run forwards on the steps of that parity; the offsets make micro-batch b's forward reach stage
// s one step after stage s-1's, and its backward leave stage s one step after stage s+1's.
struct StepWork {
  int microBatch;
  bool forward;
};

StepWork trainStepWork(int step, int stages, int stageId) {
  const bool evenStep = isEven(step);
  if (evenStep == isEven(stageId)) {
    const int base = evenStep ? step / 2 : (step - 1) / 2;
    return {base - stageId / 2, true};
  }
  if (evenStep) return {step / 2 - stages + (stageId + 1) / 2, false};
  return {(step - 1) / 2 - stages + 1 + stageId / 2, false};
}

}  // namespace

std::string toString(const PipeInstruction& instruction) {
  std::string text = opName(instruction.op);
  if (instruction.bufferId == PipeInstruction::kNoBuffer) return text + "()";
  return text + "(buffer_id=" + std::to_string(instruction.bufferId) + ")";
}

std::string toString(const PipeStep& step) {
  std::string text;
  for (const auto& instruction : step) text += (text.empty() ? "" : ", ") + toString(instruction);
  return text;
}

int trainPipeBuffers(int microBatches, int stages, int stageId) {
  checkShape("trainPipeBuffers", microBatches, stages, stageId);
  return std::max(2, std::min(stages - stageId, microBatches));
}

std::vector<PipeStep> trainSchedule(int microBatches, int stages, int stageId) {
  checkShape("trainSchedule", microBatches, stages, stageId);
  const int buffers = trainPipeBuffers(microBatches, stages, stageId);
  const auto valid = [&](int microBatch) { return microBatch >= 0 && microBatch < microBatches; };
  const bool hasPrev = stageId > 0;
  const bool hasNext = stageId < stages - 1;
  const int totalSteps = 2 * (microBatches + stages - 1);

  std::vector<PipeStep> steps;
  int prevMicroBatch = -1;
  for (int step = 0; step < totalSteps; ++step) {
    const auto [microBatch, forward] = trainStepWork(step, stages, stageId);
    // Buffers cycle over the micro-batches; the previous step's micro-batch is the one whose
    // result (activation after a forward, gradient after a backward) this step sends.
    const int current = valid(microBatch) ? microBatch % buffers : PipeInstruction::kNoBuffer;
    const int previous =
        valid(prevMicroBatch) ? prevMicroBatch % buffers : PipeInstruction::kNoBuffer;
    PipeStep cmds;
    if (forward) {
      if (valid(prevMicroBatch) && hasPrev) cmds.push_back({PipeOp::SendGrad, previous});
      if (valid(microBatch) && hasPrev) cmds.push_back({PipeOp::RecvActivation, current});
    } else {
      if (valid(microBatch) && hasNext) cmds.push_back({PipeOp::RecvGrad, current});
      if (valid(prevMicroBatch) && hasNext) cmds.push_back({PipeOp::SendActivation, previous});
    }
    // The first stage loads inputs, the last stage labels.
    if ((!hasPrev || !hasNext) && forward && valid(microBatch))
      cmds.push_back({PipeOp::LoadMicroBatch, current});
    if (valid(microBatch))
      cmds.push_back({forward ? PipeOp::ForwardPass : PipeOp::BackwardPass, current});
    if (step == totalSteps - 1) {
      cmds.push_back({PipeOp::ReduceTiedGrads});
      cmds.push_back({PipeOp::ReduceGrads});
      cmds.push_back({PipeOp::OptimizerStep});
    }
    prevMicroBatch = microBatch;
    steps.push_back(std::move(cmds));
  }
  return steps;
}

std::vector<PipeStep> inferenceSchedule(int microBatches, int stages, int stageId) {
  checkShape("inferenceSchedule", microBatches, stages, stageId);
  const auto valid = [&](int microBatch) { return microBatch >= 0 && microBatch < microBatches; };
  const bool hasPrev = stageId > 0;
  const bool hasNext = stageId < stages - 1;
  std::vector<PipeStep> steps;
  for (int step = 0; step < microBatches + stages - 1; ++step) {
    const int microBatch = step - stageId;
    // Neighbouring stages swap the roles of the two buffers each step, so what one stage sends
    // from a buffer its neighbour receives into the other.
    const int recvBuffer = isEven(stageId) ? step % 2 : (step + 1) % 2;
    const int sendBuffer = 1 - recvBuffer;
    PipeStep cmds;
    if ((!hasPrev || !hasNext) && valid(microBatch))
      cmds.push_back({PipeOp::LoadMicroBatch, recvBuffer});
    const bool send = hasNext && valid(microBatch - 1);
    const bool recv = hasPrev && valid(microBatch);
    // DeepSpeed's order within a step: even stages send before receiving, odd stages receive
    // before sending.
    if (isEven(stageId)) {
      if (send) cmds.push_back({PipeOp::SendActivation, sendBuffer});
      if (recv) cmds.push_back({PipeOp::RecvActivation, recvBuffer});
    } else {
      if (recv) cmds.push_back({PipeOp::RecvActivation, recvBuffer});
      if (send) cmds.push_back({PipeOp::SendActivation, sendBuffer});
    }
    if (valid(microBatch)) cmds.push_back({PipeOp::ForwardPass, recvBuffer});
    steps.push_back(std::move(cmds));
  }
  return steps;
}

}  // namespace ds::runtime
