// DeepSpeed's pipeline schedules (runtime/pipe/schedule.py) as pure instruction generators: for a
// stage of a pipeline, the steps of one batch, each a list of instructions with their buffer ids.
// Executing them (the tensors, the sends and receives) is the pipeline engine's job, not this one.
#pragma once

#include <string>
#include <vector>

namespace ds::runtime {

enum class PipeOp {
  LoadMicroBatch,
  ForwardPass,
  BackwardPass,
  SendActivation,
  RecvActivation,
  SendGrad,
  RecvGrad,
  ReduceTiedGrads,
  ReduceGrads,
  OptimizerStep,
};

struct PipeInstruction {
  PipeOp op;
  int bufferId = kNoBuffer;  // which of the stage's pipe buffers; kNoBuffer for the batch-end ops
  static constexpr int kNoBuffer = -1;
  bool operator==(const PipeInstruction&) const = default;
};

// One step: DeepSpeed's unit of atomicity. A barrier between two steps cannot deadlock, because
// every send in a step is received by the neighbour in the same step, in the same order.
using PipeStep = std::vector<PipeInstruction>;

// DeepSpeed's call_to_str form: "ForwardPass(buffer_id=1)", "ReduceGrads()".
std::string toString(const PipeInstruction& instruction);
std::string toString(const PipeStep& step);  // the instructions joined with ", "

// TrainSchedule: one-forward-one-backward over 2 x (microBatches + stages - 1) steps, forwards on
// the steps whose parity is the stage's, backwards on the others; the batch ends with
// ReduceTiedGrads, ReduceGrads, OptimizerStep. Throws ds::Error for microBatches or stages below
// 1 or a stageId outside [0, stages).
std::vector<PipeStep> trainSchedule(int microBatches, int stages, int stageId);
// Its num_pipe_buffers: the forwards a stage may hold before their backwards, at least 2.
int trainPipeBuffers(int microBatches, int stages, int stageId);

// InferenceSchedule: microBatches + stages - 1 forward-only steps over two alternating buffers.
std::vector<PipeStep> inferenceSchedule(int microBatches, int stages, int stageId);
constexpr int kInferencePipeBuffers = 2;

}  // namespace ds::runtime
