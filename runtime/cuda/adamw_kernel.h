// AdamW step on the device: fp32 master params, fp32 moments, fp32 grads.
// Same math and the same order of fp32 operations as the CPU reference
// (runtime/cpu/adamw.h), so the two agree to the last bit or nearly so.
#ifndef CONVEYOR_RUNTIME_CUDA_ADAMW_KERNEL_H_
#define CONVEYOR_RUNTIME_CUDA_ADAMW_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/adamw_params.h"

namespace conveyor {

// Enqueues one in-place AdamW step over n device-resident elements on `stream`.
// Returns cudaErrorInvalidValue for n < 0 or null pointers with n > 0, otherwise the
// launch status (asynchronous errors surface at the next synchronisation).
cudaError_t LaunchAdamWStep(const AdamWHyperParams& hp, const float* grad, float* param,
                            float* exp_avg, float* exp_avg_sq, int64_t n,
                            cudaStream_t stream = nullptr);

// Elements a block of the multi-tensor step updates.
inline constexpr int64_t kAdamWChunk = 4096;

// One tensor of a multi-tensor step, as the kernel reads it from device memory: its
// arrays, its own decay factor (ComputeAdamWScalars(hp with its weight decay)), and the
// index of its first block: tensor k owns blocks [first_block_k, first_block_k+1), one per
// kAdamWChunk elements; first_block increases along the table.
struct AdamWDeviceTensor {
  const float* grad;
  float* param;
  float* exp_avg;
  float* exp_avg_sq;
  int64_t n;
  float decay_factor;
  int64_t first_block;
};

// One AdamW step over the `count` tensors of the device-resident `table` (hp's weight
// decay unused: each tensor's decay factor applies), `blocks` = the sum of
// ceil(n / kAdamWChunk), in one launch on `stream`.
cudaError_t LaunchAdamWTensors(const AdamWHyperParams& hp, const AdamWDeviceTensor* table,
                               int count, int64_t blocks, cudaStream_t stream = nullptr);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CUDA_ADAMW_KERNEL_H_
