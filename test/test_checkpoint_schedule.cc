// NeoX's checkpoint schedule: the iterations a run saves at, against lists worked by hand from
// NeoX's rule (megatron/training.py is_save_iter plus the save after training), and the predicate
// the training loop asks against the list.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/config/checkpoint_schedule.h"

using ds::runtime::CheckpointScale;
using ds::runtime::CheckpointSchedule;
using ds::runtime::isNeoxSaveIteration;
using ds::runtime::neoxSaveIterations;

namespace {

CheckpointSchedule schedule(double factor, CheckpointScale scale, std::vector<int64_t> extra = {}) {
  CheckpointSchedule s;
  s.factor = factor;
  s.scale = scale;
  s.extraSaveIters = std::move(extra);
  return s;
}

std::vector<int64_t> range(int64_t from, int64_t to, int64_t step) {
  std::vector<int64_t> out;
  for (int64_t i = from; i <= to; i += step) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("checkpoint schedule: NeoX's save iterations worked by hand", "[checkpoint_schedule]") {
  const auto lin = CheckpointScale::Linear;
  const auto log = CheckpointScale::Log;
  struct Case {
    CheckpointSchedule s;
    int64_t trainIters;
    std::vector<int64_t> expected;
  };
  const std::vector<Case> cases = {
      // NeoX's own documentation examples.
      {schedule(20, lin), 100, {20, 40, 60, 80, 100}},
      {schedule(2, log), 100, {1, 2, 4, 8, 16, 32, 64, 100}},
      // Most of NeoX's model configs: checkpoint-factor 1000 over 320000 iterations.
      {schedule(1000, lin), 320000, range(1000, 320000, 1000)},
      // The last iteration is saved even off the schedule; a whole float factor is an integer.
      {schedule(30.0, lin), 100, {30, 60, 90, 100}},
      {schedule(3, log), 81, {1, 3, 9, 27, 81}},
      {schedule(10, log), 5000, {1, 10, 100, 1000, 5000}},
      // int() of each float power: 1, 1.5, 2.25, 3.375, 5.06, 7.59, 11.39, 17.09 (25.6 > 20).
      {schedule(1.5, log), 20, {1, 2, 3, 5, 7, 11, 17, 20}},
      // extra-save-iters: 0 is the save before training; past train-iters is never reached.
      {schedule(10, log, {0, 5, 1500}), 1000, {0, 1, 5, 10, 100, 1000}},
      {schedule(0, lin, {3, 10, 30}), 50, {3, 10, 30, 50}},
      {schedule(25, lin, {10, 50}), 60, {10, 25, 50, 60}},
      // No factor, no extras: the save after training only. A factor past train-iters: same.
      {schedule(0, lin), 7, {7}},
      {schedule(500, lin), 100, {100}},
      {schedule(0, log), 7, {7}},
  };
  for (const Case& c : cases) {
    INFO("factor " << c.s.factor << " scale " << (c.s.scale == lin ? "linear" : "log")
                   << " train-iters " << c.trainIters);
    CHECK(neoxSaveIterations(c.s, c.trainIters) == c.expected);
  }
}

TEST_CASE("checkpoint schedule: the loop's predicate agrees with the list",
          "[checkpoint_schedule]") {
  const std::vector<CheckpointSchedule> schedules = {
      schedule(1, CheckpointScale::Linear),      schedule(7, CheckpointScale::Linear, {0, 3}),
      schedule(2, CheckpointScale::Log),         schedule(1.3, CheckpointScale::Log, {50}),
      schedule(0, CheckpointScale::Linear, {0}), schedule(4, CheckpointScale::Log)};
  for (const auto& s : schedules)
    for (int64_t trainIters : {1, 2, 17, 64, 300}) {
      std::vector<int64_t> accepted;
      for (int64_t i = -2; i <= trainIters + 5; ++i)
        if (isNeoxSaveIteration(s, i, trainIters)) accepted.push_back(i);
      INFO("factor " << s.factor << " train-iters " << trainIters);
      CHECK(accepted == neoxSaveIterations(s, trainIters));
    }
}

TEST_CASE("checkpoint schedule: invalid settings are refused by key", "[checkpoint_schedule]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(ds::runtime::validateCheckpointSchedule(schedule(2.5, CheckpointScale::Linear)),
                    Contains("checkpoint-factor") && Contains("whole number") &&
                        Contains("checkpoint-scale: log"));
  CHECK_THROWS_WITH(ds::runtime::validateCheckpointSchedule(schedule(1, CheckpointScale::Log)),
                    Contains("checkpoint-factor") && Contains(">= 1.001"));
  CHECK_THROWS_WITH(ds::runtime::validateCheckpointSchedule(schedule(-3, CheckpointScale::Linear)),
                    Contains("checkpoint-factor") && Contains("null"));
  CheckpointSchedule keep;
  keep.keepLast = -1;
  CHECK_THROWS_WITH(ds::runtime::validateCheckpointSchedule(keep),
                    Contains("keep-last-n-checkpoints"));
  CHECK_NOTHROW(ds::runtime::validateCheckpointSchedule(schedule(1.5, CheckpointScale::Log)));
  CHECK_NOTHROW(ds::runtime::validateCheckpointSchedule(schedule(1000, CheckpointScale::Linear)));
}
