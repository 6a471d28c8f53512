// AdamW's hyper-parameters and the per-step scalars derived from them, shared by every
// backend's optimizer arithmetic (runtime/optimizer_ops.h): the CPU reference
// (runtime/cpu/adamw.h) and the CUDA kernel (runtime/cuda/adamw_kernel.cu) start each
// step from the same fp32 constants.
#ifndef CONVEYOR_RUNTIME_ADAMW_PARAMS_H_
#define CONVEYOR_RUNTIME_ADAMW_PARAMS_H_

#include <cstdint>

namespace conveyor {

struct AdamWHyperParams {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  int64_t step;  // 1-based: the first update is step 1 (used for bias correction).
  // Each gradient enters the step as float(g * grad_scale), the product in double:
  // Megatron's clipping (trainer/optimization/optimizer.h) folded into the update
  // rather than a pass of its own over the gradients. 1 leaves them unchanged.
  double grad_scale = 1.0;
};

// The per-step scalars every AdamW implementation in Conveyor uses. They are computed
// once per step in double, as PyTorch does in Python, then rounded to fp32, so that
// the CPU reference and the CUDA kernel start from identical fp32 constants.
struct AdamWScalars {
  float decay_factor;     // 1 - lr * weight_decay
  float one_minus_beta1;  // lerp weight for the first moment
  float beta2;
  float one_minus_beta2;
  float step_size;              // lr / (1 - beta1^step)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
  double grad_scale;
};

AdamWScalars ComputeAdamWScalars(const AdamWHyperParams& hp);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_ADAMW_PARAMS_H_
