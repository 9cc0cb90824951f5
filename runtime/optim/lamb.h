// Lamb over one shard [begin, end) of the flat parameter buffer, with DeepSpeed's FusedLamb
// semantics and per-tensor trust ratios that stay exact when ZeRO splits a tensor across ranks.
//
// Reproduced from deepspeed/ops/lamb/fused_lamb.py + csrc/lamb/fused_lamb_cuda_kernel.cu, per
// parameter tensor t and element j (g = the final unscaled gradient):
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   u = m / (sqrt(v) + eps) + wd * p        (eps_inside_sqrt: m / sqrt(v + eps) + wd * p)
//   coeff_t = ||p_t|| / ||u_t|| clamped to [min_coeff, max_coeff]; 1 if either norm is 0
//   p -= step_size * coeff_t * u,  step_size = lr * sqrt(1 - b2^t) / (1 - b1^t)  (or lr without
//        bias_correction)
// i.e. v is not bias-corrected inside the denominator (the correction rides on step_size, so eps
// is effectively scaled), weight decay is added to the update (decoupled, inside the trust
// ratio), and ||p|| is taken before the update. wd is weight_decay for specs marked weightDecay,
// 0 for the others (DeepSpeed users get this with a no-decay param group).
//
// Deliberate differences:
//  - The trust ratio is per model tensor even under ZeRO: each shard sums p^2 and u^2 of its piece
//    of every tensor (in double), sumAcrossShards adds the pieces up, so a sharded run equals the
//    unsharded one. DeepSpeed's ZeRO hands FusedLamb one flat partition, whose single ratio then
//    depends on the world size.
//  - Sums of squares, the norms and the ratio are in double (CUDA: fp32 tree reductions), then
//    rounded to fp32 once; 1 - beta and step_size are computed in double and rounded once (the
//    kernel computes 1 - b1 in fp32, off by up to ~5e-5 relative for b2 = 0.999).
//  - No max_grad_norm (the config refuses it: use gradient_clipping) and no grad scale: the engine
//    unscales and clips before step().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/config/optimizer_config.h"
#include "runtime/model/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/shard_segments.h"

namespace ds::runtime {

class Lamb : public Optimizer {
 public:
  // Every rank of a group must pass spec tables of the same length whose entry t is the same
  // tensor (or its slice): sumAcrossShards adds the ranks' partials entry by entry.
  Lamb(const LambParams& params, const std::vector<ParamSpec>& specs, size_t begin, size_t end);

  // Calls step.sumAcrossShards exactly once (when set and the table is not empty) with
  // 2 * tensors values: [sum p^2, sum u^2] of tensor 0, then tensor 1, ...
  void step(float* params, const float* grads, const OptimizerStep& step) override;
  int64_t steps() const override { return steps_; }
  void setSteps(int64_t steps) override { steps_ = steps; }
  const char* name() const override { return "Lamb"; }

  // The trust ratio each tensor used in the last step (DeepSpeed's get_lamb_coeffs()).
  const std::vector<float>& lastCoefficients() const { return coeffs_; }

 private:
  LambParams params_;
  std::vector<ShardSegment> segments_;  // one per tensor piece: ratios are per tensor
  std::vector<double> sums_;  // 2 per tensor
  std::vector<float> coeffs_;
  int64_t steps_ = 0;
};

}  // namespace ds::runtime
