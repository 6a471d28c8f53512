// The optimizer's vector kernels besides AdamW (adamw_kernel.h): the sum of squares
// behind the gradient norm, clipping's scale, and SGD with momentum. Each enqueues on
// `stream` and returns the launch status.
#ifndef CONVEYOR_RUNTIME_CUDA_OPTIMIZER_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_OPTIMIZER_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace conveyor {

// Blocks LaunchSumOfSquares uses at most: the size of `partials`.
inline constexpr int kSumOfSquaresMaxBlocks = 1024;

// partials[b] = sum over the elements block b visits of double(x[i])^2, for the
// `*blocks` blocks it launches (set on return). The caller adds the partials in block
// order on the host, so the result does not depend on scheduling (no atomics).
cudaError_t LaunchSumOfSquares(const float* x, int64_t n, double* partials, int* blocks,
                               cudaStream_t stream = nullptr);

// x[i] = float(double(x[i]) * factor).
cudaError_t LaunchScale(double factor, float* x, int64_t n, cudaStream_t stream = nullptr);

// torch.optim.SGD per element: d = g + wd p; buf = first_step ? d : momentum buf + d;
// p -= lr buf.
cudaError_t LaunchSgdStep(float lr, float momentum, float weight_decay, bool first_step,
                          const float* grad, float* param, float* momentum_buf, int64_t n,
                          cudaStream_t stream = nullptr);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CUDA_OPTIMIZER_KERNELS_H_
