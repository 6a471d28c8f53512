// LayerNorm / RMSNorm on the device with the math of runtime/cpu/norm.h: one block per
// row, statistics in fp32 (mean, rstd saved fp32 [rows]), x / dy / y / dx of the
// activation dtype, gamma / beta of either dtype, dgamma / dbeta fp32 (accumulated).
#ifndef CONVEYOR_RUNTIME_CUDA_NORM_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_NORM_KERNELS_H_

#include <cstdint>

#include "runtime/dtype.h"

namespace conveyor::cuda {

// beta null for RMSNorm (layer_norm = false), where mean is written as 0.
void LaunchNormForward(bool layer_norm, DType x_dtype, DType weight_dtype, const void* x,
                       const void* gamma, const void* beta, int64_t rows, int64_t width, float eps,
                       void* y, float* mean, float* rstd);

void LaunchNormBackwardInput(bool layer_norm, DType x_dtype, DType weight_dtype, const void* dy,
                             const void* x, const void* gamma, const float* mean, const float* rstd,
                             int64_t rows, int64_t width, void* dx);

// dgamma += sum_r dy * xhat; dbeta (may be null) += sum_r dy. `scratch` holds
// PlanColumnSum(rows, width).scratch_bytes(width) bytes (column_sum_plan.h).
void LaunchNormBackwardWeight(DType x_dtype, const void* dy, const void* x, const float* mean,
                              const float* rstd, int64_t rows, int64_t width, void* scratch,
                              float* dgamma, float* dbeta);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_NORM_KERNELS_H_
