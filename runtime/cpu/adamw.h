// CPU reference of one AdamW step (decoupled weight decay) over a flat fp32 array.
//
// Semantics follow torch.optim.AdamW (and Megatron's fused Adam in AdamW mode):
//   m      = b1 m + (1 - b1) g
//   v      = b2 v + (1 - b2) g^2
//   m_hat  = m / (1 - b1^step),  v_hat = v / (1 - b2^step)
//   param -= lr * (weight_decay * param + m_hat / (sqrt(v_hat) + eps))
// where the weight-decay term uses the parameter from *before* the step. The CUDA
// kernel in runtime/cuda/adamw_kernel.cu is checked element by element against this.
#ifndef CONVEYOR_RUNTIME_CPU_ADAMW_H_
#define CONVEYOR_RUNTIME_CPU_ADAMW_H_

#include <cstdint>

#include "runtime/adamw_params.h"

namespace conveyor {

// PyTorch's lerp(start, end, weight): the two branches keep the result exact at
// weight 0 and weight 1 respectively. Exposed so tests can mirror it.
inline float TorchLerp(float start, float end, float weight) {
  return (weight < 0.5f && weight > -0.5f) ? start + weight * (end - start)
                                           : end - (end - start) * (1.0f - weight);
}

// One in-place AdamW step over n elements. All arrays are fp32 and hold n values;
// exp_avg / exp_avg_sq start at zero before step 1.
//
// Order of operations is exactly torch.optim.AdamW's single-tensor path, on the gradient
// g = float(grad * hp.grad_scale) (the product in double, as Megatron clips):
//   1. param      *= 1 - lr * weight_decay          (decoupled decay, old param)
//   2. exp_avg     = lerp(exp_avg, grad, 1 - beta1)
//   3. exp_avg_sq  = exp_avg_sq * beta2 + (1 - beta2) * grad * grad
//   4. denom       = sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps
//   5. param      -= (lr / (1 - beta1^step)) * (exp_avg / denom)
// which is the formula in the file comment, rearranged.
void AdamWStep(const AdamWHyperParams& hp, const float* grad, float* param, float* exp_avg,
               float* exp_avg_sq, int64_t n);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CPU_ADAMW_H_
