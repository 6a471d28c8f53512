// AdamW step on the device: fp32 master params, fp32 moments, fp32 grads.
// Same math and the same order of fp32 operations as the CPU reference
// (runtime/cpu/adamw.h), so the two agree to the last bit or nearly so.
#ifndef CONVEYOR_RUNTIME_CUDA_ADAMW_KERNEL_H_
#define CONVEYOR_RUNTIME_CUDA_ADAMW_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cpu/adamw.h"

namespace conveyor {

// Enqueues one in-place AdamW step over n device-resident elements on `stream`.
// Returns cudaErrorInvalidValue for n < 0 or null pointers with n > 0, otherwise the
// launch status (asynchronous errors surface at the next synchronisation).
cudaError_t LaunchAdamWStep(const AdamWHyperParams& hp, const float* grad, float* param,
                            float* exp_avg, float* exp_avg_sq, int64_t n,
                            cudaStream_t stream = nullptr);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CUDA_ADAMW_KERNEL_H_
