#include "runtime/cpu/adamw.h"

#include <cmath>
#include <cstdint>

#include "runtime/cpu/vector_math.h"

namespace conveyor {
namespace {

// The step of element i, stored by the caller. Every operation is one IEEE rounding
// (sqrt and division included), so vector lanes give the scalar loop's bits.
struct Updated {
  float param, exp_avg, exp_avg_sq;
};

[[gnu::always_inline]] inline Updated Update(const AdamWScalars& s, float grad, float param,
                                             float exp_avg, float exp_avg_sq) {
  const float g = static_cast<float>(grad * s.grad_scale);
  const float p = param * s.decay_factor;
  const float m = TorchLerp(exp_avg, g, s.one_minus_beta1);
  const float v = exp_avg_sq * s.beta2 + s.one_minus_beta2 * g * g;
  const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
  return {p - s.step_size * (m / denom), m, v};
}

}  // namespace

// Blocks of kLanes elements whose results are all computed before any is stored, the
// shape -O2 vectorises (vector_math.h's MapLanes, with three outputs).
CONVEYOR_VECTOR_CLONES
void AdamWStep(const AdamWHyperParams& hp, const float* grad, float* param, float* exp_avg,
               float* exp_avg_sq, int64_t n) {
  const AdamWScalars s = ComputeAdamWScalars(hp);
  int64_t i = 0;
  for (; i + cpu::kLanes <= n; i += cpu::kLanes) {
    Updated block[cpu::kLanes];
    for (int j = 0; j < cpu::kLanes; ++j) {
      block[j] = Update(s, grad[i + j], param[i + j], exp_avg[i + j], exp_avg_sq[i + j]);
    }
    for (int j = 0; j < cpu::kLanes; ++j) {
      param[i + j] = block[j].param;
      exp_avg[i + j] = block[j].exp_avg;
      exp_avg_sq[i + j] = block[j].exp_avg_sq;
    }
  }
  for (; i < n; ++i) {
    const Updated u = Update(s, grad[i], param[i], exp_avg[i], exp_avg_sq[i]);
    param[i] = u.param;
    exp_avg[i] = u.exp_avg;
    exp_avg_sq[i] = u.exp_avg_sq;
  }
}

}  // namespace conveyor
