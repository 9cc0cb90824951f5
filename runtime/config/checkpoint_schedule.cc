// The NeoX checkpoint schedule (see checkpoint_schedule.h). Log powers are multiplied in double
// step by step like NeoX's Python floats, so a fractional factor truncates the same way (1.5 gives
// 1, 1, 2, 3, 5, 7, 11...); an integer factor is exact in double far past any iteration count.
#include "runtime/config/checkpoint_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace ds::runtime {
namespace {

// Largest factor accepted: the iteration counts train-iters allows are below it.
constexpr double kMaxFactor = 1e15;
// Smallest log factor: NeoX takes anything above 1, but closer to 1 saves at nearly every
// iteration, and each test of an iteration walks log(iteration) / log(factor) powers.
constexpr double kMinLogFactor = 1.001;

std::string numberText(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// Calls visit(int(power)) for power = 1, f, f*f, ... while power < limit.
template <class Visit>
void forEachLogPower(double factor, double limit, Visit visit) {
  for (double power = 1.0; power < limit; power *= factor) visit(static_cast<int64_t>(power));
}

}  // namespace

void validateCheckpointSchedule(const CheckpointSchedule& s) {
  if (!(s.factor >= 0.0 && s.factor <= kMaxFactor))
    throw Error(
        "checkpoint-factor: expected a number in (0, 1e15], or 0 or null for no periodic "
        "saves; got " +
        numberText(s.factor));
  if (s.periodic() && s.scale == CheckpointScale::Linear && std::floor(s.factor) != s.factor)
    throw Error(
        "checkpoint-factor: with checkpoint-scale linear (a save every N iterations) "
        "expected a whole number, got " +
        numberText(s.factor) + "; round it, or set checkpoint-scale: log");
  if (s.periodic() && s.scale == CheckpointScale::Log && !(s.factor >= kMinLogFactor))
    throw Error(
        "checkpoint-factor: with checkpoint-scale log (saves at factor^k) expected a "
        "number >= 1.001, got " +
        numberText(s.factor) + "; use checkpoint-scale: linear for a fixed interval");
  for (size_t i = 0; i < s.extraSaveIters.size(); ++i) {
    if (s.extraSaveIters[i] < 0)
      throw Error("extra-save-iters: expected iterations >= 0, got " +
                  std::to_string(s.extraSaveIters[i]));
    if (i > 0 && s.extraSaveIters[i] <= s.extraSaveIters[i - 1])
      throw Error("extra-save-iters: expected ascending iterations without repeats");
  }
  if (s.keepLast < 0)
    throw Error(
        "keep-last-n-checkpoints: expected a count >= 1, or null to keep every "
        "checkpoint; got " +
        std::to_string(s.keepLast));
}

bool isNeoxSaveIteration(const CheckpointSchedule& s, int64_t iteration, int64_t trainIters) {
  if (iteration < 0 || iteration > trainIters) return false;
  if (std::binary_search(s.extraSaveIters.begin(), s.extraSaveIters.end(), iteration)) return true;
  if (iteration == 0) return false;  // only an extra-save-iters 0 saves before training
  if (iteration == trainIters) return true;
  if (!s.periodic()) return false;
  if (s.scale == CheckpointScale::Linear) return iteration % static_cast<int64_t>(s.factor) == 0;
  bool hit = false;
  forEachLogPower(s.factor, static_cast<double>(iteration) + 1.0,
                  [&](int64_t power) { hit = hit || power == iteration; });
  return hit;
}

std::vector<int64_t> neoxSaveIterations(const CheckpointSchedule& s, int64_t trainIters) {
  std::vector<int64_t> out;
  if (trainIters < 0) return out;
  for (int64_t e : s.extraSaveIters)
    if (e <= trainIters) out.push_back(e);
  if (s.periodic() && s.scale == CheckpointScale::Linear) {
    const auto step = static_cast<int64_t>(s.factor);
    for (int64_t i = step; i <= trainIters; i += step) out.push_back(i);
  } else if (s.periodic()) {
    forEachLogPower(s.factor, static_cast<double>(trainIters) + 1.0,
                    [&](int64_t power) { out.push_back(power); });
  }
  if (trainIters > 0) out.push_back(trainIters);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ds::runtime
