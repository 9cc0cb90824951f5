// Batch-size inference (DEEPSPEED-SEMANTICS.md 15.3/15.4). The arithmetic is Python's: `//`
// floors toward negative infinity, so negative inputs give DeepSpeed's numbers, not C++'s.
#include "runtime/config/batch_size.h"

#include <limits>
#include <string>

#include "common/error.h"

namespace ds::runtime {
namespace {

// Python's a // b for b != 0. C++ '/' truncates toward zero: 7 / -2 == -3, but 7 // -2 == -4.
int64_t floorDiv(int64_t a, int64_t b) {
  if (a == std::numeric_limits<int64_t>::min() && b == -1) {
    throw Error("batch size arithmetic overflows: " + std::to_string(a) + " // -1");
  }
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Python ints do not overflow; ours would, so refuse instead of wrapping silently.
int64_t checkedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw Error("batch size arithmetic overflows: " + std::to_string(a) + " * " +
                std::to_string(b) + " does not fit in 64 bits");
  }
  return out;
}

// DeepSpeed raises a bare ZeroDivisionError here; we say which key is zero and what it divides.
void requireNonZeroDivisor(int64_t value, const char* key, const char* what) {
  if (value == 0) {
    throw Error(std::string(key) + " is 0: it has to be greater than 0 (" + what + ")");
  }
}

}  // namespace

BatchConfig inferBatchSizes(std::optional<int64_t> train, std::optional<int64_t> micro,
                            std::optional<int64_t> gas, int64_t worldSize) {
  if (worldSize < 1) {
    throw Error("world size has to be greater than 0, got " + std::to_string(worldSize));
  }
  const int64_t w = worldSize;

  // Same case order as _set_batch_related_parameters.
  if (train && micro && gas) {
    // Nothing to infer.
  } else if (train && micro) {
    requireNonZeroDivisor(*micro, "train_micro_batch_size_per_gpu",
                          "train_batch_size is divided by it to infer gradient_accumulation_steps");
    gas = floorDiv(floorDiv(*train, *micro), w);
  } else if (train && gas) {
    requireNonZeroDivisor(*gas, "gradient_accumulation_steps",
                          "train_batch_size is divided by it to infer "
                          "train_micro_batch_size_per_gpu");
    micro = floorDiv(floorDiv(*train, w), *gas);
  } else if (micro && gas) {
    train = checkedMul(checkedMul(*micro, *gas), w);
  } else if (train) {
    gas = 1;
    micro = floorDiv(*train, w);
  } else if (micro) {
    train = checkedMul(*micro, w);
    gas = 1;
  } else {
    throw Error("Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
  }

  // _batch_assertion, in its order, on the computed values. The inferred trio and the world
  // size follow DeepSpeed's message, so the user sees which input produced the bad number.
  const std::string trio = " (train_batch_size " + std::to_string(*train) +
                           ", train_micro_batch_size_per_gpu " + std::to_string(*micro) +
                           ", gradient_accumulation_steps " + std::to_string(*gas) +
                           ", world size " + std::to_string(w) + ")";
  if (*train <= 0) {
    throw Error("Train batch size: " + std::to_string(*train) + " has to be greater than 0" + trio);
  }
  if (*micro <= 0) {
    throw Error("Micro batch size per gpu: " + std::to_string(*micro) +
                " has to be greater than 0" + trio);
  }
  if (*gas <= 0) {
    throw Error("Gradient accumulation steps: " + std::to_string(*gas) +
                " has to be greater than 0" + trio);
  }
  if (*train != checkedMul(checkedMul(*micro, *gas), w)) {
    throw Error(
        "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size: " +
        std::to_string(*train) + " != " + std::to_string(*micro) + " * " + std::to_string(*gas) +
        " * " + std::to_string(w) + " (world size " + std::to_string(w) + ")");
  }
  return BatchConfig{*train, *micro, *gas};
}

BatchConfig inferBatchSizes(std::optional<int64_t> train, std::optional<int64_t> micro,
                            std::optional<int64_t> gas, const PipeModelDataTopology& topology) {
  return inferBatchSizes(train, micro, gas, topology.dataParallelSize());
}

}  // namespace ds::runtime
