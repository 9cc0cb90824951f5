// The "optimizer" block of ds_config.json: type and the params of that type, typed and validated.
// Parsed by parseOptimizerConfig (called from parseDeepSpeedConfig); JSON stays out of this header.
// Names and defaults are those of the class DeepSpeed builds for the type (see each struct).
#pragma once

#include <cstdint>
#include <variant>

namespace ds::runtime {

// DeepSpeed lower-cases "Adam", "AdamW" and "Lamb"; "SGD" reaches torch.optim.SGD by exact name
// there, but we accept every spelling of all four.
enum class OptimizerType { Adam, AdamW, Lamb, SGD, OneBitAdam, ZeroOneAdam, OneBitLamb };

// OneBitAdam, ZeroOneAdam, OneBitLamb: the optimizers that exchange compressed momentums.
bool isOneBit(OptimizerType type);

// DeepSpeed's FusedAdam (torch.optim.Adam / AdamW with torch_adam: same maths).
struct AdamParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  bool adamWMode = true;       // decoupled weight decay; false = L2 added to the gradient
  bool biasCorrection = true;  // FusedAdam's bias_correction
};

// DeepSpeed's FusedLamb (deepspeed/ops/lamb/fused_lamb.py).
struct LambParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  bool biasCorrection = true;
  bool epsInsideSqrt = false;  // true: sqrt(v + eps); false: sqrt(v) + eps
  double maxCoeff = 10.0;      // trust ratio clamp
  double minCoeff = 0.01;
};

// What DeepSpeed's three 1-bit optimizers share, with their defaults. Their bias_correction is
// accepted and, as in DeepSpeed, changes nothing; cuda_aware and comm_backend_name pick
// DeepSpeed's transport, here the job's own communicator carries it.
struct OneBitCommonParams {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
};

// DeepSpeed's OnebitAdam (runtime/optim/onebit_adam.h): its names and defaults.
struct OneBitAdamParams : OneBitCommonParams {
  int64_t freezeStep = 100000;
};

// DeepSpeed's ZeroOneAdam (runtime/optim/zero_one_adam.h): its names and defaults.
struct ZeroOneAdamParams : OneBitCommonParams {
  int64_t varFreezeStep = 100000;   // the last step that may update the variance
  int64_t varUpdateScaler = 16;     // variance updates per interval before it doubles
  int64_t localStepScaler = 32678;  // steps per local-step interval before it doubles
  int64_t localStepClipper = 16;    // the largest local-step interval
};

// DeepSpeed's OnebitLamb (runtime/optim/onebit_lamb.h): its names and defaults.
struct OneBitLambParams : OneBitCommonParams {
  int64_t freezeStep = 100000;
  double maxCoeff = 10.0, minCoeff = 0.01;  // the warm-up's trust-ratio clamp
  double coeffBeta = 0.9;                   // the frozen coefficient's moving average
  double factorMax = 4.0, factorMin = 0.5;  // the compressed steps' scaling factor clamp
  double factorThreshold = 0.1;             // its largest relative change per step
};

// torch.optim.SGD. lr defaults to 1e-3 as in torch >= 2.0 (torch 1.x made it required).
struct SgdParams {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weightDecay = 0.0;  // L2, added to the gradient
  bool nesterov = false;
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::Adam;
  // AdamParams for Adam and AdamW; the alternative always matches `type`.
  std::variant<AdamParams, LambParams, SgdParams, OneBitAdamParams, ZeroOneAdamParams,
               OneBitLambParams>
      params;

  // The configured lr, where LR schedules start from.
  double lr() const;
  // beta1 (Adam, Lamb) or SGD momentum: what OneCycle's cycle_momentum replaces.
  double momentum() const;
};

// "Adam", "AdamW", "Lamb", "SGD", "OneBitAdam", "ZeroOneAdam", "OneBitLamb".
const char* optimizerTypeName(OptimizerType type);

// The fp32 state bytes per parameter that optimizer keeps: Adam, AdamW, Lamb, OneBitAdam and
// ZeroOneAdam two moments (8), OneBitLamb also its fresh variance (12), SGD its momentum if it
// has one (4, else 0).
double optimizerStateBytesPerParameter(const OptimizerConfig& config);

// Per parameter, what a 1-bit optimizer keeps beside its element-wise state over `world` ranks:
// the worker error (one float an element) and the server error (its 1 / world chunk), and 0/1
// Adam's momentum accumulator or 1-bit LAMB's previous momentum (one float); 0 for the others.
// Padding aside.
double oneBitFeedbackBytesPerParameter(const OptimizerConfig& config, int world);

// Whether `config` can update a model sliced over `modelParallelSize` ranks: not Lamb yet. Throws
// ds::Error naming the key; the NeoX parser asks before any rank starts, the engine again.
void checkOptimizerModelParallel(const OptimizerConfig& config, int modelParallelSize);
// Whether `config` fits the job's layout: a 1-bit optimizer only at ZeRO stage 0 (as DeepSpeed)
// and, for now, without pipeline or model parallelism or MoE experts. Throws ds::Error naming
// the key; the config's validation asks, the engine again.
void checkOneBitLayout(const OptimizerConfig& config, int zeroStage, int pipe, int model,
                       bool experts);

}  // namespace ds::runtime
