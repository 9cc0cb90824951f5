// DeepSpeed's TrainSchedule (1F1B) and InferenceSchedule: every step of a few small pipelines
// written out from its generator's rules, then properties over many (micro-batches, stages):
// each micro-batch's forward and backward run once per stage in order, buffers are not reused
// while live, each step's sends meet the neighbour's receives in order, the optimizer step is last.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/parallel/pipe_schedule.h"

using namespace ds;
using namespace ds::runtime;
using Lines = std::vector<std::string>;

namespace {

Lines render(const std::vector<PipeStep>& steps) {
  Lines lines;
  for (const auto& step : steps) lines.push_back(toString(step));
  return lines;
}

const std::string kStepEnd = "ReduceTiedGrads(), ReduceGrads(), OptimizerStep()";

}  // namespace

TEST_CASE("TrainSchedule 4 micro-batches on 2 stages", "[pipe_schedule]") {
  // Stage 0 runs forwards on even steps, stage 1 on odd ones; both hold 2 buffers.
  CHECK(trainPipeBuffers(4, 2, 0) == 2);
  CHECK(trainPipeBuffers(4, 2, 1) == 2);
  CHECK(render(trainSchedule(4, 2, 0)) ==
        Lines{"LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)",
              "SendActivation(buffer_id=0)",
              "LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)",
              "RecvGrad(buffer_id=0), SendActivation(buffer_id=1), BackwardPass(buffer_id=0)",
              "LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)",
              "RecvGrad(buffer_id=1), SendActivation(buffer_id=0), BackwardPass(buffer_id=1)",
              "LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)",
              "RecvGrad(buffer_id=0), SendActivation(buffer_id=1), BackwardPass(buffer_id=0)", "",
              "RecvGrad(buffer_id=1), BackwardPass(buffer_id=1), " + kStepEnd});
  CHECK(render(trainSchedule(4, 2, 1)) ==
        Lines{"",
              "RecvActivation(buffer_id=0), LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)",
              "BackwardPass(buffer_id=0)",
              "SendGrad(buffer_id=0), RecvActivation(buffer_id=1), LoadMicroBatch(buffer_id=1), "
              "ForwardPass(buffer_id=1)",
              "BackwardPass(buffer_id=1)",
              "SendGrad(buffer_id=1), RecvActivation(buffer_id=0), LoadMicroBatch(buffer_id=0), "
              "ForwardPass(buffer_id=0)",
              "BackwardPass(buffer_id=0)",
              "SendGrad(buffer_id=0), RecvActivation(buffer_id=1), LoadMicroBatch(buffer_id=1), "
              "ForwardPass(buffer_id=1)",
              "BackwardPass(buffer_id=1)", "SendGrad(buffer_id=1), " + kStepEnd});
}

TEST_CASE("TrainSchedule 3 micro-batches on 3 stages", "[pipe_schedule]") {
  // Stage 0 holds all three forwards before its first backward: 3 buffers; the others 2.
  CHECK(trainPipeBuffers(3, 3, 0) == 3);
  CHECK(trainPipeBuffers(3, 3, 1) == 2);
  CHECK(trainPipeBuffers(3, 3, 2) == 2);
  CHECK(
      render(trainSchedule(3, 3, 0)) ==
      Lines{"LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)", "SendActivation(buffer_id=0)",
            "LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)", "SendActivation(buffer_id=1)",
            "LoadMicroBatch(buffer_id=2), ForwardPass(buffer_id=2)",
            "RecvGrad(buffer_id=0), SendActivation(buffer_id=2), BackwardPass(buffer_id=0)", "",
            "RecvGrad(buffer_id=1), BackwardPass(buffer_id=1)", "",
            "RecvGrad(buffer_id=2), BackwardPass(buffer_id=2), " + kStepEnd});
  CHECK(render(trainSchedule(3, 3, 1)) ==
        Lines{"", "RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)",
              "SendActivation(buffer_id=0)",
              "RecvActivation(buffer_id=1), ForwardPass(buffer_id=1)",
              "RecvGrad(buffer_id=0), SendActivation(buffer_id=1), BackwardPass(buffer_id=0)",
              "SendGrad(buffer_id=0), RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)",
              "RecvGrad(buffer_id=1), SendActivation(buffer_id=0), BackwardPass(buffer_id=1)",
              "SendGrad(buffer_id=1)", "RecvGrad(buffer_id=0), BackwardPass(buffer_id=0)",
              "SendGrad(buffer_id=0), " + kStepEnd});
  CHECK(render(trainSchedule(3, 3, 2)) ==
        Lines{"", "",
              "RecvActivation(buffer_id=0), LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)",
              "BackwardPass(buffer_id=0)",
              "SendGrad(buffer_id=0), RecvActivation(buffer_id=1), LoadMicroBatch(buffer_id=1), "
              "ForwardPass(buffer_id=1)",
              "BackwardPass(buffer_id=1)",
              "SendGrad(buffer_id=1), RecvActivation(buffer_id=0), LoadMicroBatch(buffer_id=0), "
              "ForwardPass(buffer_id=0)",
              "BackwardPass(buffer_id=0)", "SendGrad(buffer_id=0)", kStepEnd});
}

TEST_CASE("TrainSchedule 1 micro-batch on 2 stages", "[pipe_schedule]") {
  CHECK(trainPipeBuffers(1, 2, 0) == 2);  // at least 2, though one micro-batch needs one
  CHECK(render(trainSchedule(1, 2, 0)) ==
        Lines{"LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)",
              "SendActivation(buffer_id=0)", "",
              "RecvGrad(buffer_id=0), BackwardPass(buffer_id=0), " + kStepEnd});
  CHECK(render(trainSchedule(1, 2, 1)) ==
        Lines{"",
              "RecvActivation(buffer_id=0), LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)",
              "BackwardPass(buffer_id=0)", "SendGrad(buffer_id=0), " + kStepEnd});
}

TEST_CASE("TrainSchedule on one stage is gradient accumulation", "[pipe_schedule]") {
  CHECK(render(trainSchedule(2, 1, 0)) ==
        Lines{"LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)", "BackwardPass(buffer_id=0)",
              "LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)",
              "BackwardPass(buffer_id=1), " + kStepEnd});
}

TEST_CASE("InferenceSchedule alternates two buffers", "[pipe_schedule]") {
  // Even stages receive into buffer step % 2, odd stages into (step + 1) % 2; a stage sends
  // what it computed the step before.
  CHECK(render(inferenceSchedule(3, 2, 0)) ==
        Lines{"LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)",
              "LoadMicroBatch(buffer_id=1), SendActivation(buffer_id=0), ForwardPass(buffer_id=1)",
              "LoadMicroBatch(buffer_id=0), SendActivation(buffer_id=1), ForwardPass(buffer_id=0)",
              "SendActivation(buffer_id=0)"});
  CHECK(
      render(inferenceSchedule(3, 2, 1)) ==
      Lines{"",
            "LoadMicroBatch(buffer_id=0), RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)",
            "LoadMicroBatch(buffer_id=1), RecvActivation(buffer_id=1), ForwardPass(buffer_id=1)",
            "LoadMicroBatch(buffer_id=0), RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)"});
  // The middle stage (odd) receives before it sends.
  CHECK(render(inferenceSchedule(2, 3, 1)) ==
        Lines{"", "RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)",
              "RecvActivation(buffer_id=1), SendActivation(buffer_id=0), ForwardPass(buffer_id=1)",
              "SendActivation(buffer_id=1)"});
  CHECK(
      render(inferenceSchedule(2, 3, 2)) ==
      Lines{"", "",
            "LoadMicroBatch(buffer_id=0), RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)",
            "LoadMicroBatch(buffer_id=1), RecvActivation(buffer_id=1), ForwardPass(buffer_id=1)"});
}

TEST_CASE("pipe schedules refuse impossible shapes", "[pipe_schedule]") {
  CHECK_THROWS_AS(trainSchedule(0, 2, 0), Error);
  CHECK_THROWS_AS(trainSchedule(4, 0, 0), Error);
  CHECK_THROWS_AS(trainSchedule(4, 2, 2), Error);
  CHECK_THROWS_AS(trainSchedule(4, 2, -1), Error);
  CHECK_THROWS_AS(inferenceSchedule(4, 2, 2), Error);
  CHECK_THROWS_AS(trainPipeBuffers(4, 2, 5), Error);
}
