// Properties of DeepSpeed's pipeline schedules over many (micro-batches, stages), checked on the
// instruction streams of all stages together: what a pipeline engine relies on to neither deadlock
// nor overwrite a live buffer, and to step the optimizer once, after every backward.
#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "runtime/parallel/pipe_schedule.h"

using namespace ds::runtime;

namespace {

struct Event {
  int step;
  int position;  // index within the step: orders events of one step
  int buffer;
  bool before(const Event& other) const {
    return step < other.step || (step == other.step && position < other.position);
  }
};

// One stage's instructions by kind, in the order it issues them.
std::map<PipeOp, std::vector<Event>> eventsOf(const std::vector<PipeStep>& steps) {
  std::map<PipeOp, std::vector<Event>> events;
  for (int t = 0; t < static_cast<int>(steps.size()); ++t)
    for (int i = 0; i < static_cast<int>(steps[t].size()); ++i)
      events[steps[t][i].op].push_back({t, i, steps[t][i].bufferId});
  return events;
}

// The exchanges a stage takes part in with its next (toward = true) or previous neighbour in one
// step, named from the channel's point of view so the two ends compare equal: 'a' an activation
// moving forward, 'g' a gradient moving back.
std::vector<char> exchanges(const PipeStep& step, bool towardNext) {
  std::vector<char> out;
  for (const auto& in : step) {
    if (towardNext && in.op == PipeOp::SendActivation) out.push_back('a');
    if (towardNext && in.op == PipeOp::RecvGrad) out.push_back('g');
    if (!towardNext && in.op == PipeOp::RecvActivation) out.push_back('a');
    if (!towardNext && in.op == PipeOp::SendGrad) out.push_back('g');
  }
  return out;
}

}  // namespace

TEST_CASE("TrainSchedule properties over many pipelines", "[pipe_schedule]") {
  for (int stages = 1; stages <= 6; ++stages) {
    for (int micro = 1; micro <= 9; ++micro) {
      std::vector<std::vector<PipeStep>> all;
      std::vector<std::map<PipeOp, std::vector<Event>>> ev;
      for (int s = 0; s < stages; ++s) {
        all.push_back(trainSchedule(micro, stages, s));
        ev.push_back(eventsOf(all.back()));
      }
      for (int s = 0; s < stages; ++s) {
        INFO("micro-batches " << micro << ", stages " << stages << ", stage " << s);
        auto& e = ev[s];
        const int buffers = trainPipeBuffers(micro, stages, s);
        const bool first = s == 0, last = s == stages - 1;
        REQUIRE(static_cast<int>(all[s].size()) == 2 * (micro + stages - 1));
        REQUIRE(static_cast<int>(e[PipeOp::ForwardPass].size()) == micro);
        REQUIRE(static_cast<int>(e[PipeOp::BackwardPass].size()) == micro);
        REQUIRE(e[PipeOp::LoadMicroBatch].size() == (first || last ? size_t(micro) : 0u));
        REQUIRE(e[PipeOp::RecvActivation].size() == (first ? 0u : size_t(micro)));
        REQUIRE(e[PipeOp::SendGrad].size() == (first ? 0u : size_t(micro)));
        REQUIRE(e[PipeOp::SendActivation].size() == (last ? 0u : size_t(micro)));
        REQUIRE(e[PipeOp::RecvGrad].size() == (last ? 0u : size_t(micro)));
        for (int b = 0; b < micro; ++b) {
          // Micro-batch b is the b-th of each kind, always in buffer b % buffers.
          const Event& fwd = e[PipeOp::ForwardPass][b];
          const Event& bwd = e[PipeOp::BackwardPass][b];
          CHECK(fwd.buffer == b % buffers);
          CHECK(bwd.buffer == b % buffers);
          CHECK(fwd.before(bwd));
          // The buffer is free again: the micro-batch that used it last has finished backward
          // and sent its gradient back.
          if (b >= buffers) {
            CHECK(e[PipeOp::BackwardPass][b - buffers].before(fwd));
            if (!first) CHECK(e[PipeOp::SendGrad][b - buffers].before(fwd));
          }
          if (first || last) {
            CHECK(e[PipeOp::LoadMicroBatch][b].buffer == fwd.buffer);
            CHECK(e[PipeOp::LoadMicroBatch][b].step == fwd.step);
            CHECK(e[PipeOp::LoadMicroBatch][b].before(fwd));
          }
          if (!first) {
            CHECK(e[PipeOp::RecvActivation][b].buffer == fwd.buffer);
            CHECK(e[PipeOp::RecvActivation][b].before(fwd));
            CHECK(e[PipeOp::SendGrad][b].buffer == bwd.buffer);
            CHECK(bwd.before(e[PipeOp::SendGrad][b]));
            // The previous stage ran this forward earlier and runs this backward later.
            CHECK(ev[s - 1][PipeOp::ForwardPass][b].step < fwd.step);
            CHECK(bwd.step < ev[s - 1][PipeOp::BackwardPass][b].step);
          }
          if (!last) {
            CHECK(e[PipeOp::SendActivation][b].buffer == fwd.buffer);
            CHECK(fwd.before(e[PipeOp::SendActivation][b]));
            CHECK(e[PipeOp::RecvGrad][b].buffer == bwd.buffer);
            CHECK(e[PipeOp::RecvGrad][b].before(bwd));
          }
        }
        // The batch ends on every stage with the three reductions, and only there.
        const PipeStep& end = all[s].back();
        REQUIRE(end.size() >= 3);
        CHECK(end[end.size() - 3].op == PipeOp::ReduceTiedGrads);
        CHECK(end[end.size() - 2].op == PipeOp::ReduceGrads);
        CHECK(end[end.size() - 1].op == PipeOp::OptimizerStep);
        CHECK(e[PipeOp::ReduceTiedGrads].size() == 1);
        CHECK(e[PipeOp::ReduceGrads].size() == 1);
        CHECK(e[PipeOp::OptimizerStep].size() == 1);
      }
      // Within each step, a stage's exchanges with its next neighbour are the neighbour's with it,
      // in the same order: a barrier between steps cannot deadlock.
      for (int s = 0; s + 1 < stages; ++s)
        for (size_t t = 0; t < all[s].size(); ++t) {
          INFO("micro-batches " << micro << ", stages " << stages << ", stage " << s << ", step "
                                << t);
          CHECK(exchanges(all[s][t], true) == exchanges(all[s + 1][t], false));
        }
    }
  }
}

TEST_CASE("InferenceSchedule properties over many pipelines", "[pipe_schedule]") {
  for (int stages = 1; stages <= 6; ++stages) {
    for (int micro = 1; micro <= 9; ++micro) {
      std::vector<std::vector<PipeStep>> all;
      for (int s = 0; s < stages; ++s) all.push_back(inferenceSchedule(micro, stages, s));
      for (int s = 0; s < stages; ++s) {
        INFO("micro-batches " << micro << ", stages " << stages << ", stage " << s);
        auto e = eventsOf(all[s]);
        const bool first = s == 0, last = s == stages - 1;
        REQUIRE(static_cast<int>(all[s].size()) == micro + stages - 1);
        REQUIRE(static_cast<int>(e[PipeOp::ForwardPass].size()) == micro);
        REQUIRE(e[PipeOp::SendActivation].size() == (last ? 0u : size_t(micro)));
        REQUIRE(e[PipeOp::RecvActivation].size() == (first ? 0u : size_t(micro)));
        CHECK(e[PipeOp::BackwardPass].empty());
        CHECK(e[PipeOp::OptimizerStep].empty());
        for (int b = 0; b < micro; ++b) {
          const Event& fwd = e[PipeOp::ForwardPass][b];
          CHECK(fwd.step == b + s);  // one step behind the previous stage
          CHECK(fwd.buffer >= 0);
          CHECK(fwd.buffer < kInferencePipeBuffers);
          if (!first) {
            CHECK(e[PipeOp::RecvActivation][b].buffer == fwd.buffer);
            CHECK(e[PipeOp::RecvActivation][b].before(fwd));
          }
          if (!last) {
            // Sent the step after it was computed, from the buffer it was computed in, before
            // the next forward in that buffer (two steps later) overwrites it.
            CHECK(e[PipeOp::SendActivation][b].step == fwd.step + 1);
            CHECK(e[PipeOp::SendActivation][b].buffer == fwd.buffer);
          }
          if (b > 0) CHECK(e[PipeOp::ForwardPass][b - 1].buffer != fwd.buffer);
        }
      }
      for (int s = 0; s + 1 < stages; ++s)
        for (size_t t = 0; t < all[s].size(); ++t) {
          INFO("micro-batches " << micro << ", stages " << stages << ", stage " << s << ", step "
                                << t);
          CHECK(exchanges(all[s][t], true) == exchanges(all[s + 1][t], false));
        }
    }
  }
}
