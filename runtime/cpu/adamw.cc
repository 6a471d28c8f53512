#include "runtime/cpu/adamw.h"

#include <cmath>
#include <cstdint>

namespace conveyor {

void AdamWStep(const AdamWHyperParams& hp, const float* grad, float* param, float* exp_avg,
               float* exp_avg_sq, int64_t n) {
  const AdamWScalars s = ComputeAdamWScalars(hp);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float p = param[i] * s.decay_factor;
    const float m = TorchLerp(exp_avg[i], g, s.one_minus_beta1);
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    param[i] = p - s.step_size * (m / denom);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

}  // namespace conveyor
