#include "runtime/adamw_params.h"

#include <cmath>
#include <cstdint>

namespace conveyor {

AdamWScalars ComputeAdamWScalars(const AdamWHyperParams& hp) {
  const double lr = hp.lr;
  const double beta1 = hp.beta1;
  const double beta2 = hp.beta2;
  const double step = static_cast<double>(hp.step);
  AdamWScalars s;
  s.decay_factor = static_cast<float>(1.0 - lr * hp.weight_decay);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = hp.beta2;
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, step)));
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, step)));
  s.eps = hp.eps;
  s.grad_scale = hp.grad_scale;
  return s;
}

}  // namespace conveyor
