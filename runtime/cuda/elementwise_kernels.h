// Row-broadcast and elementwise kernels of the CUDA backend: residual add, bias and its
// gradient, learned position rows. Pointers are device addresses of
// elements of the given dtypes; fp32 gradients accumulate (+=). All run on stream 0.
#ifndef CONVEYOR_RUNTIME_CUDA_ELEMENTWISE_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_ELEMENTWISE_KERNELS_H_

#include <cstdint>

#include "runtime/dtype.h"

namespace conveyor::cuda {

// y[i] += x[i] for i < n (x and y of `dtype`).
void LaunchAdd(DType dtype, const void* x, void* y, int64_t n);

// y[i] *= beta for i < n.
void LaunchScale(DType dtype, float beta, void* y, int64_t n);

// y[r, c] += bias[c] over y [rows, width].
void LaunchAddBias(DType y_dtype, DType bias_dtype, const void* bias, int64_t rows, int64_t width,
                   void* y);

// dbias[c] += sum_r dy[r, c] (deterministic order). `scratch` holds
// PlanColumnSum(rows, width).scratch_bytes(width) bytes (column_sum_plan.h).
void LaunchAccumulateBiasGrad(DType dy_dtype, const void* dy, int64_t rows, int64_t width,
                              void* scratch, float* dbias);

// x[r, c] += table[positions[r], c] (positions: device int32 [rows]). The gradient is
// the embedding's (embedding_kernels.h) with positions for ids.
void LaunchAddPositionRows(DType x_dtype, DType table_dtype, const void* table,
                           const int32_t* positions, int64_t rows, int64_t width, void* x);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_ELEMENTWISE_KERNELS_H_
