// A micro-batch's loss under a loss mask, and how it weighs in the gradient, as
// Megatron computes them (pretrain_gpt.py loss_func; core/pipeline_parallel/schedules.py
// forward_step; core/distributed/finalize_model_grads.py).
#ifndef CONVEYOR_MODEL_MASKED_LOSS_H_
#define CONVEYOR_MODEL_MASKED_LOSS_H_

#include <algorithm>
#include <cstdint>

namespace conveyor {

// sum = sum_t mask_t * loss_t over the micro-batch's tokens; tokens = sum_t mask_t (every
// token without --eod-mask-loss). Megatron's loss_func returns exactly this pair.
struct MaskedLoss {
  double sum = 0.0;
  int64_t tokens = 0;

  // The micro-batch's loss: sum / max(tokens, 1). Megatron clamps the count ("protect
  // against division by zero when all tokens are masked"), so a micro-batch whose
  // tokens are all masked has loss 0 and no gradient, not NaN.
  double Mean() const { return sum / static_cast<double>(std::max<int64_t>(tokens, 1)); }

  MaskedLoss& operator+=(const MaskedLoss& other) {
    sum += other.sum;
    tokens += other.tokens;
    return *this;
  }
};

// How a micro-batch's masked loss weighs in the gradient.
struct LossWeighting {
  float scale = 1.0f;
  // false: the gradient of scale * Mean() (Megatron's default, scale = 1 / (M * DP));
  // true: of scale * sum (--calculate-per-token-loss, scale = 1 / the global batch's
  // unmasked tokens, so the step's gradient is that of the global per-token mean).
  bool per_token = false;

  // d(weighted loss) / d(loss_t) for an unmasked token t of a micro-batch with `tokens`
  // unmasked tokens.
  float TokenWeight(int64_t tokens) const {
    return per_token ? scale : scale / static_cast<float>(std::max<int64_t>(tokens, 1));
  }
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MASKED_LOSS_H_
